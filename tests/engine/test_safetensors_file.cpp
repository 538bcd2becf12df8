// SafetensorsModel and write_safetensors: reads the shared stories260K HF export, opens single files,
// sharded directories (index.json) and fallback directories, round-trips F32/F16/BF16, and checks that
// each kind of damage throws BadInput naming the file and the problem.
#include "test_support.h"
#include "model/safetensors_file.h"
#include "model/safetensors_writer.h"
#include "util/errors.h"

#include <QTemporaryDir>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

using namespace kvscope;

namespace {

using TensorSpec = std::tuple<std::string, std::string, std::vector<int64_t>, std::vector<uint8_t>>;

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A file with a hand-written header (length prefix added here) followed by data_bytes zero bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes, uint64_t length_field) {
    std::string bytes(8, '\0');
    std::memcpy(bytes.data(), &length_field, 8);
    bytes += header;
    bytes.append(data_bytes, '\0');
    write_text(path, bytes);
}
void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
    write_raw(path, header, data_bytes, header.size());
}

std::string open_error(const std::string& path) {
    try {
        SafetensorsModel::open(path);
    } catch (const BadInput& e) {
        return e.what();
    }
    return "";
}

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

TensorSpec f32_tensor(const std::string& name, std::vector<int64_t> shape, float base) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t k = 0; k < v.size(); ++k) v[k] = base + static_cast<float>(k);
    return {name, "F32", shape, as_bytes(v)};
}

}  // namespace

class TestSafetensorsFile : public QObject {
    Q_OBJECT
private slots:
    void readsStories260K() {
        const std::string dir = test::models_dir() + "/stories260K-hf";
        SafetensorsModel m = SafetensorsModel::open(dir);
        const SafetensorsTensor* emb = m.find("model.embed_tokens.weight");
        QVERIFY(emb);
        QCOMPARE(emb->shape, (std::vector<int64_t>{512, 64}));
        QCOMPARE(emb->dtype_name, std::string("F32"));
        QCOMPARE(emb->dtype, std::optional<DType>(DType::F32));
        QCOMPARE(emb->nbytes, size_t(512 * 64 * 4));
        QCOMPARE(emb->file, dir + "/model.safetensors");
        QCOMPARE(m.find("model.layers.0.self_attn.k_proj.weight")->shape, (std::vector<int64_t>{32, 64}));
        QCOMPARE(m.find("model.layers.4.mlp.down_proj.weight")->shape, (std::vector<int64_t>{64, 172}));
        QCOMPARE(m.find("model.norm.weight")->shape, (std::vector<int64_t>{64}));
        QVERIFY(m.find("lm_head.weight"));
        QVERIFY(!m.find("model.layers.5.mlp.down_proj.weight"));
        QCOMPARE(m.tensors().size(), size_t(48));
        QCOMPARE(m.metadata().at("format"), std::string("pt"));
        for (size_t k = 1; k < m.tensors().size(); ++k)  // ordered by data offset
            QVERIFY(m.tensors()[k - 1].data < m.tensors()[k].data);

        // The same file opened by path gives the same tensors.
        SafetensorsModel single = SafetensorsModel::open(dir + "/model.safetensors");
        QCOMPARE(single.tensors().size(), size_t(48));
        QCOMPARE(single.find("model.embed_tokens.weight")->nbytes, emb->nbytes);
    }

