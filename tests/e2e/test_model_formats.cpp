// Model files in their real formats, generated at test time: the same random weights as a Hugging Face
// directory and as a GGUF file give the same logits (the two RoPE layouts agree), for llama and qwen2
// (q/k/v biases); copies in every weight type (F16 ... IQ4_XS), and a file that mixes them as
// llama-quantize's Q4_K_M does, stay within stated tolerances of F32; sharded
// safetensors load; Llama 3 RoPE scaling follows the reference formula; dummy presets build.
#include "dequantized_twin.h"
#include "prefill_logits.h"
#include "naive_forward.h"
#include "random_model.h"

#include "model/gguf_writer.h"
#include "util/errors.h"

#include <QFile>
#include <QTemporaryDir>
#include <cctype>
#include <cmath>
#include <map>

using namespace kvscope;

namespace {

std::vector<int32_t> sequence() {
    std::vector<int32_t> t{1};
    for (int i = 0; i < 47; ++i) t.push_back(3 + (i * 37) % 500);
    return t;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
    return m;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - ref[i]) * double(a[i] - ref[i]);
        den += ref[i] * double(ref[i]);
    }
    return std::sqrt(num / den);
}

}  // namespace

class TestModelFormats : public QObject {
    Q_OBJECT
private slots:
    void hfEqualsGguf_data() {
        QTest::addColumn<QString>("arch");
        QTest::newRow("llama") << "llama";
        QTest::newRow("qwen2") << "qwen2";
        QTest::newRow("qwen3") << "qwen3";
        QTest::newRow("phi3") << "phi3";
        QTest::newRow("gemma2") << "gemma2";
        QTest::newRow("gemma3") << "gemma3";
    }
    void hfEqualsGguf() {
        QFETCH(QString, arch);
        QTemporaryDir dir;
        test::RandomModelShape s;
        s.arch = arch.toStdString();
        if (s.gemma()) s = test::gemma_shape(s.arch);
        if (s.arch == "phi3") {  // LongRoPE with a context past the original: the long factors
            s.original_context = 256;
            for (int i = 0; i < s.head_dim / 2; ++i) {
                s.short_factor.push_back(1.0f + 0.05f * i);
                s.long_factor.push_back(1.0f + 0.5f * i);
            }
            s.attention_factor = std::sqrt(1.0f + std::log(float(s.context) / s.original_context) / std::log(256.0f));
        }
        test::write_random_hf(dir.filePath("hf").toStdString(), s, 5);
        test::write_random_gguf(dir.filePath("m.gguf").toStdString(), s, 5);
        auto hf = load_model(dir.filePath("hf").toStdString());
        auto gguf = load_model(dir.filePath("m.gguf").toStdString());
        QCOMPARE(hf->config.rope_neox, true);
        QCOMPARE(gguf->config.rope_neox, s.arch != "llama");
        QCOMPARE(hf->config.attention_bias, s.arch == "qwen2");
        QCOMPARE(hf->config.qk_norm, s.arch == "qwen3" || s.arch == "gemma3");
        QCOMPARE(gguf->config.qk_norm, s.arch == "qwen3" || s.arch == "gemma3");
        const std::string scaling = s.arch == "phi3" ? "longrope" : s.arch == "gemma3" ? "linear" : "";
        QCOMPARE(hf->config.rope_scaling.type, scaling);
        QCOMPARE(gguf->config.rope_scaling.type, scaling);
        for (const ModelConfig* c : {&hf->config, &gguf->config}) {  // both files say the same
            QCOMPARE(c->sliding_window, s.sliding_window);
            for (int l = 0; l < s.layers; ++l) QCOMPARE(c->layer_window(l), s.sliding(l) ? s.sliding_window : 0);
            QCOMPARE(c->attn_logit_softcapping, s.attn_softcap);
            QCOMPARE(c->final_logit_softcapping, s.final_softcap);
            QCOMPARE(c->rope_local_theta, s.rope_local_theta);
            QCOMPARE(c->sandwich_norms, s.gemma());
            QCOMPARE(c->tie_word_embeddings, s.gemma());
        }
        QCOMPARE(hf->config.rope_attention_factor(), gguf->config.rope_attention_factor());
        const auto a = test::prefill_logits(*hf, sequence(), 0);
        const auto b = test::prefill_logits(*gguf, sequence(), 0);
        const double d = max_abs_diff(a, b);
        // And both against a plain second implementation of the same architecture (naive_forward.h).
        const auto ref = test::naive_logits(s, test::random_tensors(s, 5), sequence());
        const double r = max_abs_diff(a, ref);
        qInfo("%s: max |hf - gguf| = %.3g, max |hf - naive| = %.3g", qPrintable(arch), d, r);
        QVERIFY(d < 1e-4);
        QVERIFY(r < 1e-4);
        if (s.arch == "phi3") {  // run within the original context: the short factors
            const auto cpu = cpu::make_cpu_backend(2);
            const auto shortened = test::prefill_logits(*cpu, *gguf, sequence(), 0, 16, DType::F32, 256);
            const auto short_ref = test::naive_logits(s, test::random_tensors(s, 5), sequence(), 1e-5, 256);
            QVERIFY(max_abs_diff(shortened, short_ref) < 1e-4);
            QVERIFY(max_abs_diff(shortened, a) > 1e-3);  // the factors matter
        }
        if (s.gemma()) {  // each Gemma feature changes these logits, so the match above checks it
            auto without = [&](auto change) {
                test::RandomModelShape t = s;
                change(t);
                return max_abs_diff(a, test::naive_logits(t, test::random_tensors(s, 5), sequence()));
            };
            const double no_window = without([](test::RandomModelShape& t) { t.sliding_window = 0; });
            qInfo("%s: max |hf - naive without windows| = %.3g", qPrintable(arch), no_window);
            QVERIFY(no_window > 1e-3);
            if (s.arch == "gemma2") {
                QVERIFY(without([](test::RandomModelShape& t) { t.attn_softcap = 0; }) > 1e-3);
                QVERIFY(without([](test::RandomModelShape& t) { t.final_softcap = 0; }) > 1e-3);
            } else {
                QVERIFY(without([](test::RandomModelShape& t) { t.rope_local_theta = 0; }) > 1e-3);
                QVERIFY(without([](test::RandomModelShape& t) { t.rope_linear_factor = 0; }) > 1e-3);
            }
        }
    }

