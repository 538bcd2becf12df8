// The engine on sliding-window models (random weights, real formats): a Mistral-style config.json
// windows every layer, and the blocks its requests leave behind go back to the pool while they run.
// Freeing must not change a single token (greedy, against freeing off), even when freed blocks are
// reused at once by other requests in a tight pool with preemption; a long decode holds a window's worth
// of blocks and runs in a pool far smaller than its length; nothing leaks after finish, abort or
// preemption; a prefix hit needs only the blocks inside the window; a Gemma-like mixed model frees
// nothing and its snapshot marks the left-behind blocks.
// Every engine checks the scheduler and pool invariants after every step.
#include "engine_fixtures.h"
#include "test_support.h"

#include "llm_engine.h"
#include "random_model.h"
#include "prefill_logits.h"
#include "util/errors.h"

#include <QTemporaryDir>

#include <random>

using namespace kvscope;
using test::greedy;

namespace {

constexpr int kWindow = 16;
constexpr int kBlockSize = 4;

std::string write_mistral(const QTemporaryDir& dir, const char* name, const nlohmann::json& sliding_window) {
    const std::string path = dir.filePath(name).toStdString();
    test::write_random_mistral(path, sliding_window);
    return path;
}

std::shared_ptr<const Model> mistral() {
    static QTemporaryDir dir;
    static std::shared_ptr<const Model> m = load_model(write_mistral(dir, "mistral", kWindow));
    return m;
}

EngineConfig config(int num_blocks, bool free_outside_window) {
    EngineConfig c = test::checked_engine_config();
    c.scheduler.max_num_batched_tokens = 64;
    c.block_size = kBlockSize;
    c.num_blocks = num_blocks;
    c.free_outside_window = free_outside_window;
    return c;
}

// 8 prompts of 3..45 random tokens.
std::vector<std::vector<int32_t>> prompts() {
    std::mt19937_64 rng(7);
    std::vector<std::vector<int32_t>> out;
    for (int i = 0; i < 8; ++i) {
        std::vector<int32_t> p{1};
        const int len = 3 + static_cast<int>(rng() % 43);
        while (static_cast<int>(p.size()) < len) p.push_back(3 + static_cast<int32_t>(rng() % 500));
        out.push_back(p);
    }
    return out;
}

struct Run {
    std::vector<std::vector<int32_t>> outputs;
    int64_t num_preemptions = 0;
    int64_t num_steps = 0;
    int max_blocks_held = 0;
    bool free_count_rose_while_running = false;  // a step ended with more free blocks, nothing finished
};

Run run(const EngineConfig& c, const std::vector<std::vector<int32_t>>& ps, int max_tokens,
        const std::function<void(LlmEngine&, int64_t)>& on_step = {}) {
    LlmEngine engine(mistral(), c);
    std::vector<std::string> ids;
    for (const auto& p : ps) ids.push_back(engine.add_request({"", p, greedy(max_tokens), 0, ""}).front());
    Run r;
    int64_t step = 0;
    while (engine.has_unfinished_requests()) {
        const int free_before = engine.kv_cache_manager().num_free_blocks();
        bool finished = false;
        for (const RequestOutput& o : engine.step()) finished |= o.finished;
        const int free_after = engine.kv_cache_manager().num_free_blocks();
        if (!finished && engine.has_unfinished_requests() && free_after > free_before) r.free_count_rose_while_running = true;
        r.max_blocks_held = std::max(r.max_blocks_held, engine.num_blocks() - free_after);
        if (on_step) on_step(engine, step);
        if (++step > 100000) qFatal("engine does not finish");
    }
    for (const auto& id : ids) r.outputs.push_back(engine.request_output_token_ids(id));
    r.num_preemptions = engine.scheduler().num_preemptions();
    r.num_steps = step;
    if (engine.kv_cache_manager().num_free_blocks() != engine.num_blocks()) qFatal("blocks leaked");
    return r;
}

int num_null(const std::vector<int32_t>& table) {
    return static_cast<int>(std::count(table.begin(), table.end(), KvCacheManager::kNullBlockId));
}

}  // namespace

