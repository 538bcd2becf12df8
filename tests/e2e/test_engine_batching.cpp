// The continuous-batching engine on the real tiny model: batch invariance across block sizes, token
// budgets, policies, prefix caching and the naive mode; preemption under a small KV budget; priority
// TTFT; live reconfiguration (block_size by drain-and-rebuild, max_num_seqs) losing nothing; seeded
// sampling alone vs batched; invalid requests rejected while others run. Every engine here checks the
// scheduler and pool invariants after every step (EngineConfig::check_invariants).
#include "engine_fixtures.h"
#include "test_support.h"

#include "llm_engine.h"
#include "metrics/step_recorder.h"
#include "util/errors.h"
#include "util/host_memory.h"
#include "util/utf8.h"

#include <map>
#include <random>

using namespace kvscope;
using test::greedy;

namespace {

std::shared_ptr<const Model> stories() {
    static std::shared_ptr<const Model> m = load_model(test::models_dir() + "/stories260K-hf");
    return m;
}

struct Prompt {
    std::vector<int32_t> ids;
    int priority = 0;
};

// 32 prompts of mixed lengths (1..120 tokens); a third share a 71-token prefix so the prefix cache hits.
std::vector<Prompt> mixed_prompts(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> tok(3, 511);
    std::vector<int32_t> shared{1};
    for (int i = 0; i < 70; ++i) shared.push_back(tok(rng));
    std::vector<Prompt> out;
    for (int i = 0; i < 32; ++i) {
        Prompt p;
        const int len = std::uniform_int_distribution<int>(1, 120)(rng);
        p.ids = i % 3 == 0 ? shared : std::vector<int32_t>{1};
        while (static_cast<int>(p.ids.size()) < len + (i % 3 == 0 ? 70 : 0)) p.ids.push_back(tok(rng));
        p.priority = static_cast<int>(rng() % 4);
        out.push_back(p);
    }
    return out;
}

// Runs every prompt in one engine; returns output ids in prompt order. Optional hook per step.
std::vector<std::vector<int32_t>> run_all(LlmEngine& engine, const std::vector<Prompt>& prompts, const SamplingParams& p,
                                          const std::function<void(LlmEngine&, int64_t)>& on_step = {}) {
    std::vector<std::string> ids;
    for (const auto& pr : prompts) ids.push_back(engine.add_request({"", pr.ids, p, pr.priority, ""}).front());
    int64_t step = 0;
    while (engine.has_unfinished_requests()) {
        engine.step();
        if (on_step) on_step(engine, step++);
        if (step > 100000) qFatal("engine does not finish");
    }
    std::vector<std::vector<int32_t>> out;
    for (const auto& id : ids) out.push_back(engine.request_output_token_ids(id));
    return out;
}

const std::vector<std::vector<int32_t>>& alone_outputs() {
    static std::vector<std::vector<int32_t>> out = [] {
        std::vector<std::vector<int32_t>> r;
        for (const auto& p : mixed_prompts(7)) {
            LlmEngine e(stories(), test::checked_engine_config());
            r.push_back(run_all(e, {p}, greedy(16)).front());
        }
        return r;
    }();
    return out;
}

void expect_all_blocks_free(const LlmEngine& e) {
    QCOMPARE(e.kv_cache_manager().num_free_blocks(), e.kv_cache_manager().num_blocks());
}

}  // namespace

