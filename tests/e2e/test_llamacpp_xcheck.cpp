// kvscope against llama.cpp on the same GGUF files (issue 18, item 5). tests/data/llamacpp_refs/ holds
// small random-weight models in each architecture's real layout and every weight type
// (support/xcheck_models.h), and what llama.cpp computed on them: its greedy tokens and, at each
// generated position, its top-5 log-probabilities and top-2 gap. kvscope runs llama.cpp's token sequence
// teacher-forced (one near-tie cannot derail the rest), as one prefill and as a prefill plus one decode
// step per token, and must give the same greedy token wherever llama.cpp's top-2 gap exceeds 1e-3, and
// the top-5 log-probabilities within 2e-2.
// The HF-directory twins (every matrix F16) are also loaded from the Hugging Face directory that the
// generator writes from the same seed (config.json, model.safetensors, tokenizer files; never committed,
// written here) and compared with the same figures: the two loaders must agree with llama.cpp alike.
// KVSCOPE_XCHECK_REFS=DIR adds every DIR/*.json of the same form (its "model" an absolute path or one
// relative to DIR): the side-by-side check on larger files that are not committed.
// Each file also reports how far kvscope moves from itself when its norm weights move by one ulp: the
// floor below which no two engines that sum in different orders can agree on that file. The committed
// files must sit ten times below the tolerance; deep random-weight files (bench-135m: 30 layers, 8-bit
// activations) sit near it, and there a pass or a fail is decided by such a nudge, not by a bug.
#include "dequantized_twin.h"
#include "naive_forward.h"
#include "prefill_logits.h"
#include "xcheck_models.h"

#include "cpu/cpu_kernel_sets.h"
#include "runner/logprobs.h"

#include <QDir>
#include <QTemporaryDir>
#include <cmath>
#include <cstring>

using namespace kvscope;

namespace {

// As issue 18 sets them. The smallest gap in the set is 1.67e-3 (qwen3 position 2), below what mixed
// roundings move: with llama.cpp's Q8_K activations for Q4_K but unrounded inputs to the F16 matmuls,
// kvscope flipped there. It rounds matmul inputs as llama.cpp does for every type (quant.h).
constexpr double kGreedyGap = 1e-3, kLogprobTolerance = 2e-2;

std::string refs_dir() { return test::models_dir() + "/llamacpp_refs"; }

struct Agreement {
    int decided = 0, agreed = 0, near_ties = 0;
    double max_diff = 0;  // over llama.cpp's top-5 ids and over the top-5 values rank by rank
    std::string first_disagreement;
};

// rows: logits [n_generated, vocab] (kvscope's, or the exact computation's) at the positions where
// llama.cpp generated its tokens.
Agreement compare(const std::vector<float>& rows, size_t vocab, const nlohmann::json& ref) {
    Agreement a;
    const auto& out = ref["output_ids"];
    for (size_t i = 0; i < out.size(); ++i) {
        const std::span<const float> row(rows.data() + i * vocab, vocab);
        const auto& pos = ref["positions"][i];
        const TokenLogprobs ours = compute_logprobs(row, out[i].get<int32_t>(), 5);
        for (size_t k = 0; k < 5; ++k) {
            const int32_t id = pos["top5"][k][0];
            const double theirs = pos["top5"][k][1];
            a.max_diff = std::max(a.max_diff, std::fabs(compute_logprobs(row, id, 0).logprob - theirs));
            a.max_diff = std::max(a.max_diff, std::fabs(ours.top[k].second - theirs));
        }
        if (pos["top2_gap"].get<double>() <= kGreedyGap) {
            ++a.near_ties;
            continue;
        }
        ++a.decided;
        if (ours.top[0].first == out[i].get<int32_t>()) {
            ++a.agreed;
        } else if (a.first_disagreement.empty()) {
            a.first_disagreement = "position " + std::to_string(i) + ": kvscope " + std::to_string(ours.top[0].first) +
                                   ", llama.cpp " + std::to_string(out[i].get<int32_t>());
        }
    }
    return a;
}

// The largest difference between two sets of rows' log-probabilities of llama.cpp's top-5 ids.
double max_logprob_diff(const std::vector<float>& a, const std::vector<float>& b, size_t vocab, const nlohmann::json& ref) {
    double m = 0;
    for (size_t i = 0; i < ref["positions"].size(); ++i)
        for (const auto& entry : ref["positions"][i]["top5"]) {
            const int32_t id = entry[0];
            const float x = compute_logprobs({a.data() + i * vocab, vocab}, id, 0).logprob;
            const float y = compute_logprobs({b.data() + i * vocab, vocab}, id, 0).logprob;
            m = std::max(m, static_cast<double>(std::fabs(x - y)));
        }
    return m;
}

}  // namespace