    // Gemma's windows through the paged cache step by step: decode (one token a step) and chunks of 7 over
    // blocks of 4, so windows of 16 start mid-block and cross steps; every position's logits match
    // naive_forward.h as the single prefill does.
    void gemmaStepByStep_data() {
        QTest::addColumn<QString>("arch");
        QTest::addColumn<int>("chunk");
        for (const char* arch : {"gemma2", "gemma3"})
            for (int chunk : {1, 7}) QTest::addRow("%s chunk=%d", arch, chunk) << arch << chunk;
    }
    void gemmaStepByStep() {
        QFETCH(QString, arch);
        QFETCH(int, chunk);
        QTemporaryDir dir;
        const test::RandomModelShape s = test::gemma_shape(arch.toStdString());
        test::write_random_gguf(dir.filePath("m.gguf").toStdString(), s, 5);
        auto model = load_model(dir.filePath("m.gguf").toStdString());
        const auto cpu = cpu::make_cpu_backend(2);
        const auto stepped = test::chunked_logits(*cpu, *model, sequence(), chunk, 4);
        const auto ref = test::naive_logits(s, test::random_tensors(s, 5), sequence());
        const double d = max_abs_diff(stepped, ref);
        qInfo("%s chunk %d: max |steps - naive| = %.3g", qPrintable(arch), chunk, d);
        QVERIFY(d < 1e-4);
    }

