// KvCacheManager under a sliding window: where every layer is windowed, the blocks a request has left
// behind go back to the pool (null table entries, the table keeps its length), cached ones stay
// findable, a long decode holds at most ceil(window / block_size) + 1 blocks; where some layers are
// global (Gemma) nothing is freed and the snapshot only marks those blocks.
#include "test_support.h"

#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <numeric>
#include <vector>

using namespace kvscope;

namespace {

constexpr int32_t kNull = KvCacheManager::kNullBlockId;

Request make_request(const std::string& id, int n, int32_t first) {
    Request r;
    r.request_id = id;
    r.all_token_ids.resize(size_t(n));
    std::iota(r.all_token_ids.begin(), r.all_token_ids.end(), first);
    r.num_prompt_tokens = n;
    return r;
}

// The whole prompt in one step, after any prefix hits.
void admit(KvCacheManager& kv, Request& r) {
    ComputedBlocks hits = kv.get_computed_blocks(r);
    if (!kv.allocate_slots(r, r.num_tokens() - hits.num_computed_tokens, hits)) qFatal("admit: no room");
    r.num_computed_tokens = r.num_tokens();
}

bool decode(KvCacheManager& kv, Request& r) {
    r.all_token_ids.push_back(1000 + r.num_tokens());
    if (!kv.allocate_slots(r, 1)) return false;
    r.num_computed_tokens += 1;
    return true;
}

int num_held(const std::vector<int32_t>& table) {
    int n = 0;
    for (int32_t id : table) n += id != kNull;
    return n;
}

#define CHECK_INVARIANTS(kv) QCOMPARE(QString::fromStdString((kv).check_invariants()), QString())

}  // namespace

class TestSlidingWindowKv : public QObject {
    Q_OBJECT
private slots:
    // Window 8 over blocks of 4: the query at position p reads keys from p - 7 on, so block i is dead
    // once (i + 1) * 4 <= p - 7, i.e. at an allocation with num_computed_tokens C, blocks
    // [0, (C - 7) / 4) are freed. Exact tables at the edges, then a long decode in a pool of 8 blocks
    // (32 tokens) runs 120 tokens holding at most 3 blocks; without freeing it runs out at 32.
    void decodeFreesBehindWindow() {
        KvCacheManager kv(8, 4, /*enable_caching=*/true);
        kv.set_sliding_window(8, /*free_outside_window=*/true);
        QCOMPARE(kv.num_skipped_blocks(10), 0);
        QCOMPARE(kv.num_skipped_blocks(11), 1);
        QCOMPARE(kv.num_skipped_blocks(14), 1);
        QCOMPARE(kv.num_skipped_blocks(15), 2);
        Request r = make_request("r", 10, 0);
        admit(kv, r);  // positions 0..9: blocks 0, 1, 2
        QCOMPARE(num_held(kv.block_table("r")), 3);
        QVERIFY(decode(kv, r));  // C = 10: the query at 10 reads from 3 (block 0)
        QCOMPARE(kv.block_table("r")[0] == kNull, false);
        QVERIFY(decode(kv, r));  // C = 11: reads from 4: block 0 freed
        QCOMPARE(kv.block_table("r").size(), size_t(3));
        QCOMPARE(kv.block_table("r")[0], kNull);
        QCOMPARE(kv.num_free_blocks(), 8 - 2);
        CHECK_INVARIANTS(kv);
        int most_held = 0;
        for (int i = 0; i < 110; ++i) {
            QVERIFY2(decode(kv, r), qPrintable(QString("decode %1 found no block").arg(i)));
            CHECK_INVARIANTS(kv);
            const auto& t = kv.block_table("r");
            QCOMPARE(int(t.size()), (r.num_computed_tokens + 3) / 4);  // every position keeps its entry
            const int skipped = kv.num_skipped_blocks(r.num_computed_tokens - 1);
            for (int b = 0; b < int(t.size()); ++b) QCOMPARE(t[size_t(b)] == kNull, b < skipped);
            most_held = std::max(most_held, num_held(t));
        }
        QCOMPARE(most_held, 3);  // ceil(8 / 4) + 1
        kv.free(r);
        QCOMPARE(kv.num_free_blocks(), 8);
        CHECK_INVARIANTS(kv);

        // Mixed model: the same decode keeps every block and runs out of the pool.
        KvCacheManager mixed(8, 4, true);
        mixed.set_sliding_window(8, false);
        Request m = make_request("m", 10, 0);
        admit(mixed, m);
        int decoded = 0;
        while (decode(mixed, m)) ++decoded;
        QCOMPARE(decoded, 32 - 10);
        QCOMPARE(num_held(mixed.block_table("m")), 8);
        CHECK_INVARIANTS(mixed);
    }

    // A chunk of n tokens needs keys from C + 1 - window to C + n - 1: the admission figure.
    void chunkKeepsItsWholeWindow() {
        KvCacheManager kv(64, 4, false);
        kv.set_sliding_window(8, true);
        Request r = make_request("r", 60, 0);
        QVERIFY(kv.allocate_slots(r, 20));
        r.num_computed_tokens = 20;
        QVERIFY(kv.allocate_slots(r, 20));  // queries 20..39, the first reads from 13 (block 3)
        const auto& t = kv.block_table("r");
        QCOMPARE(t.size(), size_t(10));
        for (int b = 0; b < 10; ++b) QCOMPARE(t[size_t(b)] == kNull, b < 3);
        CHECK_INVARIANTS(kv);
    }

