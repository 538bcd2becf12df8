// KvCacheManager, the scheduler's door to KV memory: prefix hits shared between requests, the
// recomputed last token, all-or-nothing allocation, tail-first freeing, waste, snapshots and reset.
#include "test_support.h"

#include "kv/kv_cache_manager.h"

#include <QElapsedTimer>

#include <numeric>
#include <stdexcept>
#include <vector>

using namespace kvscope;

namespace {

Request make_request(const std::string& id, std::vector<int32_t> tokens) {
    Request r;
    r.request_id = id;
    r.num_prompt_tokens = int(tokens.size());
    r.all_token_ids = std::move(tokens);
    return r;
}

std::vector<int32_t> iota_tokens(int n, int32_t first) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), first);
    return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// What the scheduler does for a waiting request that fits in one step: hits, then the whole rest.
ComputedBlocks admit(KvCacheManager& kv, Request& r) {
    ComputedBlocks hits = kv.get_computed_blocks(r);
    if (!kv.allocate_slots(r, r.num_tokens() - hits.num_computed_tokens, hits)) qFatal("admit: no room");
    r.num_computed_tokens = r.num_tokens();
    return hits;
}

// One decode step: the sampled token joins the request, and its slot is allocated.
bool decode(KvCacheManager& kv, Request& r, int32_t token) {
    r.all_token_ids.push_back(token);
    if (!kv.allocate_slots(r, 1)) return false;
    r.num_computed_tokens += 1;
    return true;
}

#define CHECK_INVARIANTS(kv) QCOMPARE(QString::fromStdString((kv).check_invariants()), QString())

}  // namespace

class TestKvCacheManager : public QObject {
    Q_OBJECT
private slots:
    void sharedPrefix_data() {
        QTest::addColumn<int>("block_size");
        QTest::newRow("block_size 4") << 4;
        QTest::newRow("block_size 16") << 16;
    }
    void sharedPrefix() {
        QFETCH(int, block_size);
        KvCacheManager kv(32, block_size, true);
        const std::vector<int32_t> prefix = iota_tokens(3 * block_size, 100);
        Request a = make_request("a", concat(prefix, {1, 2}));
        Request b = make_request("b", concat(prefix, iota_tokens(block_size + 3, 500)));
        QCOMPARE(admit(kv, a).num_computed_tokens, 0);
        ComputedBlocks hits = admit(kv, b);
        QCOMPARE(hits.num_computed_tokens, 3 * block_size);
        const auto& ta = kv.block_table("a");
        const auto& tb = kv.block_table("b");
        QCOMPARE(ta.size(), size_t(4));
        QCOMPARE(tb.size(), size_t(5));
        for (int i = 0; i < 3; ++i) {
            QCOMPARE(tb[size_t(i)], ta[size_t(i)]);
            QCOMPARE(kv.block_pool().block(ta[size_t(i)]).ref_cnt, 2);
        }
        QVERIFY(tb[3] != ta[3]);
        QCOMPARE(kv.num_free_blocks(), 32 - 6);
        PrefixCacheStats s = kv.prefix_cache_stats();
        QCOMPARE(s.num_requests, int64_t(2));
        QCOMPARE(s.num_query_tokens, int64_t(a.num_tokens() + b.num_tokens()));
        QCOMPARE(s.num_hit_tokens, int64_t(3 * block_size));
        QCOMPARE(s.num_hit_blocks, int64_t(3));
        CHECK_INVARIANTS(kv);
    }

    void lastTokenIsRecomputed_data() {
        QTest::addColumn<int>("prompt_blocks_extra");  // prompt = 2 full blocks + this many tokens
        QTest::addColumn<int>("expected_hit_blocks");
        QTest::newRow("exactly 2 full blocks: drop the last hit") << 0 << 1;
        QTest::newRow("2 blocks + 1 token: both hit") << 1 << 2;
    }
    void lastTokenIsRecomputed() {
        QFETCH(int, prompt_blocks_extra);
        QFETCH(int, expected_hit_blocks);
        const int bs = 4;
        KvCacheManager kv(16, bs, true);
        const std::vector<int32_t> prompt = iota_tokens(2 * bs + prompt_blocks_extra, 7);
        Request first = make_request("first", prompt);
        admit(kv, first);
        kv.free(first);
        Request again = make_request("again", prompt);
        ComputedBlocks hits = kv.get_computed_blocks(again);
        QCOMPARE(int(hits.block_ids.size()), expected_hit_blocks);
        QCOMPARE(hits.num_computed_tokens, expected_hit_blocks * bs);
        QVERIFY(hits.num_computed_tokens < again.num_tokens());
        QVERIFY(kv.allocate_slots(again, again.num_tokens() - hits.num_computed_tokens, hits));
        QCOMPARE(kv.block_table("again").size(), size_t(prompt_blocks_extra ? 3 : 2));
        CHECK_INVARIANTS(kv);
    }