class TestSlidingWindowEngine : public QObject {
    Q_OBJECT
private slots:
    void mistralConfig() {
        const ModelConfig& c = mistral()->config;
        QCOMPARE(c.architecture, std::string("llama"));
        QCOMPARE(c.sliding_window, kWindow);
        QVERIFY(c.all_layers_windowed());
        for (int l = 0; l < c.num_layers; ++l) QCOMPARE(c.layer_window(l), kWindow);
        QTemporaryDir dir;
        auto global = load_model(write_mistral(dir, "v03", nullptr));
        QCOMPARE(global->config.sliding_window, 0);
        QVERIFY(!global->config.all_layers_windowed());
        QCOMPARE(global->config.layer_window(0), 0);
        // The window is applied: past 16 positions the logits differ from the same weights attending
        // to everything.
        std::vector<int32_t> seq{1};
        for (int i = 0; i < 40; ++i) seq.push_back(3 + (i * 37) % 500);
        const auto windowed = test::prefill_logits(*mistral(), seq, 0);
        const auto full = test::prefill_logits(*global, seq, 0);
        const size_t vocab = static_cast<size_t>(c.vocab_size);
        QCOMPARE(std::vector<float>(windowed.begin(), windowed.begin() + kWindow * vocab),
                 std::vector<float>(full.begin(), full.begin() + kWindow * vocab));
        QVERIFY(std::vector<float>(windowed.end() - vocab, windowed.end()) != std::vector<float>(full.end() - vocab, full.end()));
        // Mistral-7B-v0.1's shape and window; its model card's 7.24B parameters.
        const ModelConfig v01 = dummy_preset_config("mistral-7b-v0.1");
        QCOMPARE(v01.num_params(), int64_t(7241732096));
        QCOMPARE(v01.sliding_window, 4096);
        QVERIFY(v01.all_layers_windowed());
        QVERIFY(!dummy_preset_config("mistral-7b").all_layers_windowed());
        QVERIFY(!dummy_preset_config("gemma2-2b").all_layers_windowed());  // mixed
        QTemporaryDir bad;
        const std::string neg = write_mistral(bad, "neg", -3);
        QVERIFY_THROWS_EXCEPTION(BadInput, load_model(neg));
    }

    // Freeing on and off give the same tokens: in a roomy pool, and in a tight one where freed blocks are
    // taken by other requests at once and requests are preempted and recomputed. A freed block still
    // inside a window would be read after another request overwrote it, and change tokens.
    void freeingChangesNoToken() {
        const auto ps = prompts();
        const Run kept = run(config(400, false), ps, 48);
        const Run roomy = run(config(400, true), ps, 48);
        const Run tight = run(config(24, true), ps, 48);
        const Run tight_kept = run(config(24, false), ps, 48);
        qInfo("pool of 400 blocks: at most %d blocks held without freeing, %d with", kept.max_blocks_held,
              roomy.max_blocks_held);
        qInfo("pool of 24 blocks: %lld preemptions and %lld steps without freeing, %lld and %lld with",
              static_cast<long long>(tight_kept.num_preemptions), static_cast<long long>(tight_kept.num_steps),
              static_cast<long long>(tight.num_preemptions), static_cast<long long>(tight.num_steps));
        QCOMPARE(roomy.outputs, kept.outputs);
        QCOMPARE(tight.outputs, kept.outputs);
        QCOMPARE(tight_kept.outputs, kept.outputs);
        QVERIFY(tight.num_preemptions < tight_kept.num_preemptions);
        for (const auto& o : kept.outputs) QCOMPARE(static_cast<int>(o.size()), 48);
        QVERIFY(roomy.max_blocks_held < kept.max_blocks_held);
        QVERIFY(tight.num_preemptions > 0);  // the tight pool really reused and recomputed
        QVERIFY(!kept.free_count_rose_while_running);
        QVERIFY(roomy.free_count_rose_while_running);
    }

    // One request of 20 + 200 tokens in a pool of 12 blocks (48 tokens): admitted because a windowed
    // step reads at most window - 1 + 16 tokens back (max_num_batched_tokens 16), it decodes holding at
    // most ceil(16 / 4) + 1 blocks, and its tokens match a roomy run without freeing. Without freeing the
    // same pool refuses it.
    void longDecodeInASmallPool() {
        std::vector<int32_t> prompt{1};
        for (int i = 0; i < 19; ++i) prompt.push_back(10 + i);
        EngineConfig small = config(12, true);
        small.scheduler.max_num_batched_tokens = 16;
        int most_held_in_decode = 0;
        const Run windowed = run(small, {prompt}, 200, [&](LlmEngine& e, int64_t) {
            const auto info = e.active_requests();
            if (info.empty() || info[0].num_computed_tokens < 24) return;
            const auto& t = info[0].block_table;
            most_held_in_decode = std::max(most_held_in_decode, static_cast<int>(t.size()) - num_null(t));
        });
        QCOMPARE(most_held_in_decode, kWindow / kBlockSize + 1);
        QVERIFY(windowed.free_count_rose_while_running);
        const Run kept = run(config(400, false), {prompt}, 200);
        QCOMPARE(windowed.outputs, kept.outputs);
        EngineConfig refused = small;
        refused.free_outside_window = false;
        LlmEngine engine(mistral(), refused);
        QVERIFY_THROWS_EXCEPTION(BadInput, engine.add_request({"", prompt, greedy(200), 0, ""}));
    }

