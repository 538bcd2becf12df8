// BlockPool: ref_cnt sharing, cached blocks that stay findable in the free queue and leave it on a hit,
// eviction (hash reset, counter), query/hit counters; plus the chained block hash it is keyed by.
#include "test_support.h"

#include "kv/block_hash.h"
#include "kv/block_pool.h"

#include <numeric>
#include <stdexcept>
#include <vector>

using namespace kvscope;

namespace {

std::vector<int> ids(const std::vector<KvCacheBlock*>& blocks) {
    std::vector<int> out;
    for (const KvCacheBlock* b : blocks) out.push_back(b->block_id);
    return out;
}

// A request whose tokens are 0, 1, 2, ... with hashes for block_size.
Request make_request(const std::string& id, int num_tokens, int block_size, std::string salt = "") {
    Request r;
    r.request_id = id;
    r.all_token_ids.resize(size_t(num_tokens));
    std::iota(r.all_token_ids.begin(), r.all_token_ids.end(), 0);
    r.num_prompt_tokens = num_tokens;
    r.cache_salt = std::move(salt);
    update_block_hashes(r, block_size);
    return r;
}

}  // namespace

class TestBlockPool : public QObject {
    Q_OBJECT
private slots:
    void hashChainsParentTokensAndSalt() {
        const std::vector<int32_t> a{1, 2, 3, 4}, b{1, 2, 3, 5};
        const BlockHash h = hash_block_tokens(std::nullopt, a, "");
        QCOMPARE(hash_block_tokens(std::nullopt, a, ""), h);  // deterministic, no random state
        QVERIFY(hash_block_tokens(std::nullopt, b, "") != h);
        QVERIFY(hash_block_tokens(h, a, "") != h);
        QVERIFY(hash_block_tokens(std::nullopt, a, "salt") != h);
        QVERIFY(hash_block_tokens(BlockHash(0), a, "") != h);
        // Length-prefixed fields: moving a token across the parent/extra boundary changes the hash.
        const std::vector<int32_t> three{1, 2, 3};
        QVERIFY(hash_block_tokens(std::nullopt, three, "") != hash_block_tokens(std::nullopt, a, ""));
    }

    void updateBlockHashesExtendsAndRecomputes() {
        Request r = make_request("r", 10, 4, "user-1");
        QCOMPARE(r.block_hashes.size(), size_t(2));  // the partial tail block has no hash
        const std::span<const int32_t> tokens(r.all_token_ids);
        const BlockHash h0 = hash_block_tokens(std::nullopt, tokens.subspan(0, 4), "user-1");
        QCOMPARE(r.block_hashes[0], h0);
        QCOMPARE(r.block_hashes[1], hash_block_tokens(h0, tokens.subspan(4, 4), ""));  // salt: first block only
        r.all_token_ids.push_back(10);
        r.all_token_ids.push_back(11);
        update_block_hashes(r, 4);
        QCOMPARE(r.block_hashes.size(), size_t(3));
        update_block_hashes(r, 2);  // another block size: recomputed from scratch
        QCOMPARE(r.block_hashes.size(), size_t(6));
        const std::span<const int32_t> grown(r.all_token_ids);  // push_back may have moved the tokens
        QCOMPARE(r.block_hashes[0], hash_block_tokens(std::nullopt, grown.subspan(0, 2), "user-1"));
        update_block_hashes(r, 8);
        QCOMPARE(r.block_hashes.size(), size_t(1));
        QCOMPARE(r.block_hashes[0], hash_block_tokens(std::nullopt, grown.subspan(0, 8), "user-1"));
    }