    void allocateFailsWithoutSideEffects() {
        const int bs = 4;
        KvCacheManager kv(5, bs, true);
        Request a = make_request("a", iota_tokens(12, 0));  // 3 blocks, all cached
        admit(kv, a);
        kv.free(a);
        Request hog = make_request("hog", iota_tokens(4, 900));
        admit(kv, hog);  // takes a never-used block first (LRU)
        // b hits a's 2 first blocks; those hits sit in the free queue, so they count as used.
        Request b = make_request("b", concat(iota_tokens(8, 0), iota_tokens(9, 300)));
        ComputedBlocks hits = kv.get_computed_blocks(b);
        QCOMPARE(int(hits.block_ids.size()), 2);
        QCOMPARE(kv.num_blocks_needed(b, b.num_tokens() - 8, hits), 3);
        QVERIFY(!kv.can_fit(b, b.num_tokens() - 8, hits));  // 2 hits + 3 new > 4 free
        const KvCacheSnapshot before = kv.snapshot();
        QVERIFY(!kv.allocate_slots(b, b.num_tokens() - 8, hits));
        const KvCacheSnapshot after = kv.snapshot();
        QVERIFY(kv.block_table("b").empty());
        QCOMPARE(after.num_free_blocks, before.num_free_blocks);
        QVERIFY(after.ref_cnt == before.ref_cnt);
        QVERIFY(after.eviction_order == before.eviction_order);
        QVERIFY(after.block_hash == before.block_hash);
        QCOMPARE(after.prefix_cache_stats.num_evictions, before.prefix_cache_stats.num_evictions);
        // A smaller step (chunked prefill) fits: 2 hits + 2 new blocks.
        QVERIFY(kv.can_fit(b, 5, hits));
        QVERIFY(kv.allocate_slots(b, 5, hits));
        QCOMPARE(kv.num_free_blocks(), 0);
        CHECK_INVARIANTS(kv);
    }

    void freeReleasesTailFirst() {
        const int bs = 2;
        KvCacheManager kv(6, bs, true);
        Request a = make_request("a", iota_tokens(6, 0));  // blocks 0, 1, 2, all full and cached
        admit(kv, a);
        QCOMPARE(kv.block_table("a"), (std::vector<int32_t>{0, 1, 2}));
        kv.free(a);
        QVERIFY(kv.block_table("a").empty());
        std::vector<int> order;
        for (const KvCacheBlock* b : kv.block_pool().free_block_queue().get_all_free_blocks()) order.push_back(b->block_id);
        QCOMPARE(order, (std::vector<int>{3, 4, 5, 2, 1, 0}));
        Request c = make_request("c", iota_tokens(8, 50));  // 4 blocks: 3, 4, 5, then a's tail (evicted)
        admit(kv, c);
        QCOMPARE(kv.block_table("c"), (std::vector<int32_t>{3, 4, 5, 2}));
        QCOMPARE(kv.prefix_cache_stats().num_evictions, int64_t(1));
        Request again = make_request("again", iota_tokens(6, 0));  // a's head blocks survived
        QCOMPARE(kv.get_computed_blocks(again).block_ids, (std::vector<int32_t>{0, 1}));
        CHECK_INVARIANTS(kv);
    }

    void wasteForKnownLayout() {
        const int bs = 4;
        KvCacheManager kv(16, bs, true);
        QCOMPARE(kv.kv_waste(), 0.0);
        Request a = make_request("a", iota_tokens(9, 0));  // blocks 4 + 4 + 1
        admit(kv, a);
        QCOMPARE(kv.num_reserved_slots(), int64_t(12));
        QCOMPARE(kv.num_filled_slots(), int64_t(9));
        Request b = make_request("b", concat(iota_tokens(8, 0), {70, 71, 72}));  // shares 2 blocks
        admit(kv, b);
        // Shared prefix blocks count once: blocks {a0, a1, a2 (1 token), b2 (3 tokens)}.
        QCOMPARE(kv.num_reserved_slots(), int64_t(16));
        QCOMPARE(kv.num_filled_slots(), int64_t(12));
        QCOMPARE(kv.kv_waste(), 0.25);
        QVERIFY(decode(kv, a, 9));
        QCOMPARE(kv.num_filled_slots(), int64_t(13));
        QCOMPARE(kv.kv_waste(), 3.0 / 16.0);
        kv.free(a);
        kv.free(b);
        QCOMPARE(kv.num_reserved_slots(), int64_t(0));
        QCOMPARE(kv.kv_waste(), 0.0);
        CHECK_INVARIANTS(kv);
    }

