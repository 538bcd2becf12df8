// GgufFile and GgufWriter: reads the shared stories260K GGUF, round-trips every metadata setter and
// tensor type through the writer, and checks that each kind of damage (truncation, bad magic or version,
// huge counts and lengths, bad dims, misaligned or out-of-file data) throws BadInput naming the file.
#include "test_support.h"
#include "model/gguf_file.h"
#include "model/gguf_vocab.h"
#include "model/gguf_writer.h"
#include "model/safetensors_file.h"
#include "util/errors.h"
#include "util/utf8.h"

#include <QTemporaryDir>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>

using namespace kvscope;

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// The BadInput message of opening path, or "" when it opened.
std::string open_error(const std::string& path) {
    try {
        GgufFile::open(path);
    } catch (const BadInput& e) {
        return e.what();
    }
    return "";
}

std::vector<uint8_t> random_bytes(size_t n, std::mt19937_64& rng) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
}

// Byte position of a GGUF string (u64 length + bytes) in a file, for hand-damaging the field after it.
size_t find_gguf_string(const std::vector<uint8_t>& bytes, const std::string& s) {
    std::vector<uint8_t> needle(8);
    const uint64_t len = s.size();
    std::memcpy(needle.data(), &len, 8);
    needle.insert(needle.end(), s.begin(), s.end());
    auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
    if (it == bytes.end()) qFatal("string %s not in file", s.c_str());
    return static_cast<size_t>(it - bytes.begin()) + needle.size();  // just past the string
}

template <class T>
void poke(std::vector<uint8_t>& bytes, size_t at, T v) {
    std::memcpy(bytes.data() + at, &v, sizeof(T));
}

// A small file with every part the reader validates: scalars, a string array, an aligned Q8_0 and an
// F32 tensor. Returns the writer's bytes.
std::vector<uint8_t> small_gguf() {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("general.alignment", 32);
    w.set_u32("test.k1", 1);
    w.set_u32("test.k2", 2);
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
    w.add_tensor("t0", {32, 2}, 8, std::vector<uint8_t>(2 * 34, 7));
    w.add_tensor("t1", {4}, 0, std::vector<uint8_t>(16, 9));
    return w.to_bytes();
}

}  // namespace

class TestGgufFile : public QObject {
    Q_OBJECT
private slots:
    void readsStories260K() {
        const std::string path = test::models_dir() + "/stories260K-f32.gguf";
        GgufFile g = GgufFile::open(path);
        QCOMPARE(g.version(), 3u);
        QCOMPARE(g.alignment(), size_t(32));
        QCOMPARE(g.get_string("general.architecture"), std::string("llama"));
        QCOMPARE(g.get_int("llama.context_length"), int64_t(512));
        QCOMPARE(g.get_int("llama.block_count"), int64_t(5));
        QCOMPARE(g.get_int("llama.attention.head_count_kv"), int64_t(4));
        QCOMPARE(g.get_float("llama.rope.freq_base"), 10000.0);
        QVERIFY(std::abs(g.get_float("llama.attention.layer_norm_rms_epsilon") - 1e-5) < 1e-9);
        QCOMPARE(g.get_bool_or("tokenizer.ggml.add_bos_token", false), true);
        QCOMPARE(g.metadata().size(), size_t(24));

        const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
        QVERIFY(tokens);
        QCOMPARE(tokens->type, GgufType::ARRAY);
        QCOMPARE(tokens->array_type, GgufType::STRING);
        QCOMPARE(tokens->strings.size(), size_t(512));
        QCOMPARE(tokens->strings[1], std::string("<s>"));
        QCOMPARE(g.find("tokenizer.ggml.scores")->numbers.size(), size_t(512));
        QCOMPARE(g.find("tokenizer.ggml.token_type")->numbers[0], 2.0);

        QCOMPARE(g.tensors().size(), size_t(48));
        struct Expected { const char* name; std::vector<int64_t> dims; };
        for (const Expected& e : {Expected{"token_embd.weight", {64, 512}}, Expected{"blk.0.attn_q.weight", {64, 64}},
                                  Expected{"blk.0.attn_k.weight", {64, 32}}, Expected{"blk.0.ffn_down.weight", {172, 64}},
                                  Expected{"blk.4.ffn_up.weight", {64, 172}}, Expected{"output_norm.weight", {64}},
                                  Expected{"output.weight", {64, 512}}}) {
            const GgufTensorInfo* t = g.find_tensor(e.name);
            QVERIFY2(t, e.name);
            QCOMPARE(t->dims, e.dims);
            QCOMPARE(t->ggml_type, 0u);
            QCOMPARE(t->dtype, std::optional<DType>(DType::F32));
            QCOMPARE(t->nbytes, size_t(t->num_elements() * 4));
            QCOMPARE(size_t(t->data - g.file().data()) % g.alignment(), size_t(0));
        }
        QVERIFY(!g.find_tensor("blk.5.attn_q.weight"));

        // The embedding is bit-identical to the Hugging Face export of the same model.
        SafetensorsModel hf = SafetensorsModel::open(test::models_dir() + "/stories260K-hf");
        const SafetensorsTensor* emb = hf.find("model.embed_tokens.weight");
        QVERIFY(emb);
        QCOMPARE(emb->nbytes, g.find_tensor("token_embd.weight")->nbytes);
        QVERIFY(std::memcmp(emb->data, g.find_tensor("token_embd.weight")->data, emb->nbytes) == 0);
    }

