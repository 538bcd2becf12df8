// The real tiny model (stories260K, head_dim 8) end to end on the CUDA backend: greedy continuations of
// all prompts batched through the paged engine equal ../shared/models/expected.json (llama2.c's run.c),
// for the HF directory (rotate-half RoPE) and the GGUF file (interleaved RoPE) and several block sizes;
// and the raw logits of one prefill equal run.c's to 1e-3 (the CPU backend's are within 1e-4).
// Skips, with the reason, when built without CUDA or when no device is present.
#include "shared_models.h"
#include "prefill_logits.h"

#include "llm_engine.h"
#include "runner/model_runner.h"
#if KVSCOPE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

using namespace kvscope;
using nlohmann::json;

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
        for (const char* f : {"hf", "gguf"})
            for (int bs : {1, 16, 256}) QTest::newRow(QString("%1-bs%2").arg(f).arg(bs).toUtf8()) << QString(f) << bs;
    }
    void greedyContinuations() {
        QFETCH(QString, format);
        QFETCH(int, blockSize);
        auto model = test::load_stories(format);
        const json expected = test::read_json(test::models_dir() + "/expected.json");
        EngineConfig config;
        config.block_size = blockSize;
        config.scheduler.max_model_len = 512;
        config.check_invariants = true;
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
    }

    // run.c's raw logits at every generated position, from one prefill with a scattered block table.
    void logitsMatchRunC() {
        auto model = test::load_stories("hf");
        const std::string dir = test::models_dir() + "/reference_logits";
        const json index = test::read_json(dir + "/index.json");
        std::string why_not;
        auto backend = make_cuda_backend(0, &why_not);
        QVERIFY2(backend, why_not.c_str());
        for (const auto& entry : index) {
            std::vector<int32_t> tokens = entry["prompt_ids"].get<std::vector<int32_t>>();
            const auto gen = entry["generated_ids"].get<std::vector<int32_t>>();
            const int first = static_cast<int>(tokens.size()) - 1;
            tokens.insert(tokens.end(), gen.begin(), gen.end() - 1);
            const int rows = static_cast<int>(gen.size());
            std::vector<float> ref(static_cast<size_t>(rows) * model->config.vocab_size);
            std::ifstream f(dir + "/" + entry["file"].get<std::string>(), std::ios::binary);
            f.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * 4));
            QVERIFY(f.good());
            const std::vector<float> l = test::prefill_logits(*backend, *model, tokens, first);
            float max_err = 0;
            for (size_t i = 0; i < ref.size(); ++i) max_err = std::max(max_err, std::fabs(l[i] - ref[i]));
            qInfo("%s: max |cuda - run.c| = %.3g", entry["file"].get<std::string>().c_str(), max_err);
            QVERIFY2(max_err < 1e-3f, "CUDA logits differ from run.c");
        }
    }
#endif
};

QTEST_GUILESS_MAIN(TestCudaE2e)
#include "test_cuda_e2e.moc"