    void lookaheadReservesWithoutFilling() {
        const int bs = 4;
        KvCacheManager kv(8, bs, true);
        Request r = make_request("r", iota_tokens(6, 0));
        QCOMPARE(kv.num_blocks_needed(r, 0, {}, 10), 3);
        QVERIFY(!kv.can_fit(r, 0, {}, 33));  // 9 blocks > 8
        QVERIFY(kv.allocate_slots(r, 0, {}, 10));  // the naive baseline's up-front reservation
        QCOMPARE(kv.block_table("r").size(), size_t(3));
        QCOMPARE(kv.num_filled_slots(), int64_t(0));
        QCOMPARE(kv.kv_waste(), 1.0);
        QVERIFY(kv.block_pool().cached_blocks().empty());  // nothing computed: nothing cached
        QVERIFY(kv.allocate_slots(r, 6));  // fits in the reservation: no new blocks
        r.num_computed_tokens = 6;
        QCOMPARE(kv.block_table("r").size(), size_t(3));
        QCOMPARE(kv.num_filled_slots(), int64_t(6));
        QCOMPARE(kv.block_pool().cached_blocks().size(), size_t(1));
        CHECK_INVARIANTS(kv);
    }

    void snapshotAgreesWithPool() {
        const int bs = 4;
        KvCacheManager kv(10, bs, true);
        Request a = make_request("a", iota_tokens(9, 0));
        Request b = make_request("b", concat(iota_tokens(8, 0), {70, 71}));
        Request gone = make_request("gone", iota_tokens(4, 600));
        admit(kv, gone);
        admit(kv, a);
        admit(kv, b);
        kv.free(gone);
        const KvCacheSnapshot s = kv.snapshot();
        QCOMPARE(s.num_blocks, 10);
        QCOMPARE(s.block_size, bs);
        QCOMPARE(s.request_ids, (std::vector<std::string>{"a", "b"}));
        int free_seen = 0;
        for (int id = 0; id < s.num_blocks; ++id) {
            const KvCacheBlock& blk = kv.block_pool().block(id);
            QCOMPARE(s.ref_cnt[size_t(id)], blk.ref_cnt);
            QCOMPARE(s.block_hash[size_t(id)], blk.block_hash);
            QCOMPARE(int(s.owner_indices(id).size()), blk.ref_cnt);
            QCOMPARE(s.eviction_order[size_t(id)] >= 0, blk.is_in_free_queue());
            free_seen += blk.is_in_free_queue();
        }
        QCOMPARE(free_seen, s.num_free_blocks);
        const auto& ta = kv.block_table("a");
        const auto& tb = kv.block_table("b");
        QCOMPARE(s.owner_ids(ta[0]), (std::vector<std::string>{"a", "b"}));
        QCOMPARE(s.owner_ids(ta[2]), (std::vector<std::string>{"a"}));
        QCOMPARE(s.tokens_filled[size_t(ta[2])], 1);
        QCOMPARE(s.tokens_filled[size_t(tb[2])], 2);
        QCOMPARE(s.tokens_filled[size_t(ta[0])], bs);
        QVERIFY(s.state[size_t(ta[0])] == KvBlockState::IN_USE);
        const int gone_block = 0;  // admitted first
        QVERIFY(s.state[size_t(gone_block)] == KvBlockState::CACHED_FREE);
        QCOMPARE(s.tokens_filled[size_t(gone_block)], bs);
        QCOMPARE(s.owner_ids(gone_block).size(), size_t(0));
        // Blocks never used are evicted before the freed cached one (it went to the tail).
        QCOMPARE(s.eviction_order[size_t(gone_block)], s.num_free_blocks - 1);
        QCOMPARE(s.num_in_use_blocks, 4);
        QCOMPARE(s.num_cached_free_blocks, 1);
        QCOMPARE(s.num_reserved_slots, kv.num_reserved_slots());
        QCOMPARE(s.num_filled_slots, kv.num_filled_slots());
        QCOMPARE(s.kv_waste, kv.kv_waste());
        QCOMPARE(s.usage, kv.usage());
        QCOMPARE(s.num_cached_free_blocks, kv.num_cached_free_blocks());
    }