class TestLlamacppXcheck : public QObject {
    Q_OBJECT
private slots:
    // The committed set is the table's: each model has its file and its figures, and nothing else is there.
    void refsMatchTable() {
        QStringList expected;
        for (const auto& m : test::xcheck_models()) {
            QVERIFY2(QFile::exists(QString::fromStdString(refs_dir() + "/" + m.name + ".gguf")), m.name.c_str());
            expected << QString::fromStdString(m.name + ".json");
        }
        QStringList jsons = QDir(QString::fromStdString(refs_dir())).entryList({"*.json"}, QDir::Files, QDir::Name);
        expected.sort();
        QCOMPARE(jsons, expected);
    }

    void sameFiles_data() {
        QTest::addColumn<QString>("ref_path");
        QTest::addColumn<int>("hf_twin");  // index into xcheck_models() of the twin to load as HF, or -1
        QTest::addColumn<bool>("committed");
        const auto& models = test::xcheck_models();
        for (size_t i = 0; i < models.size(); ++i) {
            const QString ref = QString::fromStdString(refs_dir() + "/" + models[i].name + ".json");
            QTest::newRow(models[i].name.c_str()) << ref << -1 << true;
            if (models[i].hf_twin) QTest::newRow((models[i].name + " as HF directory").c_str()) << ref << static_cast<int>(i) << true;
        }
        if (const char* extra = std::getenv("KVSCOPE_XCHECK_REFS"); extra && *extra) {
            const QDir dir(extra);
            for (const QString& f : dir.entryList({"*.json"}, QDir::Files, QDir::Name))
                QTest::newRow(qPrintable("extra/" + f)) << dir.filePath(f) << -1 << false;
        }
    }
    void sameFiles() {
        QFETCH(QString, ref_path);
        QFETCH(int, hf_twin);
        QFETCH(bool, committed);
        const nlohmann::json ref = test::read_json(ref_path);
        QString model_path = QFileInfo(ref_path).dir().filePath(QString::fromStdString(ref["model"]));
        QTemporaryDir tmp;
        if (hf_twin >= 0) {
            // The same seed writes the same values: the GGUF file written again here must be the committed
            // one byte for byte (else the directory would not hold what llama.cpp ran), then the directory.
            const test::XcheckModel& m = test::xcheck_models()[hf_twin];
            const QString again = tmp.filePath("again.gguf");
            test::write_xcheck_model(m, again.toStdString());
            QVERIFY2(test::read_all(again.toStdString()) == test::read_all(model_path.toStdString()),
                     "the generator no longer writes the committed file: remake the files and their figures together");
            model_path = tmp.filePath(QString::fromStdString(m.name));
            test::write_xcheck_hf(m, model_path.toStdString());
        }
        const auto model = load_model(model_path.toStdString());
        QCOMPARE(model->format, std::string(hf_twin >= 0 ? "hf" : "gguf"));
        std::vector<int32_t> tokens = ref["prompt_ids"].get<std::vector<int32_t>>();
        const int first = static_cast<int>(tokens.size()) - 1;
        const auto out = ref["output_ids"].get<std::vector<int32_t>>();
        QVERIFY(!out.empty() && ref["positions"].size() == out.size());
        tokens.insert(tokens.end(), out.begin(), out.end() - 1);
        const auto backend = cpu::make_cpu_backend(2);
        const size_t vocab = model->config.vocab_size;
        // The noise floor, for the record: llama.cpp against the exact computation of the same file (every
        // matrix dequantized to F32, no rounding of activations). What llama.cpp's own 8-bit rounding of
        // activations costs; kvscope may sit on either side of it.
        auto exact_model = load_model(model_path.toStdString());
        test::convert_matrices(exact_model->weights, DType::F32);
        const auto exact = test::prefill_logits(*backend, *exact_model, tokens, first);
        const Agreement floor = compare(exact, vocab, ref);
        exact_model.reset();
        qInfo("%s llama.cpp vs exact: greedy agrees at %d/%d, max top-5 |logprob difference| = %.2e",
              qPrintable(QFileInfo(model_path).fileName()), floor.agreed, floor.decided, floor.max_diff);
        std::vector<Agreement> runs;  // prefill, decode: both reported before either is checked
        std::vector<float> prefill_rows;
        for (const bool decode : {false, true}) {
            const auto rows = decode ? test::decode_logits(*backend, *model, tokens, first)
                                     : test::prefill_logits(*backend, *model, tokens, first);
            if (!decode) prefill_rows = rows;
            runs.push_back(compare(rows, vocab, ref));
            const Agreement& a = runs.back();
            qInfo("%s %s: greedy agrees at %d/%d positions (%d near-ties of llama.cpp skipped), "
                  "max top-5 |logprob difference| = %.2e (from exact: %.2e)",
                  qPrintable(QFileInfo(model_path).fileName()), decode ? "kvscope decode " : "kvscope prefill", a.agreed,
                  a.decided, a.near_ties, a.max_diff, max_logprob_diff(rows, exact, vocab, ref));
        }
        // How far the file's own forward pass moves when its inputs move by the least amount a float can:
        // one in seven of every norm's weights one ulp up. Each 8-bit rounding of an activation that sits
        // near a tie then may go the other way; a deep random-weight model can carry such flips to the
        // logits. Two engines that round alike in every op but sum in different orders differ by about this
        // much, so it is the floor below which no engine can match another on that file. The committed
        // files must sit well below the tolerance, or their check could not tell a bug from that noise.
        auto nudged_model = load_model(model_path.toStdString());
        auto nudge = [](std::vector<float>& w) {
            for (size_t i = 0; i < w.size(); i += 7) w[i] = std::nextafter(w[i], INFINITY);
        };
        for (LayerWeights& L : nudged_model->weights.layers) {
            nudge(L.attn_norm);
            nudge(L.ffn_norm);
        }
        const auto nudged_rows = test::prefill_logits(*backend, *nudged_model, tokens, first);
        nudged_model.reset();
        const Agreement nudged = compare(nudged_rows, vocab, ref);
        const double sensitivity = max_logprob_diff(prefill_rows, nudged_rows, vocab, ref);
        qInfo("%s kvscope vs itself with norm weights nudged by one ulp: max top-5 |logprob difference| = %.2e "
              "(the nudged run against llama.cpp: greedy agrees at %d/%d, %.2e)",
              qPrintable(QFileInfo(model_path).fileName()), sensitivity, nudged.agreed, nudged.decided, nudged.max_diff);
        if (committed) QVERIFY2(sensitivity <= kLogprobTolerance / 10, qPrintable(QString::number(sensitivity)));
        for (const Agreement& a : runs) {
            QVERIFY2(a.agreed == a.decided, a.first_disagreement.c_str());
            QVERIFY2(a.max_diff <= kLogprobTolerance, qPrintable(QString::number(a.max_diff)));
        }
    }