    // Freed blocks that hold a prefix stay cached-free with their hash: a later request with that prefix
    // hits them; the hits already behind its own window enter its table as null entries, untouched.
    void freedBlocksStayCached() {
        KvCacheManager kv(32, 4, /*enable_caching=*/true);
        kv.set_sliding_window(8, true);
        Request a = make_request("a", 12, 0);
        admit(kv, a);
        const std::vector<int32_t> a_blocks = kv.block_table("a");
        for (int i = 0; i < 8; ++i) QVERIFY(decode(kv, a));  // C = 19 at the last allocation: 3 blocks freed
        QCOMPARE(kv.block_table("a")[2], kNull);
        const KvCacheSnapshot s = kv.snapshot();
        for (int b = 0; b < 3; ++b) {
            QVERIFY(s.state[size_t(a_blocks[size_t(b)])] == KvBlockState::CACHED_FREE);
            QVERIFY(!s.outside_window[size_t(a_blocks[size_t(b)])]);  // free: no longer marked
        }
        QCOMPARE(s.num_outside_window_blocks, 0);  // freeing leaves nothing behind to mark
        CHECK_INVARIANTS(kv);

        Request b = make_request("b", 14, 0);  // a's first 12 tokens, then 12, 13
        const ComputedBlocks hits = kv.get_computed_blocks(b);
        QCOMPARE(hits.num_computed_tokens, 12);
        const int free_before = kv.num_free_blocks();
        QVERIFY(kv.can_fit(b, 2, hits));
        QVERIFY(kv.allocate_slots(b, 2, hits));  // C = 12: its query at 12 reads from 5 (block 1)
        const auto& t = kv.block_table("b");
        QCOMPARE(t.size(), size_t(4));
        QCOMPARE(t[0], kNull);
        QCOMPARE(t[1], a_blocks[1]);
        QCOMPARE(t[2], a_blocks[2]);
        QCOMPARE(kv.block_pool().block(a_blocks[0]).ref_cnt, 0);  // never touched: still evictable
        QCOMPARE(kv.num_free_blocks(), free_before - 3);         // two revived hits + one new block
        CHECK_INVARIANTS(kv);
        kv.free(b);
        kv.free(a);
        QCOMPARE(kv.num_free_blocks(), 32);
        CHECK_INVARIANTS(kv);
    }

    // A hit is searched from the right (vLLM's SlidingWindowManager): it needs only the blocks inside the
    // window of the query after it, cdiv(8 - 1, 4) = 2 here, so an evicted block before them does not end
    // it; the entries before those two are null. Without a run that long, a leading run still hits.
    void windowedHitSearchedFromTheRight() {
        KvCacheManager kv(12, 4, /*enable_caching=*/true);
        kv.set_sliding_window(8, true);
        Request a = make_request("a", 24, 0);
        admit(kv, a);
        const std::vector<int32_t> ta = kv.block_table("a");
        QVERIFY(decode(kv, a));  // C = 24 reads from 17: blocks 0-3 freed, cached-free, block 3 queued first
        QCOMPARE(num_held(kv.block_table("a")), 3);
        Request c = make_request("c", 24, 500);  // takes the 5 never-used blocks and evicts a's block 3
        admit(kv, c);
        const std::vector<int32_t> tc = kv.block_table("c");
        QCOMPARE(tc.back(), ta[3]);
        for (int i : {0, 1, 2}) QVERIFY(std::find(tc.begin(), tc.end(), ta[size_t(i)]) == tc.end());
        CHECK_INVARIANTS(kv);

        Request b = make_request("b", 26, 0);  // a's 24 tokens and two more: blocks 0-2 and 4-5 cached
        const ComputedBlocks hits = kv.get_computed_blocks(b);
        QCOMPARE(hits.num_computed_tokens, 24);  // from the left it would end at the miss: 12
        QCOMPARE(hits.block_ids, (std::vector<int32_t>{kNull, kNull, kNull, kNull, ta[4], ta[5]}));
        QVERIFY(kv.can_fit(b, 2, hits));
        QVERIFY(kv.allocate_slots(b, 2, hits));  // C = 24: its query reads from 17 (block 4)
        b.num_computed_tokens = 26;
        const auto& tb = kv.block_table("b");
        QCOMPARE(tb.size(), size_t(7));
        for (int i = 0; i < 4; ++i) QCOMPARE(tb[size_t(i)], kNull);
        QCOMPARE(tb[4], ta[4]);
        QCOMPARE(tb[5], ta[5]);
        QCOMPARE(kv.block_pool().block(ta[4]).ref_cnt, 2);
        CHECK_INVARIANTS(kv);
        QVERIFY(decode(kv, b));
        CHECK_INVARIANTS(kv);

        kv.free(c);
        Request d = make_request("d", 10, 0);  // block 0 is a's, block 1 is not: one block, a leading run
        for (int i = 4; i < 10; ++i) d.all_token_ids[size_t(i)] = 900 + i;
        const ComputedBlocks lead = kv.get_computed_blocks(d);
        QCOMPARE(lead.block_ids, (std::vector<int32_t>{ta[0]}));
        QCOMPARE(lead.num_computed_tokens, 4);
        QVERIFY(kv.allocate_slots(d, 6, lead));
        CHECK_INVARIANTS(kv);
        for (Request* r : {&a, &b, &d}) kv.free(*r);
        QCOMPARE(kv.num_free_blocks(), 12);
        CHECK_INVARIANTS(kv);
    }

