// Shared helpers for the Qt Test suites: where the shared models live, and seeded randomness that
// prints its seed so a failure can be replayed (KVSCOPE_TEST_SEED=N).
#pragma once

#include <QtTest>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kvscope::test {

// The directory of the test models (tests/data, or $KVSCOPE_TEST_MODELS). Fails the calling test (never skips) when it is missing.
inline std::string models_dir() {
    const char* env = std::getenv("KVSCOPE_TEST_MODELS");
    std::string dir = (env && *env) ? env : KVSCOPE_DEFAULT_TEST_MODELS;
    if (!std::filesystem::is_directory(dir))
        qFatal("test models not found at %s (set KVSCOPE_TEST_MODELS)", dir.c_str());
    return dir;
}

// A seed from KVSCOPE_TEST_SEED or the given default, printed so that a failing run can be repeated.
inline uint64_t test_seed(uint64_t fallback) {
    const char* env = std::getenv("KVSCOPE_TEST_SEED");
    uint64_t seed = (env && *env) ? std::strtoull(env, nullptr, 10) : fallback;
    qInfo("seed %llu (KVSCOPE_TEST_SEED to repeat)", static_cast<unsigned long long>(seed));
    return seed;
}

inline std::string cli_path() { return KVSCOPE_CLI_PATH; }

// A JSON file; stops the suite when it cannot be read.
inline nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    if (!in) qFatal("cannot read %s", path.c_str());
    return nlohmann::json::parse(in);
}
inline nlohmann::json read_json(const QString& path) { return read_json(path.toStdString()); }

// A JSON-lines file: one value per non-empty line.
inline std::vector<nlohmann::json> read_jsonl(const QString& path) {
    std::ifstream in(path.toStdString());
    if (!in) qFatal("cannot read %s", qPrintable(path));
    std::vector<nlohmann::json> rows;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
    return rows;
}

// n prompts of 1..40 token ids inside the vocabulary (BOS = 1 first), seeded.
inline std::vector<std::vector<int32_t>> random_prompts(int n, int vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> tok(3, vocab - 1);
    std::vector<std::vector<int32_t>> out(n);
    for (int i = 0; i < n; ++i) {
        out[i].push_back(1);
        const int len = std::uniform_int_distribution<int>(1, 40)(rng);
        while (static_cast<int>(out[i].size()) < len) out[i].push_back(tok(rng));
    }
    return out;
}

// A whole file as bytes ("" when it cannot be read).
inline std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace kvscope::test
