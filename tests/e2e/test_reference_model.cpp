// The real tiny model (stories260K) against outputs that independent implementations produced
// (../shared/models/expected.json: llama2.c's run.c, confirmed by llama.cpp and PyTorch):
// prompt token ids, 100-token greedy continuations through the batched paged engine for several block
// sizes, and raw logits (run.c's) at every generated position, for the HF directory and the GGUF file.
#include "shared_models.h"

#include "prefill_logits.h"
#include "llm_engine.h"

#include <QFile>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

using namespace kvscope;
using nlohmann::json;


class TestReferenceModel : public QObject {
    Q_OBJECT
private slots:
    void promptIds_data() {
        QTest::addColumn<QString>("format");
        QTest::newRow("hf") << "hf";
        QTest::newRow("gguf") << "gguf";
    }
    void promptIds() {
        QFETCH(QString, format);
        auto model = test::load_stories(format);
        const json expected = test::read_json(test::models_dir() + "/expected.json");
        for (const auto& c : expected["cases"]) {
            const auto ids = model->tokenizer.encode(c["prompt"].get<std::string>(), true);
            QCOMPARE(ids, c["prompt_ids"].get<std::vector<int32_t>>());
        }
    }

    // All four prompts submitted together: batching and paging must not change a single greedy token.
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
        config.num_threads = 2;
        config.check_invariants = true;
        LlmEngine engine(model, config);
        std::vector<std::string> ids;
        SamplingParams greedy;
        greedy.temperature = 0;
        greedy.max_tokens = 100;
        for (const auto& c : expected["cases"])
            ids.push_back(engine.add_request({"", c["prompt_ids"].get<std::vector<int32_t>>(), greedy, 0, ""}).front());
        std::map<std::string, std::string> texts;
        while (engine.has_unfinished_requests())
            for (const auto& o : engine.step()) texts[o.request_id] += o.text_delta;
        for (size_t i = 0; i < ids.size(); ++i) {
            const auto& c = expected["cases"][i];
            QCOMPARE(engine.request_output_token_ids(ids[i]), c["continuation_ids"].get<std::vector<int32_t>>());
            QCOMPARE(texts[ids[i]], c["continuation_text"].get<std::string>());
        }
        QCOMPARE(engine.kv_cache_manager().num_free_blocks(), engine.kv_cache_manager().num_blocks());
    }

    // run.c's raw logits at every generated position, and HF == GGUF.
    void logitsMatchRunC() {
        auto hf = test::load_stories("hf");
        auto gguf = test::load_stories("gguf");
        const std::string dir = test::models_dir() + "/reference_logits";
        const json index = test::read_json(dir + "/index.json");
        for (const auto& entry : index) {
            std::vector<int32_t> tokens = entry["prompt_ids"].get<std::vector<int32_t>>();
            const auto gen = entry["generated_ids"].get<std::vector<int32_t>>();
            const int first = static_cast<int>(tokens.size()) - 1;
            tokens.insert(tokens.end(), gen.begin(), gen.end() - 1);
            const int rows = static_cast<int>(gen.size());
            std::vector<float> ref(static_cast<size_t>(rows) * 512);
            std::ifstream f(dir + "/" + entry["file"].get<std::string>(), std::ios::binary);
            f.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * 4));
            QVERIFY(f.good());
            const auto a = test::prefill_logits(*hf, tokens, first, 16);
            const auto b = test::prefill_logits(*gguf, tokens, first, 8);
            QCOMPARE(a.size(), ref.size());
            float max_ref = 0, max_formats = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                max_ref = std::max(max_ref, std::fabs(a[i] - ref[i]));
                max_formats = std::max(max_formats, std::fabs(a[i] - b[i]));
            }
            qInfo("%s: max |kvscope - run.c| = %.3g, max |hf - gguf| = %.3g", entry["file"].get<std::string>().c_str(),
                  max_ref, max_formats);
            QVERIFY2(max_ref < 1e-4f, "logits differ from run.c");
            QVERIFY2(max_formats < 1e-4f, "HF and GGUF logits differ");
        }
    }
};

QTEST_GUILESS_MAIN(TestReferenceModel)
#include "test_reference_model.moc"