    void snapshotOf100kBlocksIsCheap() {
        const int bs = 16, n = 100000;
        KvCacheManager kv(n, bs, true);
        std::vector<Request> reqs;
        for (int i = 0; i < 200; ++i) reqs.push_back(make_request("r" + std::to_string(i), iota_tokens(bs * 300 + 5, (i % 4) * 100000)));
        for (Request& r : reqs) admit(kv, r);
        for (int i = 0; i < 100; ++i) kv.free(reqs[size_t(i)]);
        double ms = 1e9;  // best of a few: other processes share the cores
        for (int i = 0; i < 10; ++i) {
            QElapsedTimer timer;
            timer.start();
            QCOMPARE(kv.snapshot().num_blocks, n);
            ms = std::min(ms, double(timer.nsecsElapsed()) / 1e6);
        }
        KvCacheSnapshot reused;
        double reused_ms = 1e9;
        for (int i = 0; i < 10; ++i) {
            QElapsedTimer timer;
            timer.start();
            kv.snapshot_into(reused);
            reused_ms = std::min(reused_ms, double(timer.nsecsElapsed()) / 1e6);
        }
        QVERIFY(reused.ref_cnt == kv.snapshot().ref_cnt);
        // Figures for the notes, not assertions (shared machines, sanitizer builds): a fresh snapshot's
        // cost is mostly first-touch page faults on its ~3 MB; the per-frame path refreshes a reused one.
        qInfo("snapshot of %d blocks: %.2f ms fresh, %.2f ms into a reused snapshot", n, ms, reused_ms);

        CHECK_INVARIANTS(kv);
    }

    void cachingOff() {
        KvCacheManager kv(8, 4, false);
        Request a = make_request("a", iota_tokens(8, 0));
        admit(kv, a);
        kv.free(a);
        Request b = make_request("b", iota_tokens(8, 0));
        ComputedBlocks hits = kv.get_computed_blocks(b);
        QVERIFY(hits.block_ids.empty());
        QCOMPARE(hits.num_computed_tokens, 0);
        QVERIFY(b.block_hashes.empty());  // nothing hashed when caching is off
        QVERIFY(kv.block_pool().cached_blocks().empty());
        QCOMPARE(kv.prefix_cache_stats().num_requests, int64_t(0));
        QCOMPARE(kv.snapshot().num_cached_free_blocks, 0);
        CHECK_INVARIANTS(kv);
    }

    void decodeFillsThenTakesANewBlock() {
        KvCacheManager kv(4, 4, true);
        Request a = make_request("a", iota_tokens(3, 0));
        admit(kv, a);
        QCOMPARE(kv.block_table("a").size(), size_t(1));
        QVERIFY(decode(kv, a, 3));  // 4th slot of block 0: now full and cached
        QCOMPARE(kv.block_table("a").size(), size_t(1));
        QCOMPARE(kv.block_pool().cached_blocks().size(), size_t(1));
        QVERIFY(decode(kv, a, 4));
        QCOMPARE(kv.block_table("a").size(), size_t(2));
        CHECK_INVARIANTS(kv);
    }

    void staleHitsAreRejected() {
        KvCacheManager kv(3, 2, true);
        Request a = make_request("a", iota_tokens(4, 0));
        admit(kv, a);
        kv.free(a);  // queue: 2, 1, 0 (block 0 holds a's first block)
        Request b = make_request("b", iota_tokens(5, 0));
        ComputedBlocks hits = kv.get_computed_blocks(b);
        QCOMPARE(hits.block_ids.size(), size_t(2));
        Request other = make_request("other", iota_tokens(6, 40));
        admit(kv, other);  // evicts everything, including b's hits
        QVERIFY_THROWS_EXCEPTION(std::logic_error, kv.allocate_slots(b, 1, hits));
    }

    void reset() {
        KvCacheManager kv(8, 4, true);
        Request a = make_request("a", iota_tokens(9, 0));
        admit(kv, a);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, kv.reset(16, 8));
        QVERIFY(!kv.reset_prefix_cache());
        kv.free(a);
        const PrefixCacheStats before = kv.prefix_cache_stats();
        kv.reset(16, 8);
        QCOMPARE(kv.num_blocks(), 16);
        QCOMPARE(kv.block_size(), 8);
        QCOMPARE(kv.num_free_blocks(), 16);
        QVERIFY(kv.block_pool().cached_blocks().empty());
        QCOMPARE(kv.prefix_cache_stats().num_requests, before.num_requests);  // cumulative
        // a's hashes were for block size 4: they are recomputed for 8 on re-admission.
        a.num_computed_tokens = 0;
        QCOMPARE(kv.get_computed_blocks(a).num_computed_tokens, 0);
        QCOMPARE(a.block_hashes.size(), size_t(1));
        QVERIFY(kv.allocate_slots(a, a.num_tokens()));
        QCOMPARE(kv.block_table("a").size(), size_t(2));
        CHECK_INVARIANTS(kv);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, kv.reset(0, 8));
    }
};

QTEST_GUILESS_MAIN(TestKvCacheManager)
#include "test_kv_cache_manager.moc"
