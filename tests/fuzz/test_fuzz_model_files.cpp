// Fuzzes the GGUF and safetensors readers: thousands of seeded mutations of small valid files (byte
// flips, truncations, length and count fields set to huge values, inserted or deleted junk, JSON token
// damage) must each either open or throw BadInput; nothing may crash, read out of bounds (run under
// ASan/UBSan with -DKVSCOPE_SANITIZE=ON), or throw anything else such as std::bad_alloc.
#include "test_support.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/safetensors_file.h"
#include "model/safetensors_writer.h"
#include "util/errors.h"

#include <QDir>
#include <QTemporaryDir>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

using namespace kvscope;

namespace {

using Bytes = std::vector<uint8_t>;

void write_bytes(const std::string& path, const Bytes& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

Bytes read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Thousands of small files are written and mapped: on tmpfs when there is one, since a disk makes the
// run I/O bound (about 60 s instead of a few seconds).
QString scratch_template() {
    std::error_code ec;
    if (std::filesystem::is_directory("/dev/shm", ec)) return QStringLiteral("/dev/shm/kvscope-fuzz-XXXXXX");
    return QDir::tempPath() + QStringLiteral("/kvscope-fuzz-XXXXXX");
}

Bytes random_bytes(size_t n, std::mt19937_64& rng) {
    Bytes v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

Bytes small_gguf(std::mt19937_64& rng) {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.context_length", 128);
    w.set_f32("llama.rope.freq_base", 10000.0f);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_u64("general.size", 12345);
    w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "b", "ab", "\xe2\x96\x81the"});
    w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -3, -4});
    w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1});
    w.add_tensor("token_embd.weight", {8, 2}, 0, random_bytes(64, rng));
    w.add_tensor("blk.0.attn_q.weight", {32, 2}, 8, random_bytes(68, rng));
    w.add_tensor("blk.0.ffn_up.weight", {256}, 12, random_bytes(144, rng));
    w.add_tensor("output_norm.weight", {4}, 1, random_bytes(8, rng));
    return w.to_bytes();
}

Bytes small_safetensors(const std::string& path, std::mt19937_64& rng) {
    write_safetensors(path,
                      {{"model.embed_tokens.weight", "F32", {2, 8}, random_bytes(64, rng)},
                       {"model.layers.0.self_attn.q_proj.weight", "F16", {4, 4}, random_bytes(32, rng)},
                       {"model.norm.weight", "BF16", {8}, random_bytes(16, rng)},
                       {"empty", "I64", {0}, {}}},
                      {{"format", "pt"}});
    return read_bytes(path);
}

const uint64_t kHuge[] = {~uint64_t(0), uint64_t(1) << 62, uint64_t(1) << 32, uint64_t(1) << 63,
                          uint64_t(std::numeric_limits<int64_t>::max()), 0, 0xFFFFFFFFull, 1u << 20};
const uint32_t kOddU32[] = {0, 1, 4, 5, 9, 12, 13, 99, 0x80000000u, 0xFFFFFFFFu};
const char* const kJsonTokens[] = {"-1", "1e400", "18446744073709551615", "99999999999999999999", "[", "]", "{",
                                   "}", "\"", ",", ":", "null", "0", "9", "[[[[", "\"F16\"", "\"dtype\"", "\\u0000"};

template <class T>
void poke(Bytes& b, size_t at, T v) {
    if (at + sizeof(T) <= b.size()) std::memcpy(b.data() + at, &v, sizeof(T));
}