class TestEngineBatching : public QObject {
    Q_OBJECT
private slots:
    void batchInvariance_data() {
        QTest::addColumn<int>("blockSize");
        QTest::addColumn<int>("budget");
        QTest::addColumn<QString>("policy");
        QTest::addColumn<bool>("caching");
        QTest::addColumn<QString>("mode");
        for (int bs : {1, 16, 64})
            for (int budget : {16, 2048})
                for (const char* policy : {"fcfs", "priority"})
                    for (bool caching : {false, true})
                        QTest::newRow(QString("bs%1-b%2-%3-%4").arg(bs).arg(budget).arg(policy).arg(caching ? "pc" : "nopc").toUtf8())
                            << bs << budget << QString(policy) << caching << QString("paged");
        for (int budget : {16, 2048})
            QTest::newRow(QString("naive-b%1").arg(budget).toUtf8()) << 16 << budget << QString("fcfs") << false << QString("naive");
    }
    void batchInvariance() {
        QFETCH(int, blockSize);
        QFETCH(int, budget);
        QFETCH(QString, policy);
        QFETCH(bool, caching);
        QFETCH(QString, mode);
        EngineConfig c = test::checked_engine_config();
        c.block_size = blockSize;
        c.scheduler.max_num_batched_tokens = budget;
        c.scheduler.policy = parse_scheduler_policy(policy.toStdString());
        c.scheduler.enable_prefix_caching = caching;
        c.scheduler.max_num_seqs = mode == "naive" ? 8 : 256;
        c.mode = parse_batching_mode(mode.toStdString());
        LlmEngine engine(stories(), c);
        const auto prompts = mixed_prompts(7);
        const auto out = run_all(engine, prompts, greedy(16));
        for (size_t i = 0; i < prompts.size(); ++i) QCOMPARE(out[i], alone_outputs()[i]);
        expect_all_blocks_free(engine);
        if (caching) QVERIFY(engine.kv_cache_manager().prefix_cache_stats().num_hit_tokens > 0);
    }

    // A static batch computes what a padded batch would: every prompt padded to the batch's longest,
    // and one row per finished member in every later decode step. Outputs stay those of a lone run.
    void naiveBatchComputesPadding() {
        EngineConfig c = test::checked_engine_config();
        c.mode = BatchingMode::NAIVE;
        c.scheduler.max_num_seqs = 3;
        LlmEngine engine(stories(), c);
        StepRecorder recorder;
        engine.set_metrics_sink(&recorder);
        const std::vector<std::vector<int32_t>> prompts = {{1, 50, 60}, {1, 50, 60, 70, 80}, {1, 9, 8, 7, 6, 5, 4, 3, 2}};
        const std::vector<int> max_tokens = {2, 4, 6};
        for (int i = 0; i < 3; ++i) engine.add_request({"r" + std::to_string(i), prompts[i], greedy(max_tokens[i]), 0, ""});
        int64_t prefill = 0, decode = 0;
        while (engine.has_unfinished_requests()) {
            engine.step();
            prefill += recorder.steps().back().num_prefill_tokens;
            decode += recorder.steps().back().num_decode_tokens;
        }
        QCOMPARE(prefill, int64_t{3 + 5 + 9});
        QCOMPARE(decode, int64_t{(2 - 1) + (4 - 1) + (6 - 1)});
        // Prompt padding (9-3)+(9-5) plus decode padding (6-2)+(6-4).
        QCOMPARE(recorder.aggregates().num_padding_tokens, int64_t{10 + 6});
        for (int i = 0; i < 3; ++i) {
            LlmEngine alone(stories(), test::checked_engine_config());
            QCOMPARE(engine.request_output_token_ids("r" + std::to_string(i)),
                     run_all(alone, {Prompt{prompts[i]}}, greedy(max_tokens[i])).front());
        }
        expect_all_blocks_free(engine);
    }

    void preemptionUnderSmallBudget() {
        EngineConfig c = test::checked_engine_config();
        c.num_blocks = 16;  // 256 slots for 32 requests: preemption is certain
        LlmEngine engine(stories(), c);
        const auto prompts = mixed_prompts(7);
        const auto out = run_all(engine, prompts, greedy(16));
        QVERIFY(engine.scheduler().num_preemptions() > 0);
        for (size_t i = 0; i < prompts.size(); ++i) QCOMPARE(out[i], alone_outputs()[i]);
        expect_all_blocks_free(engine);
    }

    void priorityRequestGetsFirstTokenQuickly() {
        EngineConfig c = test::checked_engine_config();
        c.scheduler.policy = SchedulerPolicy::PRIORITY;
        c.scheduler.max_num_seqs = 4;
        LlmEngine engine(stories(), c);
        for (int i = 0; i < 8; ++i) engine.add_request({"low" + std::to_string(i), {1, 50, 60, 70}, greedy(200), 10, ""});
        for (int i = 0; i < 20; ++i) engine.step();
        engine.add_request({"high", {1, 80, 90}, greedy(4), 0, ""});
        int steps = 0;
        while (engine.request_output_token_ids("high").empty()) {
            engine.step();
            QVERIFY(++steps <= 2);
        }
        QVERIFY(engine.scheduler().num_preemptions() > 0);  // a low-priority request gave up its seat
        while (engine.has_unfinished_requests()) engine.step();
        expect_all_blocks_free(engine);
    }