    // Single-token steps run q, k and v (and gate and up) of one type as one fused matmul, other steps each on
    // its own rows of it (ModelRunner::MatmulRun): the logits must be the same bits either way, with qwen2's
    // biases, phi3's file-fused matrices, and a file whose v differs in type from q and k (llama-quantize's
    // Q4_K_M: Q5_0 q/k, Q8_0 v where rows are not a multiple of 256) or whose q/k/v are F16 panels.
    void decodeEqualsPrefill_data() {
        QTest::addColumn<QString>("arch");
        QTest::addColumn<QString>("types");  // "" = all F32; "mixed" = Q5_0 but v and down Q8_0; else one type
        QTest::addColumn<int>("head_dim");  // 0: the shape's own
        for (const char* arch : {"llama", "qwen2", "qwen3", "phi3", "gemma3"}) QTest::addRow("%s F32", arch) << arch << "" << 0;
        QTest::newRow("qwen2 mixed") << "qwen2" << "mixed" << 0;
        QTest::newRow("llama mixed") << "llama" << "mixed" << 0;
        QTest::newRow("qwen2 F16") << "qwen2" << "F16" << 0;
        QTest::newRow("llama Q4_K") << "llama" << "Q4_K" << 0;
        // v's rows start mid-panel (q 80 rows, k 40): the F32 parts run as separate weights.
        QTest::newRow("llama F32 head_dim 20") << "llama" << "" << 20;
    }
    void decodeEqualsPrefill() {
        QFETCH(QString, arch);
        QFETCH(QString, types);
        QFETCH(int, head_dim);
        QTemporaryDir dir;
        test::RandomModelShape s;
        s.arch = arch.toStdString();
        if (s.gemma()) s = test::gemma_shape(s.arch);
        if (head_dim) {
            s.head_dim = head_dim;
            s.hidden = s.heads * head_dim;
        }
        const std::string path = dir.filePath("m.gguf").toStdString();
        if (types == "mixed")
            test::write_random_gguf(path, s, 3, DType::F32, {}, "", [](const std::string& name) {
                const bool q8 = name.find("attn_v") != std::string::npos || name.find("ffn_down") != std::string::npos;
                return name.find("blk.") == 0 ? (q8 ? DType::Q8_0 : DType::Q5_0) : DType::F32;
            });
        else
            test::write_random_gguf(path, s, 3, types.isEmpty() ? DType::F32 : types == "F16" ? DType::F16 : DType::Q4_K);
        auto model = load_model(path);
        const auto cpu = cpu::make_cpu_backend(2);
        const auto prefill = test::prefill_logits(*cpu, *model, sequence(), 8);
        const auto decode = test::decode_logits(*cpu, *model, sequence(), 8);
        QCOMPARE(decode.size(), prefill.size());
        QCOMPARE(max_abs_diff(decode, prefill), 0.0);
    }