    void newBlocksComeFromTheHeadWithRefCnt1() {
        BlockPool pool(8, true);
        QCOMPARE(pool.num_free_blocks(), 8);
        std::vector<KvCacheBlock*> got = pool.get_new_blocks(3);
        QCOMPARE(ids(got), (std::vector<int>{0, 1, 2}));  // block 0 is an ordinary block
        for (KvCacheBlock* b : got) QCOMPARE(b->ref_cnt, 1);
        QCOMPARE(pool.num_free_blocks(), 5);
        QCOMPARE(pool.usage(), 3.0 / 8.0);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, pool.get_new_blocks(6));
        QCOMPARE(pool.num_free_blocks(), 5);
    }

    void refCntSharing() {
        BlockPool pool(4, true);
        std::vector<KvCacheBlock*> blocks = pool.get_new_blocks(2);
        pool.touch(blocks);  // a second request holds the same blocks
        QCOMPARE(blocks[0]->ref_cnt, 2);
        pool.free_blocks(blocks);
        QCOMPARE(blocks[0]->ref_cnt, 1);
        QCOMPARE(pool.num_free_blocks(), 2);  // still held once: not free
        pool.free_blocks(blocks);
        QCOMPARE(pool.num_free_blocks(), 4);
        QCOMPARE(ids(pool.free_block_queue().get_all_free_blocks()), (std::vector<int>{2, 3, 0, 1}));
        QVERIFY_THROWS_EXCEPTION(std::logic_error, pool.free_blocks(blocks));  // double free
    }

    void cachedBlockStaysFindableAndTouchRevivesIt() {
        const int bs = 4;
        BlockPool pool(6, true);
        Request r = make_request("a", 9, bs);
        std::vector<KvCacheBlock*> blocks = pool.get_new_blocks(3);
        pool.cache_full_blocks(r, blocks, 0, 2, bs);
        QCOMPARE(blocks[0]->block_hash, std::optional<BlockHash>(r.block_hashes[0]));
        QVERIFY(!blocks[2]->block_hash);  // the partial block is never cached
        QCOMPARE(pool.cached_blocks().size(), size_t(2));
        pool.free_blocks(blocks);
        QCOMPARE(pool.num_free_blocks(), 6);
        // Freed but cached: still found, still in the free queue until touched.
        KvCacheBlock* hit = pool.get_cached_block(r.block_hashes[1]);
        QCOMPARE(hit, blocks[1]);
        QVERIFY(hit->is_in_free_queue());
        std::vector<KvCacheBlock*> hits{hit};
        pool.touch(hits);
        QVERIFY(!hit->is_in_free_queue());
        QCOMPARE(hit->ref_cnt, 1);
        QCOMPARE(pool.num_free_blocks(), 5);
        QCOMPARE(pool.counters().num_evictions, int64_t(0));
    }

    void evictionResetsHashAndCounts() {
        const int bs = 2;
        BlockPool pool(3, true);
        Request r = make_request("a", 4, bs);
        std::vector<KvCacheBlock*> blocks = pool.get_new_blocks(2);
        pool.cache_full_blocks(r, blocks, 0, 2, bs);
        pool.free_blocks(blocks);  // queue: 2, 0, 1
        std::vector<KvCacheBlock*> got = pool.get_new_blocks(2);  // block 2 (plain), then 0 (cached)
        QCOMPARE(ids(got), (std::vector<int>{2, 0}));
        QVERIFY(!got[1]->block_hash);
        QCOMPARE(pool.counters().num_evictions, int64_t(1));
        QVERIFY(!pool.get_cached_block(r.block_hashes[0]));
        QCOMPARE(pool.get_cached_block(r.block_hashes[1]), blocks[1]);  // the other one survives
        QCOMPARE(pool.cached_blocks().size(), size_t(1));
    }

    void queryAndHitCounters() {
        BlockPool pool(4, true);
        Request r = make_request("a", 8, 4);
        std::vector<KvCacheBlock*> blocks = pool.get_new_blocks(2);
        pool.cache_full_blocks(r, blocks, 0, 1, 4);
        QVERIFY(pool.get_cached_block(r.block_hashes[0]));
        QVERIFY(!pool.get_cached_block(r.block_hashes[1]));
        QVERIFY(!pool.get_cached_block(12345));
        QCOMPARE(pool.counters().num_queries, int64_t(3));
        QCOMPARE(pool.counters().num_hits, int64_t(1));
    }

    void duplicateHashKeepsTheFirstBlock() {
        BlockPool pool(4, true);
        Request a = make_request("a", 4, 4), b = make_request("b", 4, 4);
        std::vector<KvCacheBlock*> ba = pool.get_new_blocks(1), bb = pool.get_new_blocks(1);
        pool.cache_full_blocks(a, ba, 0, 1, 4);
        pool.cache_full_blocks(b, bb, 0, 1, 4);
        QCOMPARE(pool.get_cached_block(a.block_hashes[0]), ba[0]);
        QVERIFY(!bb[0]->block_hash);  // stays a plain block
        pool.free_blocks(bb);
        QCOMPARE(pool.cached_blocks().size(), size_t(1));
    }

    void cachingOffCachesNothing() {
        BlockPool pool(4, false);
        Request r = make_request("a", 8, 4);
        std::vector<KvCacheBlock*> blocks = pool.get_new_blocks(2);
        pool.cache_full_blocks(r, blocks, 0, 2, 4);
        QVERIFY(pool.cached_blocks().empty());
        QVERIFY(!blocks[0]->block_hash);
    }

    void resetPrefixCacheOnlyWhenIdle() {
        BlockPool pool(4, true);
        Request r = make_request("a", 8, 4);
        std::vector<KvCacheBlock*> blocks = pool.get_new_blocks(2);
        pool.cache_full_blocks(r, blocks, 0, 2, 4);
        QVERIFY(!pool.reset_prefix_cache());
        QCOMPARE(pool.cached_blocks().size(), size_t(2));
        pool.free_blocks(blocks);
        QVERIFY(pool.reset_prefix_cache());
        QVERIFY(pool.cached_blocks().empty());
        QVERIFY(!blocks[0]->block_hash);
    }
};

QTEST_GUILESS_MAIN(TestBlockPool)
#include "test_block_pool.moc"