    void roundTripsFloatTypes_data() {
        QTest::addColumn<QString>("dtype");
        QTest::newRow("F32") << "F32";
        QTest::newRow("F16") << "F16";
        QTest::newRow("BF16") << "BF16";
    }
    void roundTripsFloatTypes() {
        QFETCH(QString, dtype);
        const std::string dt = dtype.toStdString();
        const std::vector<float> values = {0.0f, 1.0f, -2.5f, 0.125f, 3.0f, 49152.0f};  // exact in all three
        std::vector<uint8_t> bytes;
        if (dt == "F32") {
            bytes = as_bytes(values);
        } else {
            std::vector<uint16_t> h;
            for (float f : values) h.push_back(dt == "F16" ? f32_to_f16(f) : f32_to_bf16(f));
            bytes = as_bytes(h);
        }
        QTemporaryDir dir;
        const std::string path = dir.filePath("t.safetensors").toStdString();
        write_safetensors(path, {{"w", dt, {2, 3}, bytes}, {"empty", dt, {0, 4}, {}}, {"scalar", "I64", {}, std::vector<uint8_t>(8, 1)}},
                          {{"format", "pt"}, {"note", "x"}});
        SafetensorsModel m = SafetensorsModel::open(path);
        QCOMPARE(m.metadata().size(), size_t(2));
        QCOMPARE(m.metadata().at("note"), std::string("x"));
        const SafetensorsTensor* w = m.find("w");
        QVERIFY(w);
        QCOMPARE(w->dtype_name, dt);
        QVERIFY(w->dtype.has_value());
        QCOMPARE(std::string(dtype_name(*w->dtype)), dt);
        QCOMPARE(w->shape, (std::vector<int64_t>{2, 3}));
        QCOMPARE(std::vector<uint8_t>(w->data, w->data + w->nbytes), bytes);
        for (size_t k = 0; k < values.size(); ++k) {
            float got;
            if (dt == "F32") {
                std::memcpy(&got, w->data + 4 * k, 4);
            } else {
                uint16_t h;
                std::memcpy(&h, w->data + 2 * k, 2);
                got = dt == "F16" ? f16_to_f32(h) : bf16_to_f32(h);
            }
            QCOMPARE(got, values[k]);
        }
        QCOMPARE(m.find("empty")->nbytes, size_t(0));
        QCOMPARE(m.find("scalar")->dtype.has_value(), false);
        QCOMPARE(m.find("scalar")->nbytes, size_t(8));
        // The writer pads the header so the data section is 8-byte aligned.
        uint64_t header_len;
        std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(&header_len), 8);
        QCOMPARE(header_len % 8, uint64_t(0));
    }

    void readsShardedDirectory() {
        QTemporaryDir tmp;
        const std::string dir = tmp.path().toStdString();
        write_safetensors(dir + "/model-00001-of-00002.safetensors", {f32_tensor("a", {2, 2}, 0), f32_tensor("b", {3}, 10)},
                          {{"format", "pt"}});
        write_safetensors(dir + "/model-00002-of-00002.safetensors", {f32_tensor("c", {4, 1}, 20)});
        write_text(dir + "/model.safetensors.index.json",
                   R"({"metadata": {"total_size": 52}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                       "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
        SafetensorsModel m = SafetensorsModel::open(dir);
        QCOMPARE(m.tensors().size(), size_t(3));
        QCOMPARE(m.find("a")->file, dir + "/model-00001-of-00002.safetensors");
        QCOMPARE(m.find("c")->file, dir + "/model-00002-of-00002.safetensors");
        QCOMPARE(m.find("c")->shape, (std::vector<int64_t>{4, 1}));
        float c0;
        std::memcpy(&c0, m.find("c")->data, 4);
        QCOMPARE(c0, 20.0f);
        QCOMPARE(m.metadata().at("format"), std::string("pt"));

        // Damaged indexes name the index file and the entry.
        const std::string index = dir + "/model.safetensors.index.json";
        write_text(index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "c": "model-00003-of-00003.safetensors"}})");
        QCOMPARE(open_error(dir), index + ": weight_map entry 'c' points to missing shard 'model-00003-of-00003.safetensors'");
        // A shard that cannot be looked at says why (a symlink loop read as a missing shard).
        std::filesystem::create_symlink("loop.safetensors", dir + "/loop.safetensors");
        write_text(index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "c": "loop.safetensors"}})");
        QVERIFY2(open_error(dir).find(dir + "/loop.safetensors: cannot access: ") == 0, open_error(dir).c_str());
        std::filesystem::remove(dir + "/loop.safetensors");
        write_text(index, R"({"weight_map": {"zz": "model-00001-of-00002.safetensors"}})");
        QCOMPARE(open_error(dir),
                 index + ": weight_map puts tensor 'zz' in 'model-00001-of-00002.safetensors', but that shard has no such tensor");
        write_text(index, R"({"weight_map": [1, 2]})");
        QCOMPARE(open_error(dir), index + ": no 'weight_map' object");
        write_text(index, R"({"weight_map": {"a": 3}})");
        QCOMPARE(open_error(dir), index + ": weight_map entry 'a' is not a file name");
        write_text(index, "{not json");
        QVERIFY(open_error(dir).find(index + ": index is not valid JSON") == 0);

        // The same tensor name in two shards is an error.
        write_safetensors(dir + "/model-00002-of-00002.safetensors", {f32_tensor("a", {1}, 0)});
        write_text(index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
        QCOMPARE(open_error(dir), dir + "/model-00002-of-00002.safetensors: duplicate tensor name 'a' (also in " + dir +
                                      "/model-00001-of-00002.safetensors)");
    }

    void fallsBackToEverySafetensorsFile() {
        QTemporaryDir tmp;
        const std::string dir = tmp.path().toStdString();
        QVERIFY(open_error(dir).find(dir + ": no model.safetensors") == 0);
        write_safetensors(dir + "/b.safetensors", {f32_tensor("y", {2}, 0)});
        write_safetensors(dir + "/a.safetensors", {f32_tensor("x", {2}, 0)}, {{"from", "a"}});
        write_text(dir + "/notes.txt", "ignored");
        SafetensorsModel m = SafetensorsModel::open(dir);
        QCOMPARE(m.tensors().size(), size_t(2));
        QCOMPARE(m.tensors()[0].name, std::string("x"));  // files in name order
        QCOMPARE(m.metadata().at("from"), std::string("a"));
        write_safetensors(dir + "/b.safetensors", {f32_tensor("x", {2}, 0)});
        QVERIFY(open_error(dir).find("duplicate tensor name 'x'") != std::string::npos);
        QCOMPARE(open_error(dir + "/missing"), dir + "/missing: no such file or directory");
    }

    void rejectsDamage() {
        struct Case {
            const char* name;
            std::function<void(const std::string&)> write;
            const char* expected;
        };
        const std::string good = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
        const std::vector<Case> cases = {
            {"empty file", [](auto& p) { write_text(p, ""); }, "file too small for a safetensors header (0 bytes)"},
            {"7 bytes", [](auto& p) { write_text(p, "1234567"); }, "file too small"},
            {"header length beyond file", [&](auto& p) { write_raw(p, good, 16, 999999); },
             "header length 999999 exceeds file size"},
            {"header length 2^64-1", [&](auto& p) { write_raw(p, good, 16, ~uint64_t(0)); }, "exceeds file size"},
            {"not JSON", [](auto& p) { write_raw(p, "{\"w\": [1, 2", 0); }, "header is not valid JSON"},
            {"binary junk", [](auto& p) { write_raw(p, std::string("\xff\xfe\x00\x01", 4), 0); }, "header is not valid JSON"},
            {"JSON array", [](auto& p) { write_raw(p, "[1,2,3]", 0); }, "header is not a JSON object"},
            {"entry not an object", [](auto& p) { write_raw(p, R"({"w": 5})", 0); }, "tensor 'w' entry is not a JSON object"},
            {"no dtype", [](auto& p) { write_raw(p, R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4); },
             "tensor 'w' has no string 'dtype'"},
            {"unknown dtype", [](auto& p) { write_raw(p, R"({"w":{"dtype":"F7","shape":[1],"data_offsets":[0,4]}})", 4); },
             "tensor 'w' has unknown dtype 'F7'"},
            {"no shape", [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4); },
             "tensor 'w' has no 'shape' array"},
            {"negative dim", [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4); },
             "tensor 'w' shape element 0 (-1) is not a non-negative integer"},
            {"float dim", [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","shape":[2,1.5],"data_offsets":[0,4]}})", 4); },
             "shape element 1 (1.5) is not a non-negative integer"},
            {"deeply nested shape",
             [](auto& p) {
                 write_raw(p, R"({"w":{"dtype":"F32","shape":)" + std::string(200000, '[') + std::string(200000, ']') + "}}", 0);
             },
             "shape element 0 (an array) is not a non-negative integer"},
            {"deeply nested header", [](auto& p) { write_raw(p, std::string(500000, '['), 0); }, "header is not valid JSON"},
            {"shape overflow",
             [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4); },
             "overflows the element count"},
            {"no data_offsets", [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","shape":[1]}})", 4); },
             "tensor 'w' has no 'data_offsets' [begin, end]"},
            {"three offsets", [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 8); },
             "has no 'data_offsets'"},
            {"end before begin", [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8); },
             "tensor 'w' data_offsets [8, 4] are not [begin, end] within the data section (8 bytes)"},
            {"end past data", [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 15); },
             "tensor 'w' data_offsets [0, 16] are not [begin, end] within the data section (15 bytes)"},
            {"negative offset", [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 8); },
             "are not [begin, end] within the data section"},
            {"huge offsets",
             [](auto& p) { write_raw(p, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551615]}})", 8); },
             "are not [begin, end] within the data section"},
            {"size mismatch", [](auto& p) { write_raw(p, R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,16]}})", 16); },
             "tensor 'w' has 16 bytes of data, but shape [2, 3] of BF16 needs 12"},
            {"overlapping tensors",
             [](auto& p) {
                 write_raw(p, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
             },
             "tensor 'b' data at 4 overlaps tensor 'a' [0, 8)"},
            {"metadata not an object", [](auto& p) { write_raw(p, R"({"__metadata__": 1})", 0); }, "__metadata__ is not a JSON object"},
            {"metadata value nested", [](auto& p) { write_raw(p, R"({"__metadata__": {"a": [1]}})", 0); },
             "__metadata__ value 'a' is not a string"},
        };
        QTemporaryDir dir;
        const std::string path = dir.filePath("damaged.safetensors").toStdString();
        write_raw(path, good, 16);
        QCOMPARE(SafetensorsModel::open(path).tensors().size(), size_t(1));
        for (const Case& c : cases) {
            c.write(path);
            const std::string err = open_error(path);
            QVERIFY2(err.find(path + ": ") == 0, (std::string(c.name) + ": got '" + err + "'").c_str());
            QVERIFY2(err.find(c.expected) != std::string::npos,
                     (std::string(c.name) + ": '" + err + "' lacks '" + c.expected + "'").c_str());
        }
    }

    void rejectsEveryTruncation() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("cut.safetensors").toStdString();
        write_safetensors(path, {f32_tensor("a", {2, 3}, 0), {"b", "BF16", {5}, std::vector<uint8_t>(10, 3)}}, {{"k", "v"}});
        std::ifstream in(path, std::ios::binary);
        const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        for (size_t n = 0; n < whole.size(); ++n) {
            write_text(path, whole.substr(0, n));
            const std::string err = open_error(path);
            QVERIFY2(err.find(path + ": ") == 0, ("cut at " + std::to_string(n) + ": '" + err + "'").c_str());
        }
        write_text(path, whole);
        QVERIFY(open_error(path).empty());
    }
};

QTEST_GUILESS_MAIN(TestSafetensorsFile)
#include "test_safetensors_file.moc"