    void fcfsOrderHolds() {
        EngineConfig c = test::checked_engine_config();
        c.scheduler.max_num_seqs = 1;
        LlmEngine engine(stories(), c);
        std::vector<std::string> finished;
        for (int i = 0; i < 5; ++i) engine.add_request({"r" + std::to_string(i), {1, 100 + i}, greedy(3), 4 - i, ""});
        while (engine.has_unfinished_requests())
            for (const auto& o : engine.step())
                if (o.finished) finished.push_back(o.request_id);
        QCOMPARE(finished, (std::vector<std::string>{"r0", "r1", "r2", "r3", "r4"}));
    }

    void reconfigureMidRun() {
        EngineConfig c = test::checked_engine_config();
        LlmEngine engine(stories(), c);
        StepRecorder recorder;
        engine.set_metrics_sink(&recorder);
        auto prompts = mixed_prompts(7);
        prompts.resize(20);
        const auto out = run_all(engine, prompts, greedy(16), [&](LlmEngine& e, int64_t step) {
            EngineConfig next = e.config();
            if (step == 3) next.block_size = 64;
            if (step == 6) next.scheduler.max_num_seqs = 3;
            if (step == 9) next.block_size = 8;
            if (step == 12) next.scheduler.max_num_seqs = 256;
            if (step == 14) next.scheduler.enable_prefix_caching = true;
            if (step != 3 && step != 6 && step != 9 && step != 12 && step != 14) return;
            const int64_t before = e.num_preemptions();
            const auto running = static_cast<int64_t>(e.scheduler().running().size());
            e.reconfigure(next);
            // A rebuild (block_size, prefix caching; not max_num_seqs) drains what runs: each drained request
            // is a preemption, and the engine's count runs on over the new scheduler, as the requests' do.
            const bool rebuilt = step == 3 || step == 9 || step == 14;
            QCOMPARE(e.num_preemptions(), before + (rebuilt ? running : 0));
        });
        for (size_t i = 0; i < prompts.size(); ++i) QCOMPARE(out[i], alone_outputs()[i]);
        QCOMPARE(engine.kv_cache_manager().block_size(), 8);
        expect_all_blocks_free(engine);
        // The steps' preemptions add up to the engine's: a drain's count in the step after it (they were in
        // no step, and the timeline summed to less than the status bar).
        int64_t per_step = 0;
        for (const StepStats& s : recorder.steps()) per_step += s.num_preemptions;
        QVERIFY(engine.num_preemptions() > 0);
        QCOMPARE(per_step, engine.num_preemptions());
        QCOMPARE(recorder.steps().back().total_preemptions, engine.num_preemptions());
    }

    // Reconfiguration is a transaction: a configuration whose pool cannot hold every unfinished request
    // is refused before anything changes (config, pool geometry, requests), and the run goes on to the
    // same outputs. Cases: paged -> naive with fewer blocks than max_model_len needs (the drained requests
    // would wait forever), and a budget too small for the longest request.
    void refusedReconfigurationChangesNothing_data() {
        QTest::addColumn<QString>("change");
        QTest::newRow("naive without room for max_model_len") << "naive";
        QTest::newRow("pool smaller than one request") << "tiny pool";
    }
    void refusedReconfigurationChangesNothing() {
        QFETCH(QString, change);
        EngineConfig c = test::checked_engine_config();
        c.num_blocks = 40;  // paged: plenty for 16-token requests; naive needs 512 / 16 = 32 per request
        c.block_size = 16;
        LlmEngine engine(stories(), c);
        auto prompts = mixed_prompts(7);
        prompts.resize(12);
        int refusals = 0;
        const auto out = run_all(engine, prompts, greedy(16), [&](LlmEngine& e, int64_t step) {
            if (step != 2) return;
            EngineConfig next = e.config();
            if (change == "naive") {
                next.mode = BatchingMode::NAIVE;
                next.num_blocks = 24;
            } else {
                next.num_blocks = 2;  // 32 tokens: the 120-token prompts cannot fit
            }
            const int blocks_before = e.num_blocks();
            const auto running_before = e.scheduler().running().size();
            try {
                e.reconfigure(next);
            } catch (const BadInput& err) {
                ++refusals;
                QVERIFY2(QString(err.what()).contains("nothing was changed"), err.what());
            }
            QCOMPARE(e.config().mode, BatchingMode::PAGED);
            QCOMPARE(e.num_blocks(), blocks_before);
            QCOMPARE(e.scheduler().running().size(), running_before);  // nothing was drained
        });
        QCOMPARE(refusals, 1);
        for (size_t i = 0; i < prompts.size(); ++i) QCOMPARE(out[i], alone_outputs()[i]);
        expect_all_blocks_free(engine);
    }

