// Log-probabilities (runner/logprobs.h): hand-computed rows, ranks and ties, and, through the engine,
// that they are the raw model's (log_softmax of the logits before penalties, bias and temperature)
// whatever sampling does with the row.
#include "shared_models.h"

#include "llm_engine.h"
#include "prefill_logits.h"
#include "runner/logprobs.h"
#include "util/errors.h"

#include <QtTest>
#include <cmath>

using namespace kvscope;

class TestLogprobs : public QObject {
    Q_OBJECT
private slots:
    void handComputedRow() {
        // Probabilities 0.1, 0.2, 0.3, 0.4 (any common offset of the logits cancels).
        const std::vector<float> logits = {std::log(1.f) + 7, std::log(2.f) + 7, std::log(3.f) + 7, std::log(4.f) + 7};
        const TokenLogprobs l = compute_logprobs(logits, 1, 2);
        QCOMPARE(l.token_id, 1);
        QVERIFY(std::fabs(l.logprob - std::log(0.2f)) < 1e-6);
        QCOMPARE(l.rank, 3);
        QCOMPARE(l.top.size(), size_t(2));
        QCOMPARE(l.top[0].first, 3);
        QCOMPARE(l.top[1].first, 2);
        QVERIFY(std::fabs(l.top[0].second - std::log(0.4f)) < 1e-6);
        QVERIFY(std::fabs(l.top[1].second - std::log(0.3f)) < 1e-6);
        QCOMPARE(compute_logprobs(logits, 3, 0).top.size(), size_t(0));
        QCOMPARE(compute_logprobs(logits, 3, 0).rank, 1);
    }

    void tiesBestFirstByLowerId() {
        const std::vector<float> logits = {0, 5, 5, 0, 5};
        const TokenLogprobs l = compute_logprobs(logits, 4, 4);
        QCOMPARE(l.rank, 1);
        std::vector<int32_t> ids;
        for (const auto& [id, lp] : l.top) ids.push_back(id);
        QCOMPARE(ids, (std::vector<int32_t>{1, 2, 4, 0}));
        // A -inf logit (a banned token) has a -inf log-probability, not NaN.
        const std::vector<float> banned = {0, -INFINITY};
        QVERIFY(std::isinf(compute_logprobs(banned, 1, 2).logprob));
    }

    void validated() {
        SamplingParams p;
        p.logprobs = 21;
        QVERIFY_THROWS_EXCEPTION(BadInput, p.validate());
        p.logprobs = -1;
        QVERIFY_THROWS_EXCEPTION(BadInput, p.validate());
        p.logprobs = 20;
        p.validate();
        p.prompt_logprobs = 21;
        QVERIFY_THROWS_EXCEPTION(BadInput, p.validate());
        p.prompt_logprobs = -1;  // the CLI's and the server's "off" never reaches the engine as a value
        QVERIFY_THROWS_EXCEPTION(BadInput, p.validate());
        p.prompt_logprobs = 0;
        p.validate();
    }

    // A logit bias forces a token the model thinks unlikely, under temperature and a repetition penalty:
    // the reported log-probabilities stay the raw model's at every position.
    void rawWhateverSamplingDoes() {
        auto model = test::load_stories("gguf");
        const int vocab = model->config.vocab_size;
        EngineConfig config;
        config.scheduler.max_model_len = 128;
        config.num_threads = 2;
        LlmEngine engine(model, config);
        const std::vector<int32_t> prompt = model->tokenizer.encode("Once upon a time", true);
        SamplingParams p;
        p.temperature = 0.8f;
        p.repetition_penalty = 1.3f;
        p.seed = 7;
        p.max_tokens = 12;
        p.logprobs = 3;
        p.logit_bias = {{300, 100.f}};
        const std::string id = engine.add_request({"", prompt, p, 0, ""}).front();
        std::vector<TokenLogprobs> lps;
        while (engine.has_unfinished_requests())
            for (auto& o : engine.step())
                for (auto& l : o.logprobs) lps.push_back(std::move(l));
        const std::vector<int32_t> out = engine.request_output_token_ids(id);
        QCOMPARE(lps.size(), out.size());
        std::vector<int32_t> seq = prompt;
        seq.insert(seq.end(), out.begin(), out.end() - 1);
        const std::vector<float> raw = test::prefill_logits(*model, seq, static_cast<int>(prompt.size()) - 1);
        int forced_not_best = 0;
        for (size_t t = 0; t < out.size(); ++t) {
            QCOMPARE(out[t], 300);  // the bias chose it
            const TokenLogprobs want = compute_logprobs({raw.data() + t * vocab, size_t(vocab)}, out[t], 3);
            QVERIFY(std::fabs(lps[t].logprob - want.logprob) < 1e-4);
            QCOMPARE(lps[t].rank, want.rank);
            QCOMPARE(lps[t].top.size(), size_t(3));
            for (size_t k = 0; k < 3; ++k) {
                QCOMPARE(lps[t].top[k].first, want.top[k].first);
                QVERIFY(std::fabs(lps[t].top[k].second - want.top[k].second) < 1e-4);
            }
            forced_not_best += lps[t].rank > 1;
        }
        QVERIFY2(forced_not_best > 0, "the forced token should not be the model's own choice everywhere");
        QCOMPARE(engine.kv_cache_manager().num_free_blocks(), engine.kv_cache_manager().num_blocks());
    }
};

QTEST_GUILESS_MAIN(TestLogprobs)
#include "test_logprobs.moc"