    // can_fit counts the blocks this allocation frees first: a full pool still takes the next decode
    // when it frees a block, and a request preempted (freed) with null entries leaks nothing.
    void fullPoolReusesItsOwnFreedBlock() {
        KvCacheManager kv(3, 4, false);
        kv.set_sliding_window(8, true);
        Request r = make_request("r", 12, 0);
        admit(kv, r);  // 3 blocks: the pool is full
        QCOMPARE(kv.num_free_blocks(), 0);
        r.all_token_ids.push_back(7);
        QCOMPARE(kv.num_blocks_to_allocate(r, 1), 0);  // needs block 3, frees block 0 (C = 12 reads from 5)
        QVERIFY(kv.can_fit(r, 1));
        QVERIFY(kv.allocate_slots(r, 1));
        r.num_computed_tokens += 1;
        QCOMPARE(kv.block_table("r")[0], kNull);
        CHECK_INVARIANTS(kv);
        kv.free(r);  // preemption or abort: the held blocks go back, the null entry is skipped
        QCOMPARE(kv.num_free_blocks(), 3);
        QVERIFY(kv.block_table("r").empty());
        CHECK_INVARIANTS(kv);
    }

    // An allocation that does not fit still frees what is behind the window (nothing reads it again)
    // and leaves a consistent table: the invariants hold, the next one that fits uses the freed block.
    void failedAllocationKeepsItsFreeing() {
        KvCacheManager kv(3, 4, false);
        kv.set_sliding_window(8, true);
        Request r = make_request("r", 12, 0);
        admit(kv, r);
        for (int i = 0; i < 5; ++i) r.all_token_ids.push_back(50 + i);
        QVERIFY(!kv.allocate_slots(r, 5));  // C = 12 frees block 0, but 17 tokens need 5 blocks, 2 new
        QCOMPARE(kv.block_table("r")[0], kNull);
        QCOMPARE(kv.num_free_blocks(), 1);
        CHECK_INVARIANTS(kv);
        QVERIFY(kv.allocate_slots(r, 1));
        QCOMPARE(kv.num_free_blocks(), 0);
        CHECK_INVARIANTS(kv);
    }

    // A mixed model frees nothing; the snapshot marks in-use blocks behind every holder's window (a
    // shared prefix block only once both holders have moved past it).
    void mixedModelMarksLeftBehindBlocks() {
        KvCacheManager kv(32, 4, true);
        kv.set_sliding_window(8, false);
        Request a = make_request("a", 20, 0);
        admit(kv, a);  // C = 20: the next query reads from 13 (block 3)
        Request b = make_request("b", 9, 0);  // hits a's blocks 0 and 1; its next query (9) reads from 2
        admit(kv, b);
        const std::vector<int32_t> ta = kv.block_table("a"), tb = kv.block_table("b");
        QCOMPARE(tb[0], ta[0]);
        QCOMPARE(tb[1], ta[1]);
        const KvCacheSnapshot s = kv.snapshot();
        QCOMPARE(s.sliding_window, 8);
        QVERIFY(!s.frees_outside_window);
        QVERIFY(!s.outside_window[size_t(ta[0])]);  // b still reads block 0 (key 1)
        QVERIFY(!s.outside_window[size_t(ta[1])]);
        QVERIFY(s.outside_window[size_t(ta[2])]);   // a alone holds it, and has left it
        QVERIFY(!s.outside_window[size_t(ta[3])]);
        QCOMPARE(s.num_outside_window_blocks, 1);
        for (int32_t id : ta) QVERIFY(s.state[size_t(id)] == KvBlockState::IN_USE);
        for (int i = 0; i < 4; ++i) QVERIFY(decode(kv, b));  // C = 13: b's next query reads from 6
        const KvCacheSnapshot s2 = kv.snapshot();
        QVERIFY(s2.outside_window[size_t(ta[0])]);
        QVERIFY(!s2.outside_window[size_t(ta[1])]);
        QCOMPARE(s2.num_outside_window_blocks, 2);
        CHECK_INVARIANTS(kv);

        KvCacheManager none(8, 4, true);  // no window: nothing is ever marked
        Request c = make_request("c", 30, 0);
        admit(none, c);
        QCOMPARE(none.snapshot().num_outside_window_blocks, 0);
    }
};

QTEST_GUILESS_MAIN(TestSlidingWindowKv)
#include "test_sliding_window_kv.moc"
