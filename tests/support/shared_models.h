// The shared stories260K model and its reference files (tests/data), for the e2e and gpu tests.
#pragma once

#include "test_support.h"

#include "model/model.h"

#include <QString>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvscope::test {

// format: "hf" (the Hugging Face directory) or "gguf".
inline std::shared_ptr<const Model> load_stories(const QString& format) {
    const std::string dir = models_dir();
    return load_model(format == "hf" ? dir + "/stories260K-hf" : dir + "/stories260K-f32.gguf");
}

// One case of tests/data/reference_logits: a prompt, run.c's greedy continuation of it, and run.c's raw
// logits before each generated token (row t scored generated_ids[t]).
struct ReferenceLogits {
    static constexpr int kVocab = 512;
    std::string file;  // the logits file's name, for messages
    std::vector<int32_t> prompt_ids, generated_ids;
    std::vector<float> logits;  // [generated_ids.size(), kVocab]
    const float* row(size_t t) const { return logits.data() + t * kVocab; }
    // prompt_ids then every generated token but the last: one prefill over it gives all the rows, the
    // first from position prompt_ids.size() - 1.
    std::vector<int32_t> scored_tokens() const {
        std::vector<int32_t> tokens = prompt_ids;
        tokens.insert(tokens.end(), generated_ids.begin(), generated_ids.end() - 1);
        return tokens;
    }
};

// Every case in index.json order; stops the suite when a file cannot be read whole.
inline std::vector<ReferenceLogits> reference_logits() {
    const std::string dir = models_dir() + "/reference_logits";
    std::vector<ReferenceLogits> cases;
    for (const auto& entry : read_json(dir + "/index.json")) {
        ReferenceLogits c;
        c.file = entry["file"].get<std::string>();
        c.prompt_ids = entry["prompt_ids"].get<std::vector<int32_t>>();
        c.generated_ids = entry["generated_ids"].get<std::vector<int32_t>>();
        c.logits.resize(c.generated_ids.size() * ReferenceLogits::kVocab);
        std::ifstream f(dir + "/" + c.file, std::ios::binary);
        f.read(reinterpret_cast<char*>(c.logits.data()), static_cast<std::streamsize>(c.logits.size() * sizeof(float)));
        if (!f.good()) qFatal("cannot read %zu logits from %s/%s", c.logits.size(), dir.c_str(), c.file.c_str());
        cases.push_back(std::move(c));
    }
    return cases;
}

// log_softmax of one logits row: the log-probabilities run.c's logits give.
inline std::vector<double> log_softmax(const float* row, int n = ReferenceLogits::kVocab) {
    const double mx = *std::max_element(row, row + n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(row[i] - mx);
    std::vector<double> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) out[size_t(i)] = row[i] - mx - std::log(sum);
    return out;
}

}  // namespace kvscope::test
