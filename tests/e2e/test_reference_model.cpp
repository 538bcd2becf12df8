// The real tiny model (stories260K) against outputs that independent implementations produced
// (tests/data/expected.json: llama2.c's run.c, confirmed by llama.cpp and PyTorch):
// prompt token ids, 100-token greedy continuations through the batched paged engine for several block
// sizes, and raw logits (run.c's) at every generated position, for the HF directory and the GGUF file.
#include "shared_models.h"
#include "engine_fixtures.h"

#include "prefill_logits.h"
#include "llm_engine.h"

#include <QFile>
#include <cmath>
#include <numeric>
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
        EngineConfig config = test::checked_engine_config();
        config.block_size = blockSize;
        LlmEngine engine(model, config);
        std::vector<std::string> ids;
        const SamplingParams greedy = test::greedy(100);  // run.c's continuations are 100 tokens, no EOS
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
        for (const test::ReferenceLogits& c : test::reference_logits()) {
            const std::vector<int32_t> tokens = c.scored_tokens();
            const int first = static_cast<int>(c.prompt_ids.size()) - 1;
            const std::vector<float>& ref = c.logits;
            const auto a = test::prefill_logits(*hf, tokens, first, 16);
            const auto b = test::prefill_logits(*gguf, tokens, first, 8);
            QCOMPARE(a.size(), ref.size());
            float max_ref = 0, max_formats = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                max_ref = std::max(max_ref, std::fabs(a[i] - ref[i]));
                max_formats = std::max(max_formats, std::fabs(a[i] - b[i]));
            }
            qInfo("%s: max |kvscope - run.c| = %.3g, max |hf - gguf| = %.3g", c.file.c_str(), max_ref, max_formats);
            QVERIFY2(max_ref < 1e-4f, "logits differ from run.c");
            QVERIFY2(max_formats < 1e-4f, "HF and GGUF logits differ");
        }
    }

    // Log-probabilities (generate --logprobs): each generated token's and its top 5 alternatives' are
    // log_softmax of run.c's raw logits, with the four prompts batched and paged.
    void logprobsMatchRunC() {
        auto model = test::load_stories("gguf");
        const std::vector<test::ReferenceLogits> refs = test::reference_logits();
        EngineConfig config = test::checked_engine_config();
        config.block_size = 16;
        LlmEngine engine(model, config);
        SamplingParams p;
        p.temperature = 0;
        p.logprobs = 5;
        std::vector<std::string> ids;
        for (const test::ReferenceLogits& c : refs) {
            p.max_tokens = static_cast<int>(c.generated_ids.size());
            ids.push_back(engine.add_request({"", c.prompt_ids, p, 0, ""}).front());
        }
        std::map<std::string, std::vector<TokenLogprobs>> got;
        while (engine.has_unfinished_requests())
            for (auto& o : engine.step()) {
                QCOMPARE(o.logprobs.size(), o.new_token_ids.size());
                for (auto& l : o.logprobs) got[o.request_id].push_back(std::move(l));
            }
        int compared = 0;
        for (size_t r = 0; r < ids.size(); ++r) {
            const auto& lps = got[ids[r]];
            const std::vector<int32_t>& gen = refs[r].generated_ids;
            QCOMPARE(lps.size(), gen.size());
            for (size_t t = 0; t < gen.size(); ++t) {
                const float* row = refs[r].row(t);
                const std::vector<double> ref_lp = test::log_softmax(row);
                QCOMPARE(lps[t].token_id, gen[t]);
                QCOMPARE(lps[t].rank, 1);  // greedy
                QVERIFY2(std::fabs(lps[t].logprob - ref_lp[size_t(gen[t])]) < 1e-4, "sampled token's logprob");
                QCOMPARE(lps[t].top.size(), size_t(5));
                QCOMPARE(lps[t].top.front().first, gen[t]);
                for (size_t k = 0; k < 5; ++k) {
                    QVERIFY2(std::fabs(lps[t].top[k].second - ref_lp[size_t(lps[t].top[k].first)]) < 1e-4, "top-5 logprob");
                    if (k > 0) QVERIFY(lps[t].top[k].second <= lps[t].top[k - 1].second);
                    // Ranked as run.c ranks them, where run.c's values are clearly apart.
                    int better = 0;
                    for (int i = 0; i < 512; ++i) better += row[i] > row[lps[t].top[k].first] + 1e-3f;
                    QVERIFY2(better <= static_cast<int>(k), "a better token is missing from the top 5");
                }
                ++compared;
            }
        }
        QVERIFY(compared > 100);
    }

    // Prompt log-probabilities (vLLM's prompt_logprobs): each prompt is a reference prompt followed by
    // part of run.c's continuation, so that every prompt token after the reference prompt has run.c's raw
    // logits row before it. The values must not depend on how the prompt is computed: in one step, in
    // chunks of 16 tokens, with the same prompts in the prefix cache (a request with prompt_logprobs takes
    // no hits: the logits of cached positions are never computed), or preempted and recomputed (the prompt
    // logprobs come exactly once, with the first token, and are not recomputed).
    void promptLogprobsMatchRunC_data() {
        QTest::addColumn<QString>("mode");
        for (const char* m : {"whole", "chunked", "prefix-cache", "preemption"}) QTest::newRow(m) << QString(m);
    }
    void promptLogprobsMatchRunC() {
        QFETCH(QString, mode);
        auto model = test::load_stories("gguf");
        const std::vector<test::ReferenceLogits> refs = test::reference_logits();
        EngineConfig config = test::checked_engine_config();
        config.block_size = 16;
        config.scheduler.max_num_seqs = 8;  // 8 logits rows: each step's prompt rows go through in many pieces
        // preemption: 24 blocks of 16 tokens for four requests that grow to 10 blocks each.
        const int num_continued = mode == "preemption" ? 100 : 150;  // reference tokens appended to the prompt
        const int max_tokens = mode == "preemption" ? 60 : 1;
        if (mode == "chunked") config.scheduler.max_num_batched_tokens = 16;
        if (mode == "prefix-cache") config.scheduler.enable_prefix_caching = true;
        if (mode == "preemption") config.num_blocks = 24;
        LlmEngine engine(model, config);
        std::vector<std::vector<int32_t>> prompts;
        for (const test::ReferenceLogits& c : refs) {
            std::vector<int32_t> prompt = c.prompt_ids;
            prompt.insert(prompt.end(), c.generated_ids.begin(), c.generated_ids.begin() + num_continued);
            prompts.push_back(std::move(prompt));
        }
        SamplingParams p;
        p.temperature = 0;
        p.max_tokens = max_tokens;
        if (mode == "prefix-cache") {  // the same prompts first, without prompt logprobs: their blocks stay cached
            for (const auto& prompt : prompts) engine.add_request({"", prompt, p, 0, ""});
            while (engine.has_unfinished_requests()) engine.step();
        }
        p.prompt_logprobs = 5;
        std::vector<std::string> ids;
        for (const auto& prompt : prompts) ids.push_back(engine.add_request({"", prompt, p, 0, ""}).front());
        std::map<std::string, std::vector<std::vector<TokenLogprobs>>> got;  // every prompt_logprobs that came
        std::map<std::string, size_t> outputs_before;  // outputs of the request before its prompt logprobs came
        std::map<std::string, size_t> num_outputs;
        while (engine.has_unfinished_requests())
            for (auto& o : engine.step()) {
                if (o.prompt_logprobs) {
                    outputs_before[o.request_id] = num_outputs[o.request_id];
                    got[o.request_id].push_back(std::move(*o.prompt_logprobs));
                }
                ++num_outputs[o.request_id];
            }
        int compared = 0, preempted_after_first_token = 0;
        for (size_t r = 0; r < ids.size(); ++r) {
            const RequestMetrics m = *engine.request_metrics(ids[r]);
            QCOMPARE(m.num_cached_tokens, 0);
            for (double t : m.preemption_times) preempted_after_first_token += !m.token_times.empty() && t > m.token_times.front();
            QCOMPARE(got[ids[r]].size(), size_t(1));  // once, never again after a recompute
            QCOMPARE(outputs_before[ids[r]], size_t(0));  // with the first token
            const auto& lps = got[ids[r]].front();
            const auto& prompt = prompts[r];
            QCOMPARE(lps.size(), prompt.size() - 1);  // none for the first token
            const size_t first = refs[r].prompt_ids.size();  // prompt[first] is scored by run.c's row 0
            const std::vector<int32_t>& gen = refs[r].generated_ids;
            QCOMPARE(engine.request_output_token_ids(ids[r]),
                     std::vector<int32_t>(gen.begin() + num_continued, gen.begin() + num_continued + max_tokens));
            for (size_t j = first; j < prompt.size(); ++j) {
                const TokenLogprobs& l = lps[j - 1];
                const std::vector<double> ref_lp = test::log_softmax(refs[r].row(j - first));
                QCOMPARE(l.token_id, prompt[j]);
                QVERIFY2(std::fabs(l.logprob - ref_lp[size_t(prompt[j])]) < 1e-4, "prompt token's logprob");
                QCOMPARE(l.top.size(), size_t(5));
                QCOMPARE(l.top.front().first, prompt[j]);  // run.c's greedy choice was this token
                for (const auto& [id, lp] : l.top) QVERIFY2(std::fabs(lp - ref_lp[size_t(id)]) < 1e-4, "top-5 logprob");
                ++compared;
            }
        }
        QCOMPARE(compared, 4 * num_continued);
        if (mode == "prefix-cache") {  // the cache did hold the prompts: a request without prompt logprobs hits
            SamplingParams plain = p;
            plain.prompt_logprobs.reset();
            const std::string id = engine.add_request({"", prompts[0], plain, 0, ""}).front();
            while (engine.has_unfinished_requests()) engine.step();
            QVERIFY(engine.request_metrics(id)->num_cached_tokens >= 16 * 9);
        }
        if (mode == "preemption") QVERIFY2(preempted_after_first_token > 0, "no request was preempted after its first token");
    }

    // A half-precision KV cache (--kv-cache-dtype float16 / bfloat16) rounds every cached K and V value:
    // the logits move off run.c's by about that rounding, not more, and the greedy token stays the same
    // where run.c's top two logits are clearly apart. The error must also be above zero: the cache
    // really holds halves.
    void halfKvCacheLogitsNearRunC_data() {
        QTest::addColumn<int>("kvDtype");
        QTest::addColumn<float>("bound");
        QTest::newRow("float16") << int(DType::F16) << 0.06f;  // measured 0.026
        QTest::newRow("bfloat16") << int(DType::BF16) << 0.6f;  // measured 0.25 (8 bits of mantissa)
    }
    void halfKvCacheLogitsNearRunC() {
        QFETCH(int, kvDtype);
        QFETCH(float, bound);
        auto gguf = test::load_stories("gguf");
        const std::unique_ptr<Backend> cpu_backend = cpu::make_cpu_backend(2);
        Backend& backend = *cpu_backend;
        float worst = 0;
        for (const test::ReferenceLogits& c : test::reference_logits()) {
            const int first = static_cast<int>(c.prompt_ids.size()) - 1;
            const int rows = static_cast<int>(c.generated_ids.size()), vocab = test::ReferenceLogits::kVocab;
            const std::vector<float>& ref = c.logits;
            const auto a = test::prefill_logits(backend, *gguf, c.scored_tokens(), first, 16, static_cast<DType>(kvDtype));
            QCOMPARE(a.size(), ref.size());
            for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(a[i] - ref[i]));
            for (int r = 0; r < rows; ++r) {
                const float* want = ref.data() + static_cast<size_t>(r) * vocab;
                const float* got = a.data() + static_cast<size_t>(r) * vocab;
                std::vector<int> order(vocab);
                std::iota(order.begin(), order.end(), 0);
                std::partial_sort(order.begin(), order.begin() + 2, order.end(),
                                  [&](int x, int y) { return want[x] > want[y]; });
                if (want[order[0]] - want[order[1]] > 2 * bound)
                    QCOMPARE(static_cast<int>(std::max_element(got, got + vocab) - got), order[0]);
            }
        }
        qInfo("max |kvscope - run.c| with a %s KV cache = %.3g", QTest::currentDataTag(), worst);
        QVERIFY2(worst < bound, "logits moved further than the cache's rounding explains");
        QVERIFY2(worst > 1e-5f, "no rounding at all: is the cache really half precision?");
    }
};

QTEST_GUILESS_MAIN(TestReferenceModel)
#include "test_reference_model.moc"
