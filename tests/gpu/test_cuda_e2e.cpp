// The real tiny model (stories260K, head_dim 8) end to end on the CUDA backend: greedy continuations of
// all prompts batched through the paged engine equal tests/data/expected.json (llama2.c's run.c),
// for the HF directory (rotate-half RoPE) and the GGUF file (interleaved RoPE), several block sizes, with
// CUDA graphs and with --enforce-eager; the raw logits of one prefill equal run.c's to 1e-3 (the CPU
// backend's are within 1e-4). CUDA graphs: the same decode steps with and without graphs give the same
// greedy tokens (stories260K, dummy:tiny; batches on and between the capture sizes), and a replayed step
// equals the op-by-op run of the same padded step bit for bit. The device sampler: seeded requests give
// the same tokens alone and batched, and again. The same greedy run through libkvscope-cuda.so, the way
// the executables load the backend. Every weight type and Gemma's head size 256: random GGUF models
// (support/random_model.h) give the CPU backend's logits, as one prefill and step by step.
// Skips, with the reason, when built without CUDA or when no device is present.
#include "shared_models.h"
#include "prefill_logits.h"
#include "random_model.h"

#include "backend_factory.h"
#include "llm_engine.h"
#include "runner/model_runner.h"
#if KVSCOPE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#include <QTemporaryDir>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

using namespace kvscope;
using nlohmann::json;

namespace {

#if KVSCOPE_HAVE_CUDA
std::unique_ptr<Backend> cuda_backend() {
    std::string why_not;
    auto backend = make_cuda_backend(0, &why_not);
    if (!backend) qFatal("%s", why_not.c_str());
    return backend;
}

struct Generation {
    std::vector<std::vector<int32_t>> tokens;  // per prompt, in order
    int64_t replays = 0;
};

// Why graphs did not run, for a failure message.
std::string capture_error(LlmEngine& engine) {
    const std::string& e = static_cast<cuda::CudaBackend&>(engine.backend()).last_capture_error();
    return "the decode steps must run as graphs" + (e.empty() ? std::string() : "; last capture failed: " + e);
}

Generation generate(std::shared_ptr<const Model> model, const EngineConfig& config,
                    const std::vector<std::vector<int32_t>>& ps, const SamplingParams& params) {
    LlmEngine engine(std::move(model), config, cuda_backend());
    std::vector<std::string> ids;
    for (const auto& p : ps) {
        NewRequest r;
        r.prompt_token_ids = p;
        r.sampling_params = params;
        ids.push_back(engine.add_request(std::move(r)).front());
    }
    while (engine.has_unfinished_requests()) engine.step();
    Generation g;
    for (const auto& id : ids) g.tokens.push_back(engine.request_output_token_ids(id));
    g.replays = engine.model_runner().num_graph_replays();
    if (!config.enforce_eager && g.replays == 0) qWarning("%s", capture_error(engine).c_str());
    return g;
}
#endif

}  // namespace

class TestCudaE2e : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
#if KVSCOPE_HAVE_CUDA
        std::string why_not;
        if (!make_cuda_backend(0, &why_not))
            QSKIP((why_not + " (the gpu tests need an NVIDIA GPU)").c_str());
#else
        QSKIP("no CUDA device: this build has no CUDA backend (KVSCOPE_CUDA=OFF or no toolkit)");
#endif
    }