    void roundTripsMetadata() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("meta.gguf").toStdString();
        GgufWriter w;
        w.set_string("s", "héllo");
        w.set_string("empty", "");
        w.set_u32("u32", 4000000000u);
        w.set_i32("i32", -7);
        w.set_f32("f32", 0.25f);
        w.set_bool("yes", true);
        w.set_bool("no", false);
        w.set_u64("u64", uint64_t(1) << 40);
        w.set_string_array("strs", {"x", "", "zz"});
        w.set_f32_array("floats", {1.5f, -2.0f});
        w.set_i32_array("ints", {3, -4, 5});
        w.set_u32("replaced", 1);
        w.set_u32("replaced", 2);
        w.write(path);

        GgufFile g = GgufFile::open(path);
        QCOMPARE(g.path(), path);
        QCOMPARE(g.metadata().size(), size_t(12));
        QVERIFY(g.tensors().empty());
        QCOMPARE(g.get_string("s"), std::string("héllo"));
        QCOMPARE(g.get_string("empty"), std::string(""));
        QCOMPARE(g.get_int("u32"), int64_t(4000000000u));
        QCOMPARE(g.get_float("u32"), 4e9);  // integers convert to float on request
        QCOMPARE(g.get_int("i32"), int64_t(-7));
        // A model's counts and ids are 32-bit: past that, named, not wrapped (2^40 cast to int is 0).
        QCOMPARE(g.get_i32("i32"), -7);
        QCOMPARE(g.get_i32_or("absent", 9), 9);
        QVERIFY_THROWS_EXCEPTION(BadInput, g.get_i32("u64"));
        QVERIFY_THROWS_EXCEPTION(BadInput, g.get_i32("u32"));
        QCOMPARE(g.get_float("f32"), 0.25);
        QCOMPARE(g.get_bool_or("yes", false), true);
        QCOMPARE(g.get_bool_or("no", true), false);
        QCOMPARE(g.get_int("u64"), int64_t(1) << 40);
        QCOMPARE(g.find("strs")->strings, (std::vector<std::string>{"x", "", "zz"}));
        QCOMPARE(g.find("floats")->numbers, (std::vector<double>{1.5, -2.0}));
        QCOMPARE(g.find("ints")->array_type, GgufType::I32);
        QCOMPARE(g.find("ints")->numbers, (std::vector<double>{3, -4, 5}));
        QCOMPARE(g.get_int("replaced"), int64_t(2));