    // A third opinion on the twins, shared with neither engine: the plain double forward pass of HF's
    // modeling code (support/naive_forward.h) over the same values (the matrices rounded to F16 as the
    // files hold them). llama.cpp's figures match it as they match kvscope, so where all three agree the
    // Gemma, Qwen3 and Phi-3 semantics are HF's, not a convention the two engines happen to share.
    void twinsMatchExactForward_data() {
        QTest::addColumn<int>("index");
        const auto& models = test::xcheck_models();
        for (size_t i = 0; i < models.size(); ++i)
            if (models[i].hf_twin) QTest::newRow(models[i].name.c_str()) << static_cast<int>(i);
    }
    void twinsMatchExactForward() {
        QFETCH(int, index);
        const test::XcheckModel& m = test::xcheck_models()[index];
        const nlohmann::json ref = test::read_json(refs_dir() + "/" + m.name + ".json");
        const test::RandomModelShape s = test::xcheck_shape(m);
        std::vector<test::RandomTensor> tensors = test::random_tensors(s, test::kXcheckSeed);
        for (test::RandomTensor& t : tensors)
            if (t.shape.size() == 2) {  // F16 in both files; norms and factors stay F32
                const std::vector<uint8_t> f16 = test::encode(t.values, t.shape[1], DType::F16);
                for (int64_t r = 0; r < t.shape[0]; ++r)
                    cpu::dequantize_row(DType::F16, f16.data() + r * dtype_row_bytes(DType::F16, t.shape[1]),
                                        t.values.data() + r * t.shape[1], t.shape[1]);
            }
        std::vector<int32_t> tokens = ref["prompt_ids"].get<std::vector<int32_t>>();
        const size_t first = tokens.size() - 1;
        const auto out = ref["output_ids"].get<std::vector<int32_t>>();
        tokens.insert(tokens.end(), out.begin(), out.end() - 1);
        const std::vector<float> all = test::naive_logits(s, tensors, tokens, 1e-5, s.context);
        const std::vector<float> rows(all.begin() + first * s.vocab, all.end());
        const Agreement a = compare(rows, s.vocab, ref);
        qInfo("%s: llama.cpp vs the double forward pass: greedy agrees at %d/%d, max top-5 |logprob difference| = %.2e",
              m.name.c_str(), a.agreed, a.decided, a.max_diff);
        QVERIFY2(a.agreed == a.decided, a.first_disagreement.c_str());
        QVERIFY2(a.max_diff <= kLogprobTolerance, qPrintable(QString::number(a.max_diff)));
    }