    // A prefix hit needs only the blocks inside the window of the query after it (searched from the
    // right, as vLLM does): A leaves its 40-token prompt cached, a filler evicts A's blocks 1-5, and B
    // (A's prompt and 4 more tokens) still hits all 40 tokens through blocks 6-9, where a search from
    // the left would stop at the miss after block 0. B's tokens equal those of a run without caching.
    void prefixHitInsideTheWindow() {
        std::vector<int32_t> prompt_a{1}, filler{1};
        for (int i = 0; i < 39; ++i) prompt_a.push_back(10 + i);
        for (int i = 0; i < 35; ++i) filler.push_back(300 + i);
        std::vector<int32_t> prompt_b = prompt_a;
        for (int i = 0; i < 4; ++i) prompt_b.push_back(200 + i);
        EngineConfig c = config(16, true);
        c.scheduler.enable_prefix_caching = true;
        LlmEngine engine(mistral(), c);
        auto finish = [&](const std::vector<int32_t>& prompt, int max_tokens) {
            const std::string id = engine.add_request({"", prompt, greedy(max_tokens), 0, ""}).front();
            while (engine.has_unfinished_requests()) engine.step();
            return id;
        };
        finish(prompt_a, 8);  // frees blocks 0-5, then 6, behind its window while it runs, 7-11 at the end
        finish(filler, 1);    // 9 blocks: the 4 never used, then A's 5, 4, 3, 2, 1 (freed tail first)
        const std::string b = finish(prompt_b, 12);
        QCOMPARE(engine.request_metrics(b)->num_cached_tokens, 40);
        QCOMPARE(engine.request_output_token_ids(b), run(config(400, true), {prompt_b}, 12).outputs.front());
        QCOMPARE(engine.kv_cache_manager().num_free_blocks(), 16);
    }

    // Aborted mid-decode (its table already has null entries) and preempted requests give back every
    // block they hold; the rest finish with all blocks free.
    void abortAndPreemptionLeakNothing() {
        const auto ps = prompts();
        bool aborted = false;
        const Run r = run(config(24, true), ps, 48, [&](LlmEngine& e, int64_t) {
            if (aborted) return;
            for (const RequestInfo& info : e.active_requests()) {
                if (num_null(info.block_table) == 0) continue;
                const int free_before = e.kv_cache_manager().num_free_blocks();
                const int held = static_cast<int>(info.block_table.size()) - num_null(info.block_table);
                QVERIFY(e.abort_request(info.request_id));
                QVERIFY(e.kv_cache_manager().num_free_blocks() >= free_before + 1);
                QVERIFY(e.kv_cache_manager().num_free_blocks() <= free_before + held);
                QCOMPARE(QString::fromStdString(e.kv_cache_manager().check_invariants()), QString());
                aborted = true;
                return;
            }
        });
        QVERIFY(aborted);
        QVERIFY(r.num_preemptions > 0);
        // run() checked that every block is free at the end.
    }

    // A Gemma 2 shape (layer 0 windowed, layer 1 global): nothing is freed, and the snapshot marks the
    // in-use blocks behind the window of the request's next query; a Mistral run without freeing marks
    // them too, with freeing they are free instead.
    void snapshotMarksLeftBehindBlocks() {
        QTemporaryDir dir;
        const test::RandomModelShape s = test::gemma_shape("gemma2");
        test::write_random_hf(dir.filePath("g").toStdString(), s, 3);
        const std::shared_ptr<const Model> gemma = load_model(dir.filePath("g").toStdString());
        QVERIFY(!gemma->config.all_layers_windowed());
        std::vector<int32_t> prompt{1};
        for (int i = 0; i < 39; ++i) prompt.push_back(20 + i);
        struct Case {
            std::shared_ptr<const Model> model;
            bool free;
        };
        for (const Case& k : {Case{gemma, true}, Case{mistral(), false}, Case{mistral(), true}}) {
            LlmEngine engine(k.model, config(100, k.free));
            const std::string id = engine.add_request({"", prompt, greedy(10), 0, ""}).front();
            for (int i = 0; i < 5; ++i) engine.step();
            const RequestInfo info = *engine.request_info(id);
            const KvCacheSnapshot snap = engine.kv_cache_manager().snapshot();
            const int behind = (info.num_computed_tokens + 1 - s.sliding_window) / kBlockSize;  // 44 computed: 7
            QCOMPARE(behind, 7);
            const bool freed = k.free && k.model == mistral();
            QCOMPARE(snap.frees_outside_window, freed);
            QCOMPARE(num_null(info.block_table), freed ? behind : 0);
            QCOMPARE(snap.num_outside_window_blocks, freed ? 0 : behind);
            for (int b = 0; b < static_cast<int>(info.block_table.size()); ++b) {
                const int32_t id_b = info.block_table[static_cast<size_t>(b)];
                if (id_b == KvCacheManager::kNullBlockId) continue;
                QVERIFY(snap.state[static_cast<size_t>(id_b)] == KvBlockState::IN_USE);
                QCOMPARE(snap.outside_window[static_cast<size_t>(id_b)] != 0, b < behind);
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestSlidingWindowEngine)
#include "test_sliding_window_engine.moc"