    // Accepted switches under load change no greedy output: paged -> naive (with room) -> paged, a KV
    // budget change, and prefix caching on and off, while requests run.
    void acceptedSwitchesUnderLoadLoseNothing() {
        EngineConfig c = test::checked_engine_config();
        LlmEngine engine(stories(), c);
        auto prompts = mixed_prompts(7);
        prompts.resize(16);
        const auto out = run_all(engine, prompts, greedy(16), [&](LlmEngine& e, int64_t step) {
            EngineConfig next = e.config();
            if (step == 2) next.mode = BatchingMode::NAIVE;
            if (step == 5) next.mode = BatchingMode::PAGED;
            if (step == 7) next.kv_cache_memory = 8 << 20;
            if (step == 9) next.scheduler.enable_prefix_caching = true;
            if (step == 11) next.scheduler.enable_prefix_caching = false;
            if (step == 2 || step == 5 || step == 7 || step == 9 || step == 11) e.reconfigure(next);
        });
        for (size_t i = 0; i < prompts.size(); ++i) QCOMPARE(out[i], alone_outputs()[i]);
        expect_all_blocks_free(engine);
    }

    // A host pool larger than the machine is refused by name, at start-up and as a knob change (which then
    // changes nothing), not attempted until the allocator throws std::bad_alloc.
    void kvPoolBeyondHostMemoryIsBadInput() {
        EngineConfig c = test::checked_engine_config();
        const int64_t too_much = host_memory_bytes() + (int64_t{1} << 30);
        c.kv_cache_memory = too_much;
        bool refused = false;
        try {
            LlmEngine engine(stories(), c);
        } catch (const BadInput& e) {
            refused = QString(e.what()).contains("exceeds this machine's memory");
            qInfo("%s", e.what());
        }
        QVERIFY(refused);
        LlmEngine engine(stories(), test::checked_engine_config());
        const int blocks = engine.num_blocks();
        EngineConfig next = engine.config();
        next.kv_cache_memory = too_much;
        QVERIFY_THROWS_EXCEPTION(BadInput, engine.reconfigure(next));
        QCOMPARE(engine.num_blocks(), blocks);
    }

    // A temperature below vLLM's 1e-5 samples greedily: 1e-40 divided the logits into inf, whose softmax
    // is NaN. The same tokens as temperature 0, for prompts alone.
    void tinyTemperatureIsGreedy() {
        LlmEngine engine(stories(), test::checked_engine_config());
        SamplingParams p = greedy(16);
        p.temperature = 1e-40f;  // a float denormal: logit / temperature overflows
        p.seed = 7;
        auto prompts = mixed_prompts(7);
        prompts.resize(6);
        const auto out = run_all(engine, prompts, p);
        for (size_t i = 0; i < prompts.size(); ++i) QCOMPARE(out[i], alone_outputs()[i]);
    }