    // The check has teeth: the same comparison, with a dequantizer that reads sub-block 1's scale and
    // min for sub-block 0 and the other way round (a packing slip of the kind a new block type invites)
    // simulated on one Q4_K matrix (gate of qwen3's file), fails by a wide margin. The exact computation
    // made from the same wrong reading would agree with it: only another engine catches this.
    void detectsWrongDequantizer() {
        const std::string path = refs_dir() + "/qwen3-q8_0-f16-q4_k.gguf";
        const nlohmann::json ref = test::read_json(refs_dir() + "/qwen3-q8_0-f16-q4_k.json");
        auto model = load_model(path);
        WeightView& w = model->weights.layers[0].w_gate;
        QCOMPARE(w.dtype, DType::Q4_K);
        const size_t n_blocks = static_cast<size_t>(w.rows * w.cols / 256);
        auto copy = std::shared_ptr<BlockQ4_K[]>(new BlockQ4_K[n_blocks]);
        std::memcpy(copy.get(), w.data, n_blocks * sizeof(BlockQ4_K));
        for (size_t b = 0; b < n_blocks; ++b) {  // sub-blocks 0 and 1: 6-bit scale in bytes 0/1, min in 4/5
            std::swap(copy[b].scales[0], copy[b].scales[1]);
            std::swap(copy[b].scales[4], copy[b].scales[5]);
        }
        model->weights.storage.push_back(copy);
        w.data = copy.get();
        std::vector<int32_t> tokens = ref["prompt_ids"].get<std::vector<int32_t>>();
        const int first = static_cast<int>(tokens.size()) - 1;
        const auto out = ref["output_ids"].get<std::vector<int32_t>>();
        tokens.insert(tokens.end(), out.begin(), out.end() - 1);
        const Agreement a = compare(test::prefill_logits(*model, tokens, first), model->config.vocab_size, ref);
        qInfo("with sub-blocks 0 and 1 swapped: greedy agrees at %d/%d, max top-5 |logprob difference| = %.2e",
              a.agreed, a.decided, a.max_diff);
        QVERIFY(a.max_diff > 5 * kLogprobTolerance);  // measured: 0.23, 12x the tolerance
    }

    // The Gemma files see Gemma's own features: each one switched off in kvscope alone moves the
    // log-probabilities past the tolerance, so a loader that dropped a key (a soft-cap, the window, the
    // local RoPE base, the global layers' factor) would fail sameFiles.
    void detectsGemmaFeatureOff_data() {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("feature");
        for (const char* f : {"attention soft-cap", "final soft-cap", "sliding window"})
            QTest::newRow(qPrintable(QString("gemma2, ") + f)) << "gemma2-f16-q8_0-q4_k" << f;
        for (const char* f : {"sliding window", "local RoPE base", "linear RoPE factor"})
            QTest::newRow(qPrintable(QString("gemma3, ") + f)) << "gemma3-q8_0-f16-q4_k" << f;
    }
    void detectsGemmaFeatureOff() {
        QFETCH(QString, file);
        QFETCH(QString, feature);
        const nlohmann::json ref = test::read_json(refs_dir() + "/" + file.toStdString() + ".json");
        auto model = load_model(refs_dir() + "/" + file.toStdString() + ".gguf");
        ModelConfig& c = model->config;
        if (feature == "attention soft-cap") {
            QVERIFY(c.attn_logit_softcapping > 0);
            c.attn_logit_softcapping = 0;
        } else if (feature == "final soft-cap") {
            QVERIFY(c.final_logit_softcapping > 0);
            c.final_logit_softcapping = 0;
        } else if (feature == "sliding window") {
            QVERIFY(c.layer_window(0) > 0 && c.layer_window(1) == 0);
            c.sliding_window = 0;
        } else if (feature == "local RoPE base") {
            QVERIFY(c.rope_local_theta > 0 && c.rope_local_theta != c.rope_theta);
            c.rope_local_theta = c.rope_theta;
        } else {
            QCOMPARE(c.rope_scaling.type, std::string("linear"));
            c.rope_scaling = {};
        }
        std::vector<int32_t> tokens = ref["prompt_ids"].get<std::vector<int32_t>>();
        const int first = static_cast<int>(tokens.size()) - 1;
        const auto out = ref["output_ids"].get<std::vector<int32_t>>();
        tokens.insert(tokens.end(), out.begin(), out.end() - 1);
        const Agreement a = compare(test::prefill_logits(*model, tokens, first), c.vocab_size, ref);
        qInfo("%s without its %s: greedy agrees at %d/%d, max top-5 |logprob difference| = %.2e", qPrintable(file),
              qPrintable(feature), a.agreed, a.decided, a.max_diff);
        QVERIFY(a.max_diff > 2 * kLogprobTolerance);
    }
};

QTEST_GUILESS_MAIN(TestLlamacppXcheck)
#include "test_llamacpp_xcheck.moc"