    // Tolerances on the relative L2 error of the logits, measured against the F32 file: about 1.5x what
    // the plain round-to-nearest quantizers of cpu/quant.h give on these random weights (Q2_K's 4 levels
    // leave little of the logits; the twin check below is the tight one).
    void weightTypes_data() {
        QTest::addColumn<int>("dtype");
        QTest::addColumn<double>("tolerance");
        QTest::newRow("F16") << int(DType::F16) << 2e-3;
        QTest::newRow("BF16") << int(DType::BF16) << 2e-2;
        QTest::newRow("Q8_0") << int(DType::Q8_0) << 5e-2;
        QTest::newRow("Q4_K") << int(DType::Q4_K) << 4e-1;
        QTest::newRow("Q4_0") << int(DType::Q4_0) << 5e-1;
        QTest::newRow("Q4_1") << int(DType::Q4_1) << 4e-1;
        QTest::newRow("Q5_0") << int(DType::Q5_0) << 2.5e-1;
        QTest::newRow("Q5_1") << int(DType::Q5_1) << 2.5e-1;
        QTest::newRow("Q2_K") << int(DType::Q2_K) << 1.5;
        QTest::newRow("Q3_K") << int(DType::Q3_K) << 8e-1;
        QTest::newRow("Q5_K") << int(DType::Q5_K) << 2.5e-1;
        QTest::newRow("Q6_K") << int(DType::Q6_K) << 1.2e-1;
        QTest::newRow("IQ4_NL") << int(DType::IQ4_NL) << 4.5e-1;
        QTest::newRow("IQ4_XS") << int(DType::IQ4_XS) << 4.5e-1;
    }
    void weightTypes() {
        QFETCH(int, dtype);
        QFETCH(double, tolerance);
        QTemporaryDir dir;
        test::RandomModelShape s;
        test::write_random_gguf(dir.filePath("f32.gguf").toStdString(), s, 9);
        test::write_random_gguf(dir.filePath("q.gguf").toStdString(), s, 9, static_cast<DType>(dtype));
        auto ref = load_model(dir.filePath("f32.gguf").toStdString());
        auto q = load_model(dir.filePath("q.gguf").toStdString());
        QCOMPARE(int(q->weights.layers[0].wq.dtype), dtype);
        const double e = rel_l2(test::prefill_logits(*q, sequence(), 0), test::prefill_logits(*ref, sequence(), 0));
        qInfo("%s: relative L2 error of logits vs F32 = %.3g", std::string(dtype_name(DType(dtype))).c_str(), e);
        QVERIFY(e < tolerance);
        QVERIFY(e > 0);  // the copy really is quantized
        // Tight: the same model with every matrix dequantized to F32 up front (the F32 paths) gives the
        // logits of the quantized one (the block-type paths: embedding lookup, dequantizing matmul) up
        // to F32 summation order. The int8 path's types (their activations are quantized too) that unpack
        // to Q8_0 against a twin in Q8_0 blocks of the same values instead: exactly (every set runs them and
        // Q8_0 through one kernel: row-major, or interleaved by 8 rows on AVX2, cpu/matmul_x8.h). Q4_K, Q5_K and Q6_K
        // also quantize activations but no Q8_0 block holds their values: against the F32 twin they differ
        // by the activations' int8 rounding alone (their kernels' exact check is test_backend_ops').
        auto twin = load_model(dir.filePath("q.gguf").toStdString());
        const bool unpacks = cpu::unpacks_to_q8_0(DType(dtype));
        const bool int8_activations = cpu::matmul_quantizes_activations(DType(dtype));
        test::convert_matrices(twin->weights, unpacks ? DType::Q8_0 : DType::F32);
        const double t = rel_l2(test::prefill_logits(*q, sequence(), 0), test::prefill_logits(*twin, sequence(), 0));
        qInfo("%s: relative L2 difference from its %s twin = %.3g", std::string(dtype_name(DType(dtype))).c_str(),
              unpacks ? "Q8_0" : "F32", t);
        // F16 and BF16 round their matmuls' inputs to the weight type (cpu::round_activations_for), which
        // the F32 twin does not: about 1.3 unit roundoffs (2^-11, 2^-8) apart, here 6.2e-4 and 5.1e-3.
        const double rounding = dtype == int(DType::F16) ? 0x1p-11 : dtype == int(DType::BF16) ? 0x1p-8 : 0.0;
        QVERIFY(unpacks ? t == 0 : t < (int8_activations ? 3e-2 : rounding > 0 ? 2 * rounding : 1e-5));
        if (dtype == int(DType::F16) || dtype == int(DType::BF16)) {  // HF checkpoints in the same type
            test::write_random_hf(dir.filePath("hf").toStdString(), s, 9, static_cast<DType>(dtype));
            auto hf = load_model(dir.filePath("hf").toStdString());
            // Not bit-equal: HF's rotate-half q/k order changes F32 summation orders upstream of the
            // matmuls, and an input on a rounding boundary then rounds to the neighbouring F16 / BF16 value
            // (1.1e-3 and 1.1e-2 here). A loader slip (a tensor misplaced or misread) moves logits by O(1).
            const double hd = max_abs_diff(test::prefill_logits(*hf, sequence(), 0), test::prefill_logits(*q, sequence(), 0));
            QVERIFY2(hd < 8 * rounding, std::to_string(hd).c_str());
        }
    }

    // A file of mixed types, as llama-quantize's K_M presets write (Q4_K_M: Q4_K with Q6_K for the
    // output and some attn_v / ffn_down, Q5_0 / Q8_0 where a row length is not a multiple of 256), here
    // with every type somewhere: each matrix keeps its own type, the embedding lookup and the lm head
    // read theirs, and the logits stay near F32's.
    void mixedTypes() {
        QTemporaryDir dir;
        test::RandomModelShape s;
        const std::map<std::string, DType> by_role = {
            {"token_embd.weight", DType::Q6_K}, {"output.weight", DType::Q5_0}, {"attn_q.weight", DType::Q4_K},
            {"attn_k.weight", DType::Q3_K},     {"attn_v.weight", DType::Q6_K},  {"attn_output.weight", DType::Q8_0},
            {"ffn_gate.weight", DType::Q5_K},   {"ffn_up.weight", DType::IQ4_XS}, {"ffn_down.weight", DType::Q4_0}};
        const std::map<std::string, DType> layer1 = {  // the other types in the second layer
            {"attn_q.weight", DType::Q4_1}, {"attn_k.weight", DType::Q5_1}, {"attn_v.weight", DType::IQ4_NL},
            {"ffn_gate.weight", DType::Q2_K}};
        auto pick = [&](const std::string& name) {
            const std::string role = name.rfind("blk.", 0) == 0 ? name.substr(name.find('.', 4) + 1) : name;
            if (name.rfind("blk.1.", 0) == 0 && layer1.count(role)) return layer1.at(role);
            return by_role.at(role);
        };
        test::write_random_gguf(dir.filePath("f32.gguf").toStdString(), s, 9);
        test::write_random_gguf(dir.filePath("mixed.gguf").toStdString(), s, 9, DType::F32, {}, "", pick);
        auto ref = load_model(dir.filePath("f32.gguf").toStdString());
        auto m = load_model(dir.filePath("mixed.gguf").toStdString());
        QCOMPARE(m->weights.token_embedding.dtype, DType::Q6_K);
        QCOMPARE(m->weights.lm_head.dtype, DType::Q5_0);
        QCOMPARE(m->weights.layers[0].w_up.dtype, DType::IQ4_XS);
        QCOMPARE(m->weights.layers[1].w_gate.dtype, DType::Q2_K);
        QCOMPARE(m->weights.layers[1].wv.dtype, DType::IQ4_NL);
        const double e = rel_l2(test::prefill_logits(*m, sequence(), 0), test::prefill_logits(*ref, sequence(), 0));
        qInfo("mixed: relative L2 error of logits vs F32 = %.3g", e);
        QVERIFY(e < 4e-1);
        QVERIFY(e > 0);
    }