    // Knobs moved while the engine idles: each rebuild is reported, in order, by the next step, which the
    // GUI runs at once (has_pending_event) so the event carries the time it happened, not the next request's.
    void idleRebuildsAreEachReported() {
        EngineConfig c = test::checked_engine_config();
        LlmEngine engine(stories(), c);
        StepRecorder recorder;
        engine.set_metrics_sink(&recorder);
        QVERIFY(!engine.has_pending_event());
        for (int block_size : {32, 8}) {
            EngineConfig next = engine.config();
            next.block_size = block_size;
            engine.reconfigure(next);
        }
        QVERIFY(engine.has_pending_event());
        QVERIFY(!engine.has_unfinished_requests());
        QVERIFY(engine.step().empty());
        QVERIFY(!engine.has_pending_event());
        QCOMPARE(recorder.steps().size(), size_t(1));
        const QString event = QString::fromStdString(recorder.steps().back().event);
        QVERIFY2(event.startsWith("rebuild: block_size 16 -> 32") && event.contains("; rebuild: block_size 32 -> 8"),
                 qPrintable(event));
        QCOMPARE(recorder.steps().back().num_scheduled_seqs, 0);
        QCOMPARE(recorder.steps().back().block_size, 8);
    }

    // Aborts leave the engine idle with their blocks freed and no step to show it: the next step (which the
    // GUI runs at once) records the state they left and says so. The timeline ended with the requests
    // still running, before, while the block map showed the pool free.
    void abortsAreReportedByTheNextStep() {
        EngineConfig c = test::checked_engine_config();
        LlmEngine engine(stories(), c);
        StepRecorder recorder;
        engine.set_metrics_sink(&recorder);
        SamplingParams p;
        p.max_tokens = 50;
        for (const char* id : {"a", "b"}) engine.add_request(NewRequest{id, {1, 400, 401, 402}, p, 0, ""});
        engine.step();
        QCOMPARE(recorder.steps().back().num_running, 2);
        QVERIFY(!engine.has_pending_event());
        QVERIFY(engine.abort_request("a") && engine.abort_request("b"));
        QVERIFY(!engine.has_unfinished_requests());
        QVERIFY(engine.has_pending_event());
        QVERIFY(engine.step().empty());
        QVERIFY(!engine.has_pending_event());
        const StepStats& s = recorder.steps().back();
        QCOMPARE(QString::fromStdString(s.event), QString("aborted 2 requests"));
        QCOMPARE(s.num_running, 0);
        QCOMPARE(s.num_used_blocks, 0);
    }

    // A request that finished at max_model_len but is not released yet (the server and the GUI release
    // after delivering outputs) must not make a rebuild throw.
    void finishedUnreleasedRequestDoesNotBlockRebuild() {
        EngineConfig c = test::checked_engine_config();
        c.scheduler.max_model_len = 64;
        LlmEngine engine(stories(), c);
        std::vector<int32_t> prompt{1};
        for (int i = 0; i < 40; ++i) prompt.push_back(3 + i);
        const std::string id = engine.add_request({"", prompt, greedy(100), 0, ""}).front();
        while (engine.has_unfinished_requests()) engine.step();
        QCOMPARE(engine.request_info(id)->finish_reason, FinishReason::LENGTH);
        EngineConfig next = engine.config();
        next.block_size = 32;
        engine.reconfigure(next);  // no throw
        QCOMPARE(engine.kv_cache_manager().block_size(), 32);
    }

    // --kv-cache-dtype changed while requests run: float16 doubles the blocks of the same budget (a
    // drain-and-rebuild, every request recomputed), a new name for the same type rebuilds nothing, and
    // back to float32 the requests still finish with every token and every block returned.
    void kvCacheDtypeChangeMidRun() {
        EngineConfig c = test::checked_engine_config();
        c.kv_cache_memory = 200 * 20480;  // 200 F32 blocks of 16 tokens (stories260K: 20480 bytes each)
        LlmEngine engine(stories(), c);
        QCOMPARE(engine.kv_cache_dtype(), DType::F32);
        const int f32_blocks = engine.num_blocks();
        auto prompts = mixed_prompts(11);
        prompts.resize(12);
        const auto preemptions = [&] {
            size_t n = 0;
            for (const auto& r : engine.active_requests())
                if (const auto m = engine.request_metrics(r.request_id)) n += m->preemption_times.size();
            return n;
        };
        const auto out = run_all(engine, prompts, greedy(16), [&](LlmEngine& e, int64_t step) {
            EngineConfig next = e.config();
            if (step == 2) {
                next.kv_cache_dtype = "float16";
                e.reconfigure(next);
                QCOMPARE(e.kv_cache_dtype(), DType::F16);
                QCOMPARE(e.num_blocks(), 2 * f32_blocks);
            } else if (step == 4) {
                const size_t before = preemptions();
                QVERIFY(before > 0);  // the rebuild at step 2 drained the running requests
                next.kv_cache_dtype = "fp16";
                e.reconfigure(next);
                QCOMPARE(preemptions(), before);  // nothing drained
                QCOMPARE(e.num_blocks(), 2 * f32_blocks);
            } else if (step == 6) {
                next.kv_cache_dtype = "float32";
                e.reconfigure(next);
                QCOMPARE(e.num_blocks(), f32_blocks);
            }
        });
        for (const auto& o : out) QCOMPARE(o.size(), size_t(16));
        QCOMPARE(engine.kv_cache_dtype(), DType::F32);
        expect_all_blocks_free(engine);
    }