// One random mutation; `hot` is the size of the header region where lengths and counts live, which
// gets most of the targeted damage.
std::string mutate(Bytes& b, size_t hot, bool json_header, std::mt19937_64& rng) {
    auto pick = [&](size_t n) { return n == 0 ? size_t(0) : static_cast<size_t>(rng() % n); };
    const size_t region = std::min(hot, b.size());
    switch (rng() % 8) {
    case 0: {
        const size_t n = 1 + pick(8);
        for (size_t k = 0; k < n && !b.empty(); ++k) b[pick(b.size())] = static_cast<uint8_t>(rng());
        return "flip " + std::to_string(n) + " bytes";
    }
    case 1: {
        const size_t n = pick(b.size());
        b.resize(n);
        return "truncate to " + std::to_string(n);
    }
    case 2: {
        const size_t at = pick(region);
        poke<uint64_t>(b, at, kHuge[pick(std::size(kHuge))]);
        return "u64 at " + std::to_string(at);
    }
    case 3: {
        const size_t at = pick(region);
        poke<uint32_t>(b, at, kOddU32[pick(std::size(kOddU32))]);
        return "u32 at " + std::to_string(at);
    }
    case 4: {
        const size_t at = pick(b.size() + 1);
        const Bytes junk = random_bytes(1 + pick(64), rng);
        b.insert(b.begin() + static_cast<ptrdiff_t>(at), junk.begin(), junk.end());
        return "insert " + std::to_string(junk.size()) + " at " + std::to_string(at);
    }
    case 5: {
        const size_t at = pick(b.size());
        const size_t n = std::min(b.size() - at, 1 + pick(32));
        b.erase(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
        return "delete " + std::to_string(n) + " at " + std::to_string(at);
    }
    case 6: {
        if (json_header && region > 8) {  // damage the JSON text, keeping or fixing the length field
            const char* tok = kJsonTokens[pick(std::size(kJsonTokens))];
            const size_t at = 8 + pick(region - 8);
            const size_t cut = pick(4);
            b.erase(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(std::min(b.size(), at + cut)));
            b.insert(b.begin() + static_cast<ptrdiff_t>(at), tok, tok + std::strlen(tok));
            if (rng() % 2) poke<uint64_t>(b, 0, hot - 8 + std::strlen(tok) - cut);
            return std::string("json token ") + tok + " at " + std::to_string(at);
        }
        const size_t at = pick(region);
        poke<uint64_t>(b, at, b.size() + pick(64));
        return "u64 file size at " + std::to_string(at);
    }
    default: {
        std::string what;
        for (int k = 0; k < 2; ++k) what += mutate(b, hot, json_header, rng) + "; ";
        return what;
    }
    }
}

// Touches every byte of an opened tensor, so an out-of-range pointer faults here (or trips ASan).
uint64_t checksum(const uint8_t* data, size_t n) {
    uint64_t s = 0;
    for (size_t k = 0; k < n; ++k) s += data[k];
    return s;
}

// The outcome of opening one mutant: opened or rejected with BadInput naming the file; anything else
// (another exception type, a message without the path, a tensor outside the file) is a failure.
struct Outcome {
    bool opened = false;
    std::string failure;
};

template <class Check>
Outcome try_open(const std::string& path, Check&& open_and_check) {
    Outcome o;
    try {
        o.failure = open_and_check();
        o.opened = true;
    } catch (const BadInput& e) {
        if (std::string(e.what()).find(path) == std::string::npos)
            o.failure = std::string("message lacks the path: ") + e.what();
    } catch (const std::exception& e) {
        o.failure = std::string("non-BadInput exception: ") + e.what();
    }
    return o;
}

Outcome try_gguf(const std::string& path) {
    return try_open(path, [&]() -> std::string {
        GgufFile g = GgufFile::open(path);
        const uint8_t* begin = g.file().data();
        const uint8_t* end = begin + g.file().size();
        for (const GgufTensorInfo& t : g.tensors()) {
            if (t.data < begin || t.nbytes > size_t(end - t.data)) return "tensor '" + t.name + "' lies outside the file";
            if (t.num_elements() <= 0) return "tensor '" + t.name + "' has no elements";
            checksum(t.data, t.nbytes);
        }
        return "";
    });
}

Outcome try_safetensors(const std::string& path) {
    return try_open(path, [&]() -> std::string {
        SafetensorsModel m = SafetensorsModel::open(path);
        for (const SafetensorsTensor& t : m.tensors()) checksum(t.data, t.nbytes);
        return "";
    });
}

}  // namespace