    // A file with tensors of a type kvscope does not read (IQ3_S, written in place of Q3_K: the same block
    // size) is refused naming every such type and how many tensors hold it, not only the first tensor's:
    // llama-quantize's fallbacks put another type on the first tensor than the one the file was made for.
    void unreadableTypesAreAllNamed() {
        QTemporaryDir dir;
        test::RandomModelShape s;
        const std::string path = dir.filePath("iq3s.gguf").toStdString();
        test::write_random_gguf(path, s, 5, DType::F32, {}, "",
                                [](const std::string& name) { return name.ends_with("attn_k.weight") ? DType::Q3_K : DType::F32; });
        QFile f(QString::fromStdString(path));
        QVERIFY(f.open(QIODevice::ReadWrite));
        QByteArray bytes = f.readAll();
        int flipped = 0;
        for (int l = 0; l < s.layers; ++l) {
            // Tensor info: name (u64 length, bytes), n_dims (u32), dims (u64 each), type (u32), offset (u64).
            const QByteArray name = QByteArray("blk.") + QByteArray::number(l) + ".attn_k.weight";
            const qsizetype at = bytes.indexOf(name);
            QVERIFY(at > 0);
            const qsizetype type_at = at + name.size() + 4 + 2 * 8;
            QCOMPARE(quint8(bytes[type_at]), quint8(ggml_type_from_dtype(DType::Q3_K)));
            bytes[type_at] = 21;  // IQ3_S
            ++flipped;
        }
        f.seek(0);
        f.write(bytes);
        f.close();
        QString error;
        try {
            load_model(path);
        } catch (const BadInput& e) {
            error = e.what();
        }
        QVERIFY2(error.contains("has type IQ3_S, which kvscope does not support") &&
                     error.contains("types it does not read: IQ3_S x" + QString::number(flipped)),
                 qPrintable(error));
    }