    void seededSamplingAloneEqualsBatched() {
        SamplingParams p;
        p.temperature = 0.9f;
        p.top_p = 0.9f;
        p.top_k = 40;
        p.max_tokens = 24;
        p.seed = 1234;
        p.ignore_eos = true;
        const auto prompts = mixed_prompts(11);
        std::vector<std::vector<int32_t>> alone;
        for (int i = 0; i < 6; ++i) {
            LlmEngine e(stories(), test::checked_engine_config());
            alone.push_back(run_all(e, {prompts[i]}, p).front());
        }
        LlmEngine e(stories(), test::checked_engine_config());
        const auto batched = run_all(e, {prompts.begin(), prompts.begin() + 6}, p);
        for (int i = 0; i < 6; ++i) QCOMPARE(batched[i], alone[i]);
    }

    void invalidRequestsAreRejectedAndOthersRun() {
        LlmEngine engine(stories(), test::checked_engine_config());
        engine.add_request({"ok", {1, 300, 301}, greedy(8), 0, ""});
        engine.step();
        SamplingParams bad = greedy(0);
        QVERIFY_THROWS_EXCEPTION(BadInput, engine.add_request({"zero", {1, 2}, bad, 0, ""}));
        bad = greedy(4);
        bad.top_p = 0;
        QVERIFY_THROWS_EXCEPTION(BadInput, engine.add_request({"topp", {1, 2}, bad, 0, ""}));
        QVERIFY_THROWS_EXCEPTION(BadInput, engine.add_request({"long", std::vector<int32_t>(600, 5), greedy(4), 0, ""}));
        QVERIFY_THROWS_EXCEPTION(BadInput, engine.add_request({"vocab", {1, 9999}, greedy(4), 0, ""}));
        QVERIFY_THROWS_EXCEPTION(BadInput, engine.add_request({"ok", {1, 2}, greedy(4), 0, ""}));  // duplicate id
        while (engine.has_unfinished_requests()) engine.step();
        QCOMPARE(engine.request_output_token_ids("ok").size(), size_t(8));
        expect_all_blocks_free(engine);
    }

    void abortFreesBlocks() {
        LlmEngine engine(stories(), test::checked_engine_config());
        engine.add_request({"a", {1, 300, 301}, greedy(50), 0, ""});
        engine.add_request({"b", {1, 302, 303}, greedy(10), 0, ""});
        for (int i = 0; i < 3; ++i) engine.step();
        QVERIFY(engine.abort_request("a"));
        QVERIFY(!engine.abort_request("a"));
        while (engine.has_unfinished_requests()) engine.step();
        QCOMPARE(engine.request_info("a")->finish_reason, FinishReason::ABORT);
        QCOMPARE(engine.request_output_token_ids("b").size(), size_t(10));
        expect_all_blocks_free(engine);
    }