#if KVSCOPE_HAVE_CUDA
    void greedyContinuations_data() {
        QTest::addColumn<QString>("format");
        QTest::addColumn<int>("blockSize");
        QTest::addColumn<bool>("eager");
        for (const char* f : {"hf", "gguf"})
            for (int bs : {1, 16, 256})
                for (bool eager : {false, true})
                    QTest::newRow(QString("%1-bs%2%3").arg(f).arg(bs).arg(eager ? "-eager" : "").toUtf8())
                        << QString(f) << bs << eager;
    }
    void greedyContinuations() {
        QFETCH(QString, format);
        QFETCH(int, blockSize);
        QFETCH(bool, eager);
        auto model = test::load_stories(format);
        const json expected = test::read_json(test::models_dir() + "/expected.json");
        EngineConfig config;
        config.block_size = blockSize;
        config.scheduler.max_model_len = 512;
        config.check_invariants = true;
        config.enforce_eager = eager;
        std::string why_not;
        auto backend = make_cuda_backend(0, &why_not);
        QVERIFY2(backend, why_not.c_str());
        LlmEngine engine(model, config, std::move(backend));
        QCOMPARE(engine.backend().name(), std::string("cuda"));
        std::vector<std::string> ids;
        SamplingParams greedy;
        greedy.temperature = 0;
        greedy.max_tokens = 100;
        for (const auto& c : expected["cases"]) {
            NewRequest r;
            r.prompt_token_ids = c["prompt_ids"].get<std::vector<int32_t>>();
            r.sampling_params = greedy;
            ids.push_back(engine.add_request(std::move(r)).front());
        }
        std::map<std::string, std::string> texts;
        while (engine.has_unfinished_requests())
            for (const auto& o : engine.step()) texts[o.request_id] += o.text_delta;
        for (size_t i = 0; i < ids.size(); ++i) {
            const auto& c = expected["cases"][i];
            const auto got = engine.request_output_token_ids(ids[i]);
            const auto want = c["continuation_ids"].get<std::vector<int32_t>>();
            for (size_t j = 0; j < std::min(got.size(), want.size()); ++j)
                if (got[j] != want[j]) {
                    qWarning("case %zu: first difference at generated token %zu: %d, run.c %d", i, j, got[j], want[j]);
                    break;
                }
            QCOMPARE(got, want);
            QCOMPARE(texts[ids[i]], c["continuation_text"].get<std::string>());
        }
        QCOMPARE(engine.kv_cache_manager().num_free_blocks(), engine.kv_cache_manager().num_blocks());
        if (eager) QCOMPARE(engine.model_runner().num_graph_replays(), int64_t(0));
        else QVERIFY2(engine.model_runner().num_graph_replays() > 50, capture_error(engine).c_str());
    }

    // The engine as the executables build it: backend "cuda" by name, so through libkvscope-cuda.so opened
    // at run time (kernels/cuda_loader.h) rather than the kvscope_cuda this test links.
    void throughTheLibrary() {
        const auto list = available_backends();
        QVERIFY2(list[1].name == "cuda" && list[1].available, list[1].reason.c_str());
        qInfo("cuda: %s", list[1].description.c_str());
        const json expected = test::read_json(test::models_dir() + "/expected.json");
        EngineConfig config;
        config.backend = BackendKind::CUDA;
        config.scheduler.max_model_len = 512;
        config.check_invariants = true;
        LlmEngine engine(test::load_stories("gguf"), config);
        QCOMPARE(engine.backend().name(), std::string("cuda"));
        SamplingParams greedy;
        greedy.temperature = 0;
        greedy.max_tokens = 100;
        std::vector<std::string> ids;
        for (const auto& c : expected["cases"]) {
            NewRequest r;
            r.prompt_token_ids = c["prompt_ids"].get<std::vector<int32_t>>();
            r.sampling_params = greedy;
            ids.push_back(engine.add_request(std::move(r)).front());
        }
        while (engine.has_unfinished_requests()) engine.step();
        for (size_t i = 0; i < ids.size(); ++i)
            QCOMPARE(engine.request_output_token_ids(ids[i]),
                     expected["cases"][i]["continuation_ids"].get<std::vector<int32_t>>());
        QVERIFY(engine.model_runner().num_graph_replays() > 50);
    }

    // The same greedy decode with graphs and op by op. max_model_len 256 keeps the eager attention plan
    // and the captured one at one context split, so on the capture sizes (1, 2, 4, 8) the two runs do the
    // same arithmetic; between them (3, 13: padded to 4, 16) the GEMMs run with more rows, where cuBLAS
    // may pick another kernel: a mismatch only there points at that, not at the graphs.
    void graphsMatchEager_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("batch");
        for (const QString& m : {QString("stories260K"), QString("dummy:tiny")})
            for (int batch : {1, 2, 3, 4, 8, 13}) QTest::addRow("%s batch=%d", qPrintable(m), batch) << m << batch;
    }
    void graphsMatchEager() {
        QFETCH(QString, model);
        QFETCH(int, batch);
        const std::shared_ptr<const Model> m =
            model == "stories260K" ? test::load_stories("hf") : std::shared_ptr<const Model>(load_model("dummy:tiny"));
        const auto ps = test::random_prompts(batch, m->config.vocab_size, 20251202 + batch);
        EngineConfig config;
        config.scheduler.max_model_len = 256;
        config.check_invariants = true;
        SamplingParams greedy;
        greedy.temperature = 0;
        greedy.max_tokens = 48;
        greedy.ignore_eos = true;  // the decode batch stays whole to the end
        const Generation graphs = generate(m, config, ps, greedy);
        config.enforce_eager = true;
        const Generation eager = generate(m, config, ps, greedy);
        for (int i = 0; i < batch; ++i)
            for (size_t j = 0; j < graphs.tokens[i].size() && j < eager.tokens[i].size(); ++j)
                if (graphs.tokens[i][j] != eager.tokens[i][j]) {
                    qWarning("prompt %d: first difference at generated token %zu: graphs %d, eager %d", i, j,
                             graphs.tokens[i][j], eager.tokens[i][j]);
                    break;
                }
        QCOMPARE(graphs.tokens, eager.tokens);
        QVERIFY2(graphs.replays >= 40, "the decode steps must run as graphs");
        QCOMPARE(eager.replays, int64_t(0));
    }

    // The runner alone, dummy:tiny, 3 sequences (padded to 4): a replayed decode step equals the op-by-op
    // run of the same padded step (the capture's first step) bit for bit, and the unpadded eager step to
    // F32 rounding. Sequence 0 owns block 0, which the padding row reads: had padding written its K/V
    // there, the next step would be far from the eager one.
    void graphReplayMatchesOpByOp() {
        auto model = load_model("dummy:tiny");
        auto backend = cuda_backend();
        const int bs = 16, batch = 3, prompt = 20, vocab = model->config.vocab_size;
        ModelRunner runner(*model, *backend, 64, bs, 256, 16);
        const std::vector<std::vector<int32_t>> tables = {{0, 9}, {2, 30}, {17, 40}};
        std::vector<std::vector<int32_t>> tokens(batch);
        for (int s = 0; s < batch; ++s)
            for (int t = 0; t < 32; ++t) tokens[s].push_back(3 + (t * 7 + s * 13) % (vocab - 3));
        ModelInput in;
        auto step = [&](int pos, int n) {
            in.clear();
            for (int s = 0; s < batch; ++s) in.add_sequence(tokens[s].data(), pos, n, tables[s], bs, true);
            in.finalize();
            const StepOutput out = runner.execute(in);
            return std::vector<float>(out.logits, out.logits + static_cast<size_t>(batch) * vocab);
        };
        auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
            float d = 0;
            for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
            return d;
        };
        step(0, prompt);  // prefill: never a graph
        const std::vector<float> eager = step(prompt, 1);
        const std::vector<float> eager_next = step(prompt + 1, 1);
        runner.set_cuda_graphs(true, 256);
        QCOMPARE(runner.capture_sizes(), (std::vector<int>{1, 2, 4, 8, 16}));
        const std::vector<float> op_by_op = step(prompt, 1);  // runs padded to 4, then captures
        QVERIFY2(runner.num_graphs() == 1, static_cast<cuda::CudaBackend&>(*backend).last_capture_error().c_str());
        QCOMPARE(runner.num_graph_replays(), int64_t(0));
        const std::vector<float> replayed = step(prompt, 1);
        QCOMPARE(runner.num_graph_replays(), int64_t(1));
        QVERIFY2(std::memcmp(op_by_op.data(), replayed.data(), replayed.size() * sizeof(float)) == 0,
                 "a replay differs from the op-by-op run of the same padded step");
        qInfo("max |graph - eager| = %.3g", max_diff(replayed, eager));
        QVERIFY(max_diff(replayed, eager) < 1e-4f);
        const std::vector<float> graph_next = step(prompt + 1, 1);
        QCOMPARE(runner.num_graph_replays(), int64_t(2));
        qInfo("next step: max |graph - eager| = %.3g", max_diff(graph_next, eager_next));
        QVERIFY(max_diff(graph_next, eager_next) < 1e-4f);
        runner.set_cuda_graphs(false, 256);
        QCOMPARE(runner.num_graphs(), 0);
    }

    // Device sampling (top-k, top-p, temperature; only ids come back): a seeded request draws the same
    // tokens alone and in a batch (the draw depends on its seed and output index, not on its batch row),
    // the same again on a second run, and not the greedy ones.
    void deviceSamplingIsPerRequest() {
        auto m = test::load_stories("hf");
        const auto ps = test::random_prompts(6, m->config.vocab_size, 77);
        EngineConfig config;
        config.scheduler.max_model_len = 256;
        SamplingParams p;
        p.temperature = 0.9f;
        p.top_k = 40;
        p.top_p = 0.9f;
        p.seed = 1234;
        p.max_tokens = 32;
        p.ignore_eos = true;
        const Generation batched = generate(m, config, ps, p);
        QCOMPARE(generate(m, config, ps, p).tokens, batched.tokens);
        for (size_t i = 0; i < ps.size(); ++i) QCOMPARE(generate(m, config, {ps[i]}, p).tokens[0], batched.tokens[i]);
        SamplingParams greedy = p;
        greedy.temperature = 0;
        QVERIFY(generate(m, config, ps, greedy).tokens != batched.tokens);
    }

    // run.c's raw logits at every generated position, from one prefill with a scattered block table.
    void logitsMatchRunC() {
        auto model = test::load_stories("hf");
        std::string why_not;
        auto backend = make_cuda_backend(0, &why_not);
        QVERIFY2(backend, why_not.c_str());
        for (const test::ReferenceLogits& c : test::reference_logits()) {
            const std::vector<float>& ref = c.logits;
            const std::vector<float> l =
                test::prefill_logits(*backend, *model, c.scored_tokens(), static_cast<int>(c.prompt_ids.size()) - 1);
            QCOMPARE(l.size(), ref.size());
            float max_err = 0;
            for (size_t i = 0; i < ref.size(); ++i) max_err = std::max(max_err, std::fabs(l[i] - ref[i]));
            qInfo("%s: max |cuda - run.c| = %.3g", c.file.c_str(), max_err);
            QVERIFY2(max_err < 1e-3f, "CUDA logits differ from run.c");
        }
    }

    // ---- The CUDA backend computes what the CPU backend computes on every weight type (llama, head size
    // 64) and on Gemma 2 / 3 at head size 256 (windows, soft-caps; tied embeddings in the file's type):
    // random GGUF models, the logits of 48 tokens as one prefill and as a prefill plus one decode step per
    // token. Both decode the same weights to the same floats and quantize the int8 types' activations
    // alike; what is left is summation order, the F32 attention's exp (about 1e-6 relative) and the rare
    // activation that rounds to the next int8 level on one side: 1e-3 of relative L2 error leaves a wide
    // margin and is far below what any decoding slip costs (a wrong scale moves the logits by tens of
    // percent, test_model_formats's weightTypes). F16 / BF16 weights: cuBLAS takes x rounded to the
    // weight's type in every matmul (matmul.cuh), relative 2^-11 / 2^-8 per rounding: 5e-3 / 4e-2.
    void cpuAndCudaAgree_data() {
        QTest::addColumn<QString>("arch");
        QTest::addColumn<int>("dtype");
        for (DType t : kDTypes) QTest::addRow("llama %s", dtype_name(t).data()) << QString("llama") << static_cast<int>(t);
        for (const char* arch : {"gemma2", "gemma3"})
            for (DType t : {DType::F32, DType::Q4_K, DType::Q8_0})
                QTest::newRow(qPrintable(QString("%1 D=256 %2").arg(arch, dtype_name(t).data()))) << QString(arch) << static_cast<int>(t);
    }
    void cpuAndCudaAgree() {
        QFETCH(QString, arch);
        QFETCH(int, dtype);
        test::RandomModelShape s;
        if (arch != "llama") {
            s = test::gemma_shape(arch.toStdString());
            s.head_dim = 256;
        }
        QTemporaryDir dir;
        const std::string path = dir.filePath("m.gguf").toStdString();
        test::write_random_gguf(path, s, 11, static_cast<DType>(dtype));
        const auto model = load_model(path);
        QCOMPARE(model->config.head_dim, s.head_dim);
        std::vector<int32_t> tokens{1};
        for (int i = 0; i < 47; ++i) tokens.push_back(3 + (i * 37) % 500);
        const auto cpu = cpu::make_cpu_backend(2);
        const std::vector<float> ref = test::prefill_logits(*cpu, *model, tokens, 0);
        const auto gpu = cuda_backend();
        const double tolerance = dtype == int(DType::F16) ? 5e-3 : dtype == int(DType::BF16) ? 4e-2 : 1e-3;
        for (const bool decode : {false, true}) {
            const std::vector<float> got = decode ? test::decode_logits(*gpu, *model, tokens, 0)
                                                  : test::prefill_logits(*gpu, *model, tokens, 0);
            QCOMPARE(got.size(), ref.size());
            double err = 0, norm = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                err += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
                norm += static_cast<double>(ref[i]) * ref[i];
            }
            const double rel = std::sqrt(err / norm);
            qInfo("%s: relative L2 |cuda %s - cpu| = %.3g", QTest::currentDataTag(), decode ? "decode" : "prefill", rel);
            QVERIFY2(rel < tolerance, qPrintable(QString("%1: relative L2 error %2").arg(decode ? "decode" : "prefill").arg(rel)));
        }
    }
#endif
};

QTEST_GUILESS_MAIN(TestCudaE2e)
#include "test_cuda_e2e.moc"