class TestFuzzModelFiles : public QObject {
    Q_OBJECT
private:
    // Runs `iterations` random mutants of base through `open`; fails on the first bad outcome.
    template <class Open>
    void fuzz(const char* format, const Bytes& base, size_t hot, bool json_header, const std::string& path, Open&& open,
              int iterations) {
        const uint64_t seed = test::test_seed(20251202);
        std::mt19937_64 rng(seed);
        int opened = 0;
        for (int iter = 0; iter < iterations; ++iter) {
            Bytes b = base;
            const std::string what = mutate(b, hot, json_header, rng);
            write_bytes(path, b);
            const Outcome o = open(path);
            QVERIFY2(o.failure.empty(), (std::string(format) + " iteration " + std::to_string(iter) + " (" + what +
                                         "): " + o.failure).c_str());
            opened += o.opened;
        }
        qInfo("%s: %d mutants, %d opened, %d rejected with BadInput", format, iterations, opened, iterations - opened);
    }

    // Every position of the header region set to every huge u64 and odd u32: systematic coverage of
    // each length, count, type and offset field, which random mutation may miss.
    template <class Open>
    void sweep(const char* format, const Bytes& base, size_t hot, const std::string& path, Open&& open) {
        int runs = 0;
        for (size_t at = 0; at < hot; ++at) {
            for (uint64_t v : kHuge) {
                Bytes b = base;
                poke<uint64_t>(b, at, v);
                write_bytes(path, b);
                const Outcome o = open(path);
                QVERIFY2(o.failure.empty(), (std::string(format) + " u64 " + std::to_string(v) + " at " + std::to_string(at) +
                                             ": " + o.failure).c_str());
                ++runs;
            }
            for (uint32_t v : kOddU32) {
                Bytes b = base;
                poke<uint32_t>(b, at, v);
                write_bytes(path, b);
                const Outcome o = open(path);
                QVERIFY2(o.failure.empty(), (std::string(format) + " u32 " + std::to_string(v) + " at " + std::to_string(at) +
                                             ": " + o.failure).c_str());
                ++runs;
            }
        }
        qInfo("%s: %d field sweeps", format, runs);
    }

private slots:
    void fuzzGguf() {
        std::mt19937_64 rng(1);
        QTemporaryDir dir(scratch_template());
        const std::string path = dir.filePath("fuzz.gguf").toStdString();
        const Bytes base = small_gguf(rng);
        write_bytes(path, base);
        const size_t hot = GgufFile::open(path).data_offset();  // everything before the tensor data
        fuzz("gguf", base, hot, false, path, try_gguf, 6000);
    }

    void sweepGgufFields() {
        std::mt19937_64 rng(1);
        QTemporaryDir dir(scratch_template());
        const std::string path = dir.filePath("sweep.gguf").toStdString();
        const Bytes base = small_gguf(rng);
        write_bytes(path, base);
        sweep("gguf", base, GgufFile::open(path).data_offset(), path, try_gguf);
    }

    void fuzzSafetensors() {
        std::mt19937_64 rng(2);
        QTemporaryDir dir(scratch_template());
        const std::string path = dir.filePath("fuzz.safetensors").toStdString();
        const Bytes base = small_safetensors(path, rng);
        uint64_t header_len;
        std::memcpy(&header_len, base.data(), 8);
        fuzz("safetensors", base, 8 + header_len, true, path, try_safetensors, 6000);
    }

    void sweepSafetensorsLengthField() {
        std::mt19937_64 rng(2);
        QTemporaryDir dir(scratch_template());
        const std::string path = dir.filePath("sweep.safetensors").toStdString();
        const Bytes base = small_safetensors(path, rng);
        sweep("safetensors", base, 8, path, try_safetensors);
        // Every header length from 0 to past the end of the file.
        for (uint64_t len = 0; len < base.size() + 16; ++len) {
            Bytes b = base;
            poke<uint64_t>(b, 0, len);
            write_bytes(path, b);
            const Outcome o = try_safetensors(path);
            QVERIFY2(o.failure.empty(), ("header length " + std::to_string(len) + ": " + o.failure).c_str());
        }
    }
};

QTEST_GUILESS_MAIN(TestFuzzModelFiles)
#include "test_fuzz_model_files.moc"