    // Two requests sharing a 3-block system prompt: the second reads 3 x block_size tokens from the prefix
    // cache and produces what it produces without caching; afterwards every block is free or cached-free.
    void sharedSystemPromptHitsPrefixCache_data() {
        QTest::addColumn<int>("blockSize");
        QTest::addColumn<bool>("together");
        for (int bs : {4, 16})
            for (bool together : {false, true})
                QTest::newRow(QString("bs%1-%2").arg(bs).arg(together ? "same-step" : "one-after-other").toUtf8()) << bs << together;
    }
    void sharedSystemPromptHitsPrefixCache() {
        QFETCH(int, blockSize);
        QFETCH(bool, together);
        std::vector<int32_t> system{1};
        for (int i = 1; i < 3 * blockSize; ++i) system.push_back(3 + (i * 13) % 500);
        auto with_suffix = [&](std::vector<int32_t> suffix) {
            std::vector<int32_t> p = system;
            p.insert(p.end(), suffix.begin(), suffix.end());
            return p;
        };
        const std::vector<Prompt> prompts{{with_suffix({400, 401, 402})}, {with_suffix({410, 411})}};
        std::vector<std::vector<int32_t>> uncached;
        for (const auto& p : prompts) {
            LlmEngine e(stories(), test::checked_engine_config());
            uncached.push_back(run_all(e, {p}, greedy(12)).front());
        }
        EngineConfig c = test::checked_engine_config();
        c.block_size = blockSize;
        c.scheduler.enable_prefix_caching = true;
        LlmEngine engine(stories(), c);
        std::vector<std::vector<int32_t>> out;
        if (together) {
            out = run_all(engine, prompts, greedy(12));
        } else {
            out.push_back(run_all(engine, {prompts[0]}, greedy(12)).front());
            out.push_back(run_all(engine, {prompts[1]}, greedy(12)).front());
        }
        QCOMPARE(out, uncached);
        const auto second = engine.request_metrics(together ? "req-1" : "req-1");
        QVERIFY(second.has_value());
        QCOMPARE(second->num_cached_tokens, 3 * blockSize);
        const auto& kv = engine.kv_cache_manager();
        QCOMPARE(kv.num_free_blocks(), kv.num_blocks());
        QVERIFY(kv.num_cached_free_blocks() >= 3);
    }

    void stopStringsCutText() {
        LlmEngine engine(stories(), test::checked_engine_config());
        SamplingParams p = greedy(60);
        p.ignore_eos = false;
        p.stop = {"Lily"};
        const auto ids = engine.add_request({"s", model_prompt(), p, 0, ""});
        std::string text;
        while (engine.has_unfinished_requests())
            for (const auto& o : engine.step()) text += o.text_delta;
        QCOMPARE(engine.request_info("s")->finish_reason, FinishReason::STOP);
        QCOMPARE(text, std::string(", there was a little girl named "));

        // Within min_tokens a stop string does not stop it (vLLM checks them only past min_tokens).
        p.min_tokens = 20;
        engine.add_request({"m", model_prompt(), p, 0, ""});
        std::string held;
        while (engine.has_unfinished_requests())
            for (const auto& o : engine.step()) held += o.text_delta;
        QVERIFY2(held.starts_with(", there was a little girl named Lily"), held.c_str());
        QVERIFY(engine.request_metrics("m")->num_output_tokens >= 20);
    }

    // A stop string holds back its length less one byte of text, never part of a character: each delta is
    // whole UTF-8 (a stream serialises them one by one; half a "\u201c" became U+FFFD there).
    void stopStringHoldbackKeepsCharactersWhole() {
        LlmEngine engine(stories(), test::checked_engine_config());
        SamplingParams p = greedy(4);
        p.stop = {"zz"};
        const std::string quote = "\xe2\x80\x9c";
        const int32_t token = 465;  // stories260K's piece for the quote (3 bytes)
        QCOMPARE(stories()->tokenizer.decode(std::vector<int32_t>{token, token}), quote + quote);
        p.logit_bias = {{token, 100.0f}};  // every token the quote
        engine.add_request({"q", model_prompt(), p, 0, ""});
        std::string text;
        while (engine.has_unfinished_requests())
            for (const auto& o : engine.step()) {
                QVERIFY2(utf8_is_valid(o.text_delta), o.text_delta.c_str());
                text += o.text_delta;
            }
        QCOMPARE(text, quote + quote + quote + quote);
    }

private:
    static std::vector<int32_t> model_prompt() { return stories()->tokenizer.encode("Once upon a time", true); }
};

QTEST_GUILESS_MAIN(TestEngineBatching)
#include "test_engine_batching.moc"