        // Fallbacks when absent; errors name the file and key when absent or mistyped.
        QCOMPARE(g.get_string_or("absent", "fb"), std::string("fb"));
        QCOMPARE(g.get_int_or("absent", 9), int64_t(9));
        QCOMPARE(g.get_float_or("absent", 1.5), 1.5);
        QCOMPARE(g.get_bool_or("absent", true), true);
        auto error_of = [](const std::function<void()>& f) -> std::string {
            try {
                f();
            } catch (const BadInput& e) {
                return e.what();
            }
            return "";
        };
        QCOMPARE(error_of([&] { g.get_string("absent"); }), path + ": missing metadata key 'absent'");
        QCOMPARE(error_of([&] { g.get_int("absent"); }), path + ": missing metadata key 'absent'");
        QCOMPARE(error_of([&] { g.get_float("absent"); }), path + ": missing metadata key 'absent'");
        QCOMPARE(error_of([&] { g.get_string("u32"); }), path + ": metadata key 'u32' has type u32, expected string");
        QCOMPARE(error_of([&] { g.get_int_or("s", 0); }), path + ": metadata key 's' has type string, expected an integer");
        QCOMPARE(error_of([&] { g.get_int("f32"); }), path + ": metadata key 'f32' has type f32, expected an integer");
        QCOMPARE(error_of([&] { g.get_float("strs"); }),
                 path + ": metadata key 'strs' has type array of string, expected a number");
        QCOMPARE(error_of([&] { g.get_bool_or("u32", false); }), path + ": metadata key 'u32' has type u32, expected bool");
    }

    void rejectsU64AboveInt64() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("big.gguf").toStdString();
        GgufWriter w;
        w.set_u64("big", std::numeric_limits<uint64_t>::max());
        w.write(path);
        const std::string err = open_error(path);
        QVERIFY2(err.find(path) == 0 && err.find("'big'") != std::string::npos, err.c_str());
    }

    void roundTripsEveryTensorType_data() {
        QTest::addColumn<uint32_t>("ggml_type");
        QTest::addColumn<std::vector<int64_t>>("dims");
        QTest::addColumn<bool>("supported");
        QTest::newRow("F32") << 0u << std::vector<int64_t>{5, 3} << true;
        QTest::newRow("F16") << 1u << std::vector<int64_t>{7, 2, 3} << true;
        QTest::newRow("BF16") << 30u << std::vector<int64_t>{3} << true;
        QTest::newRow("Q8_0") << 8u << std::vector<int64_t>{64, 3} << true;
        QTest::newRow("Q4_K") << 12u << std::vector<int64_t>{512, 2, 1, 2} << true;
        QTest::newRow("Q4_0") << 2u << std::vector<int64_t>{32} << true;
        QTest::newRow("Q4_1") << 3u << std::vector<int64_t>{64, 3} << true;
        QTest::newRow("Q5_0") << 6u << std::vector<int64_t>{96, 5} << true;
        QTest::newRow("Q5_1") << 7u << std::vector<int64_t>{32, 1, 3} << true;
        QTest::newRow("Q2_K") << 10u << std::vector<int64_t>{256, 3} << true;
        QTest::newRow("Q3_K") << 11u << std::vector<int64_t>{768, 1} << true;
        QTest::newRow("Q5_K") << 13u << std::vector<int64_t>{256, 2, 2} << true;
        QTest::newRow("Q6_K") << 14u << std::vector<int64_t>{256, 3} << true;
        QTest::newRow("IQ4_NL") << 20u << std::vector<int64_t>{160, 3} << true;
        QTest::newRow("IQ4_XS") << 23u << std::vector<int64_t>{512, 1} << true;
        QTest::newRow("Q8_1 unsupported") << 9u << std::vector<int64_t>{32, 2} << false;
        QTest::newRow("IQ2_XXS unsupported") << 16u << std::vector<int64_t>{256, 3} << false;
        QTest::newRow("I32 unsupported") << 26u << std::vector<int64_t>{9, 9} << false;
        // ggml's newest types: sized, so that a file holding them is refused by name.
        QTest::newRow("NVFP4 unsupported") << 40u << std::vector<int64_t>{64, 2} << false;
        QTest::newRow("Q1_0 unsupported") << 41u << std::vector<int64_t>{128, 1} << false;
        QTest::newRow("Q2_0 unsupported") << 42u << std::vector<int64_t>{64, 3} << false;
        QTest::newRow("scalar F32") << 0u << std::vector<int64_t>{} << true;
    }
    void roundTripsEveryTensorType() {
        QFETCH(uint32_t, ggml_type);
        QFETCH(std::vector<int64_t>, dims);
        QFETCH(bool, supported);
        std::mt19937_64 rng(test::test_seed(ggml_type + 1));
        const GgmlTypeInfo* info = ggml_type_info(ggml_type);
        QVERIFY(info);
        int64_t elems = 1;
        for (int64_t d : dims) elems *= d;
        const size_t nbytes = static_cast<size_t>(elems / info->block_elems * info->block_bytes);

        QTemporaryDir dir;
        const std::string path = dir.filePath("types.gguf").toStdString();
        GgufWriter w;
        w.set_string("general.architecture", "test");
        // Two tensors of odd sizes around the one under test, so padding between tensors is exercised.
        std::vector<uint8_t> a = random_bytes(12, rng), b = random_bytes(nbytes, rng), c = random_bytes(4, rng);
        w.add_tensor("before", {3}, 0, a);
        w.add_tensor("x", dims, ggml_type, b);
        w.add_tensor("after", {2}, 1, c);
        w.write(path);

        GgufFile g = GgufFile::open(path);
        QCOMPARE(g.tensors().size(), size_t(3));
        QCOMPARE(g.tensors()[1].name, std::string("x"));  // file order is kept
        const GgufTensorInfo* t = g.find_tensor("x");
        QVERIFY(t);
        QCOMPARE(t->dims, dims);
        QCOMPARE(t->ggml_type, ggml_type);
        QCOMPARE(t->dtype.has_value(), supported);
        if (supported) QCOMPARE(ggml_type_from_dtype(*t->dtype), ggml_type);
        QCOMPARE(t->num_elements(), elems);
        QCOMPARE(t->nbytes, nbytes);
        QCOMPARE(std::vector<uint8_t>(t->data, t->data + t->nbytes), b);
        QCOMPARE(std::vector<uint8_t>(g.find_tensor("before")->data, g.find_tensor("before")->data + 12), a);
        QCOMPARE(std::vector<uint8_t>(g.find_tensor("after")->data, g.find_tensor("after")->data + 4), c);
        for (const GgufTensorInfo& ti : g.tensors())
            QCOMPARE(size_t(ti.data - g.file().data()) % 32, size_t(0));
        QCOMPARE(ggml_type_name(ggml_type), info->name);
    }

    void namesGgmlTypes() {
        QCOMPARE(ggml_type_name(14), std::string_view("Q6_K"));
        QCOMPARE(ggml_type_name(16), std::string_view("IQ2_XXS"));
        QCOMPARE(ggml_type_name(30), std::string_view("BF16"));
        QCOMPARE(ggml_type_name(99), std::string_view("type 99"));
        QCOMPARE(ggml_type_name(4), std::string_view("type 4"));  // Q4_2, removed from ggml
        QVERIFY(!ggml_type_info(4));
        QVERIFY(!ggml_type_info(1000));
        QCOMPARE(ggml_type_info(15)->block_bytes, int64_t(292));  // Q8_K
    }

    // Each kvscope type maps to a ggml id whose block (values, bytes) is dtype.h's, and back; its name is
    // ggml's name for that id.
    void dtypesMatchGgmlTypes() {
        for (DType t : kDTypes) {
            const uint32_t id = ggml_type_from_dtype(t);
            const GgmlTypeInfo* info = ggml_type_info(id);
            QVERIFY2(info, dtype_name(t).data());
            QCOMPARE(info->name, dtype_name(t));
            QCOMPARE(info->block_elems, dtype_block_elems(t));
            QCOMPARE(info->block_bytes, dtype_block_bytes(t));
            QCOMPARE(dtype_from_ggml_type(id), std::optional<DType>(t));
        }
    }

    void rejectsDamage() {
        const std::vector<uint8_t> base = small_gguf();
        const size_t arch_type = find_gguf_string(base, "general.architecture");      // u32 type, then string
        const size_t align_value = find_gguf_string(base, "general.alignment") + 4;  // u32 value
        const size_t tokens_type = find_gguf_string(base, "tokenizer.ggml.tokens");  // u32 9, u32 8, u64 n
        const size_t k2_name = find_gguf_string(base, "test.k2") - 1;
        const size_t t0 = find_gguf_string(base, "t0");  // u32 n_dims, u64 dims[2], u32 type, u64 offset
        const size_t t1 = find_gguf_string(base, "t1");  // u32 n_dims, u64 dims[1], u32 type, u64 offset
        const size_t t0_dims = t0 + 4, t0_type = t0 + 20, t1_offset = t1 + 16;
        const uint64_t huge = uint64_t(1) << 62;

        struct Case {
            const char* name;
            std::function<void(std::vector<uint8_t>&)> damage;
            const char* expected;
        };
        const std::vector<Case> cases = {
            {"bad magic", [](auto& b) { b[0] = 'X'; }, "bad magic"},
            {"version 1", [](auto& b) { poke<uint32_t>(b, 4, 1); }, "unsupported GGUF version 1"},
            {"version 4", [](auto& b) { poke<uint32_t>(b, 4, 4); }, "unsupported GGUF version 4"},
            {"big-endian", [](auto& b) { poke<uint32_t>(b, 4, 0x03000000); }, "big-endian"},
            {"huge tensor count", [&](auto& b) { poke<uint64_t>(b, 8, huge); }, "tensor count 4611686018427387904 exceeds"},
            {"max kv count", [](auto& b) { poke<uint64_t>(b, 16, ~uint64_t(0)); }, "metadata key/value count"},
            {"kv count one too many", [](auto& b) { poke<uint64_t>(b, 16, 6); }, ""},
            {"key length past end", [&](auto& b) { poke<uint64_t>(b, 24, huge); }, "runs past the end of the file"},
            {"unknown value type", [&](auto& b) { poke<uint32_t>(b, arch_type, 13); },
             "metadata key 'general.architecture' has unknown metadata value type 13"},
            {"string value past end", [&](auto& b) { poke<uint64_t>(b, arch_type + 4, 1000); }, "runs past the end"},
            {"nested array", [&](auto& b) { poke<uint32_t>(b, tokens_type + 4, 9); }, "nested arrays are not supported"},
            {"unknown array type", [&](auto& b) { poke<uint32_t>(b, tokens_type + 4, 77); }, "unknown metadata value type 77"},
            {"huge array length", [&](auto& b) { poke<uint64_t>(b, tokens_type + 8, huge); },
             "'tokenizer.ggml.tokens' array length 4611686018427387904 exceeds"},
            {"duplicate key", [&](auto& b) { b[k2_name] = '1'; }, "duplicate metadata key 'test.k1'"},
            {"alignment 0", [&](auto& b) { poke<uint32_t>(b, align_value, 0); }, "general.alignment 0 is not a power of two"},
            {"alignment 48", [&](auto& b) { poke<uint32_t>(b, align_value, 48); }, "general.alignment 48"},
            {"alignment mistyped", [&](auto& b) { poke<uint32_t>(b, align_value - 4, 6); }, "expected an integer"},
            {"5 dims", [&](auto& b) { poke<uint32_t>(b, t0, 5); }, "tensor 't0' has 5 dimensions (at most 4)"},
            {"zero dim", [&](auto& b) { poke<uint64_t>(b, t0_dims + 8, 0); }, "tensor 't0' dimension 1 is 0"},
            {"negative dim", [&](auto& b) { poke<int64_t>(b, t0_dims + 8, -3); }, "tensor 't0' dimension 1 is -3"},
            {"element overflow", [&](auto& b) { poke<uint64_t>(b, t0_dims + 8, huge); }, "element count overflows"},
            {"row not a block multiple", [&](auto& b) { poke<uint64_t>(b, t0_dims, 16); poke<uint64_t>(b, t0_dims + 8, 4); },
             "tensor 't0' has row length 16, not a multiple of the Q8_0 block size 32"},
            {"unknown ggml type", [&](auto& b) { poke<uint32_t>(b, t0_type, 99); }, "tensor 't0' has unknown ggml type 99"},
            {"removed ggml type", [&](auto& b) { poke<uint32_t>(b, t0_type, 4); }, "unknown ggml type 4"},
            {"more data than the file", [&](auto& b) { poke<uint64_t>(b, t0_dims + 8, 1 << 20); }, "more than the whole file"},
            {"misaligned offset", [&](auto& b) { poke<uint64_t>(b, t1_offset, 97); },
             "tensor 't1' data offset 97 is not a multiple of the alignment 32"},
            {"offset past end", [&](auto& b) { poke<uint64_t>(b, t1_offset, 1 << 20); },
             "tensor 't1' data [offset 1048896, 16 bytes] runs past the end of the file"},
            {"offset near 2^64", [&](auto& b) { poke<uint64_t>(b, t1_offset, ~uint64_t(31)); }, "runs past the end of the file"},
            {"duplicate tensor", [&](auto& b) { b[t1 - 1] = '0'; }, "duplicate tensor name 't0'"},
            {"overlapping tensors", [&](auto& b) { poke<uint64_t>(b, t1_offset, 0); }, "tensor 't1' data overlaps tensor 't0'"},
        };

        QTemporaryDir dir;
        const std::string path = dir.filePath("damaged.gguf").toStdString();
        write_bytes(path, base);
        GgufFile ok = GgufFile::open(path);  // the undamaged file is valid
        QCOMPARE(size_t(ok.find_tensor("t1")->data - ok.file().data()), size_t(416));  // offsets used above
        for (const Case& c : cases) {
            std::vector<uint8_t> bytes = base;
            c.damage(bytes);
            write_bytes(path, bytes);
            const std::string err = open_error(path);
            QVERIFY2(err.find(path + ": ") == 0, (std::string(c.name) + ": got '" + err + "'").c_str());
            QVERIFY2(err.find(c.expected) != std::string::npos,
                     (std::string(c.name) + ": '" + err + "' lacks '" + c.expected + "'").c_str());
        }
    }

    void rejectsEveryTruncation() {
        const std::vector<uint8_t> base = small_gguf();
        QTemporaryDir dir;
        const std::string path = dir.filePath("cut.gguf").toStdString();
        write_bytes(path, base);
        size_t end_of_data = 0;
        {
            GgufFile g = GgufFile::open(path);
            for (const GgufTensorInfo& t : g.tensors())
                end_of_data = std::max(end_of_data, size_t(t.data - g.file().data()) + t.nbytes);
        }
        QCOMPARE(end_of_data, size_t(432));
        // Every cut before the end of the last tensor's data is an error; cuts in the final padding are not.
        for (size_t n = 0; n < base.size(); ++n) {
            write_bytes(path, std::vector<uint8_t>(base.begin(), base.begin() + static_cast<ptrdiff_t>(n)));
            const std::string err = open_error(path);
            if (n < end_of_data)
                QVERIFY2(err.find(path + ": ") == 0, ("cut at " + std::to_string(n) + ": '" + err + "'").c_str());
            else
                QVERIFY2(err.empty(), err.c_str());
        }
    }

    // A name quoted from a damaged file reaches the terminal printable and bounded: bytes that are not UTF-8
    // escaped (they were printed raw), valid UTF-8 kept, and a megabyte string (a length field gone wrong
    // made a 1.3 MB error of binary) cut in the middle with its start and its reason kept.
    void quotedNamesArePrintable() {
        const std::string name = "caf\xc3\xa9 \xff\xfe\x1b[2J" + std::string(1 << 20, 'x');
        const std::string err = BadInput("m.gguf: architecture '" + name + "' is not supported").what();
        QVERIFY2(err.size() <= 2100, std::to_string(err.size()).c_str());
        QVERIFY(err.starts_with("m.gguf: architecture 'caf\xc3\xa9 \\xff\\xfe\\x1b[2J"));
        QVERIFY(err.ends_with("' is not supported"));
        QVERIFY(err.find(" bytes of the message left out) ") != std::string::npos);
        QVERIFY(utf8_is_valid(err));
        // A cut never splits an escape: control bytes all the way, cut at any offset.
        for (size_t pad = 0; pad < 4; ++pad) {
            const std::string cut = BadInput(std::string(1399 + pad, 'a') + std::string(3000, '\x1b')).what();
            const size_t dots = cut.find(" ... (");
            QVERIFY(dots != std::string::npos);
            QVERIFY2(cut.substr(0, dots).ends_with("a") || cut.substr(0, dots).ends_with("\\x1b"), cut.substr(dots - 8, 8).c_str());
            QVERIFY2(cut.substr(cut.find(") ... ") + 6).starts_with("\\x1b"), cut.substr(cut.find(") ... ") + 6, 8).c_str());
        }
    }

    // A gpt2 (byte-level) vocabulary without tokenizer.ggml.merges is refused, as llama.cpp refuses it: it
    // loaded and split every word into characters, spaces into <unk>.
    void gpt2VocabNeedsMerges() {
        GgufWriter w;
        w.set_string("general.architecture", "llama");
        w.set_string("tokenizer.ggml.model", "gpt2");
        w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
        QTemporaryDir dir;
        const std::string path = dir.filePath("vocab.gguf").toStdString();
        write_bytes(path, w.to_bytes());
        try {
            vocab_from_gguf(GgufFile::open(path));
            QFAIL("no BadInput");
        } catch (const BadInput& e) {
            QCOMPARE(std::string(e.what()), path + ": tokenizer.ggml.merges is missing (a gpt2 tokenizer needs its merges)");
        }
        w.set_string_array("tokenizer.ggml.merges", {"a b"});
        write_bytes(path, w.to_bytes());
        QCOMPARE(vocab_from_gguf(GgufFile::open(path)).merges.size(), size_t(1));
    }

    void rejectsMissingFile() {
        const std::string err = open_error("/nonexistent/model.gguf");
        QVERIFY(err.find("/nonexistent/model.gguf") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestGgufFile)
#include "test_gguf_file.moc"