    void shardedSafetensors() {
        QTemporaryDir dir;
        test::RandomModelShape s;
        const std::string one = dir.filePath("one").toStdString(), two = dir.filePath("two").toStdString();
        test::write_random_hf(one, s, 3);
        test::write_random_hf(two, s, 3);
        std::filesystem::remove(two + "/model.safetensors");
        // Split the same tensors over two shards with an index, as large checkpoints come.
        std::vector<std::tuple<std::string, std::string, std::vector<int64_t>, std::vector<uint8_t>>> a, b;
        nlohmann::json map;
        int i = 0;
        for (const auto& t : test::random_tensors(s, 3)) {
            auto& shard = (i++ % 2) ? b : a;
            shard.emplace_back(t.hf_name, "F32", t.shape, test::encode(t.values, t.shape.back(), DType::F32));
            map[t.hf_name] = (&shard == &a) ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
        }
        write_safetensors(two + "/model-00001-of-00002.safetensors", a);
        write_safetensors(two + "/model-00002-of-00002.safetensors", b);
        std::ofstream(two + "/model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
        auto m1 = load_model(one), m2 = load_model(two);
        QCOMPARE(max_abs_diff(test::prefill_logits(*m1, sequence(), 0), test::prefill_logits(*m2, sequence(), 0)), 0.0);
    }

    // A config that disagrees with its weights or holds values the loader would have to bend is refused,
    // naming the field: fewer layers than the weights hold (one was dropped), numbers that are not whole
    // or not 32-bit (nlohmann reads true as 1, 4.9 as 4, 2^32 + 64 as 64), RoPE scaling that divides by
    // zero (NaN logits), a shard named outside the directory, a config.json that is not a file.
    void configMustDescribeItsWeights_data() {
        QTest::addColumn<QString>("edit");
        QTest::addColumn<QString>("expected");
        QTest::newRow("fewer layers") << R"({"num_hidden_layers": 1})" << "belongs to layer 1";
        QTest::newRow("layers true") << R"({"num_hidden_layers": true})" << "must be a whole number";
        QTest::newRow("hidden 64.5") << R"({"hidden_size": 64.5})" << "must be a whole number";
        QTest::newRow("hidden 2^32+64") << R"({"hidden_size": 4294967360})" << "out of range";
        QTest::newRow("llama3 zeros")
            << R"({"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 0, "high_freq_factor": 0,
                   "original_max_position_embeddings": 64}})"
            << "low_freq_factor";
        QTest::newRow("gelu for llama") << R"({"hidden_act": "gelu"})" << "hidden_act 'gelu' is not supported";
        QTest::newRow("mlp_bias") << R"({"mlp_bias": true})" << "mlp_bias is not supported";
        // Sizes past any model's: 2^29 + 8 heads of 8 wrapped q_size (an int) to 64 and crashed attention;
        // ten million layers were allocated (5 GB) before the missing tensors were noticed.
        QTest::newRow("heads wrapping q_size") << R"({"num_attention_heads": 536870920, "num_key_value_heads": 536870920, "head_dim": 8})"
                                               << "num_attention_heads x head_dim 4294967360 is past";
        QTest::newRow("heads not dividing hidden") << R"({"num_attention_heads": 7, "num_key_value_heads": 7, "head_dim": null})"
                                                   << "is not a multiple of num_attention_heads 7";
        QTest::newRow("ten million layers") << R"({"num_hidden_layers": 10000000})" << "num_hidden_layers 10000000 is past";
        // A NUL in a quoted name cut the message there (what() is a C string): it is written \x00.
        QTest::newRow("NUL in model_type") << R"({"model_type": "llama\u0000x"})" << "llama\\x00x' is not supported";
        QTest::newRow("shard outside") << "index" << "not a file name in the model's directory";
        QTest::newRow("config is a directory") << "directory" << "not a regular file";
    }
    void configMustDescribeItsWeights() {
        QFETCH(QString, edit);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        test::RandomModelShape s;
        const std::string path = dir.filePath("m").toStdString();
        test::write_random_hf(path, s, 3);
        QVERIFY(load_model(path));
        if (edit == "index") {
            std::ofstream(path + "/model.safetensors.index.json")
                << nlohmann::json{{"weight_map", {{"model.norm.weight", "../m/model.safetensors"}}}}.dump();
        } else if (edit == "directory") {
            std::filesystem::remove(path + "/config.json");
            std::filesystem::create_directory(path + "/config.json");
        } else {
            nlohmann::json config;
            std::ifstream(path + "/config.json") >> config;
            config.merge_patch(nlohmann::json::parse(edit.toStdString()));
            std::ofstream(path + "/config.json") << config.dump();
        }
        QString error;
        try {
            load_model(path);
        } catch (const BadInput& e) {
            error = e.what();
        }
        QVERIFY2(error.contains(expected), qPrintable(error.isEmpty() ? "loaded" : error));
    }

    // A shard of a split GGUF (llama-gguf-split) says what it is and how to merge it.
    void splitGgufShardIsNamed() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("m-00002-of-00003.gguf").toStdString();
        GgufWriter w;
        w.set_string("general.architecture", "llama");
        w.set_u32("split.no", 1);  // llama-gguf-split writes u16; any integer type reads
        w.set_u32("split.count", 3);
        w.write(path);
        QString error;
        try {
            load_model(path);
        } catch (const BadInput& e) {
            error = e.what();
        }
        QVERIFY2(error.contains("shard 2 of 3 of a split GGUF") && error.contains("llama-gguf-split --merge"), qPrintable(error));
    }

    // Llama 3.1 RoPE scaling, against the formula of transformers' _compute_llama3_parameters.
    void llama3RopeScaling() {
        ModelConfig c = dummy_preset_config("llama-1b");
        const auto inv = c.rope_inv_freq();
        QCOMPARE(inv.size(), size_t(32));
        const double pi = 3.141592653589793;
        for (int i = 0; i < 32; ++i) {
            const double f = 1.0 / std::pow(500000.0, 2.0 * i / 64);
            const double wavelen = 2 * pi / f;
            double expect;
            if (wavelen < 8192.0 / 4) expect = f;
            else if (wavelen > 8192.0 / 1) expect = f / 32;
            else {
                const double smooth = (8192.0 / wavelen - 1) / (4 - 1);
                expect = (1 - smooth) * f / 32 + smooth * f;
            }
            QVERIFY2(std::fabs(inv[i] - expect) <= 1e-6 * expect, qPrintable(QString("i=%1").arg(i)));
        }
    }

    void dummyPresets() {
        for (const auto& name : dummy_preset_names()) dummy_preset_config(name).validate("dummy:" + name);
        QCOMPARE(dummy_preset_config("smollm-135m").num_params(), int64_t(134515008));
        // Qwen3-0.6B's model card: 0.6B parameters, 0.44B without the (tied) embedding.
        const ModelConfig qwen3 = dummy_preset_config("qwen3-0.6b");
        QCOMPARE(qwen3.num_params(), int64_t(596049920));
        QCOMPARE(qwen3.num_params() - int64_t(qwen3.vocab_size) * qwen3.hidden_size, int64_t(440467456));
        QCOMPARE(dummy_preset_config("phi3-mini").num_params(), int64_t(3821079552));  // "3.8B"
        // The safetensors totals of google/gemma-2-2b (2.61B) and google/gemma-3-1b-it (1B).
        QCOMPARE(dummy_preset_config("gemma2-2b").num_params(), int64_t(2614341888));
        QCOMPARE(dummy_preset_config("gemma3-1b").num_params(), int64_t(999885952));
        auto tiny = load_model("dummy:tiny");
        QCOMPARE(tiny->format, std::string("dummy"));
        const auto l1 = test::prefill_logits(*tiny, {256, 10, 20, 30}, 0);
        auto again = load_model("dummy:tiny");
        QCOMPARE(test::prefill_logits(*again, {256, 10, 20, 30}, 0), l1);  // seeded: identical weights
        QVERIFY_THROWS_EXCEPTION(BadInput, load_model("dummy:nope"));
        QVERIFY_THROWS_EXCEPTION(BadInput, load_model("dummy:tiny:q9"));
        auto q8 = load_model("dummy:tiny:q8_0");
        QCOMPARE(q8->weights.layers[0].wq.dtype, DType::Q8_0);
        // dummy:PRESET:TYPE for every type, by its name in lower case (and upper), and it runs.
        for (DType t : kDTypes) {
            std::string lower(dtype_name(t));
            for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            auto m = load_model("dummy:tiny:" + lower);
            QCOMPARE(m->weights.layers[0].w_down.dtype, t);
            QCOMPARE(m->weights.token_embedding.dtype, t);
            for (float v : test::prefill_logits(*m, {256, 10, 20}, 0)) QVERIFY2(std::isfinite(v), dtype_name(t).data());
        }
        QCOMPARE(load_model("dummy:tiny:Q6_K")->weights.layers[0].wq.dtype, DType::Q6_K);
        // SmolLM2-135M's rows of 576 are not whole K-type blocks: they take what llama-quantize falls back to
        // (its Q4_K_M of this model: Q5_0 there), the 1536-wide down projection keeps the type asked for.
        auto k = load_model("dummy:smollm-135m:q4_k");
        QCOMPARE(k->weights.layers[0].wq.dtype, DType::Q5_0);
        QCOMPARE(k->weights.token_embedding.dtype, DType::Q5_0);
        QCOMPARE(k->weights.layers[0].w_down.dtype, DType::Q4_K);
        for (float v : test::prefill_logits(*k, {256, 10, 20}, 0)) QVERIFY(std::isfinite(v));
    }
};

QTEST_GUILESS_MAIN(TestModelFormats)
#include "test_model_formats.moc"
