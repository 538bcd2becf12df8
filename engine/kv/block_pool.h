// BlockPool: every KV block of the cache, created up front, with ref counts, the LRU free queue and
// the prefix cache (map from a full block's chained hash to the block), like vLLM v1's BlockPool.
// Unlike vLLM, block 0 is an ordinary block (no reserved "null block": there is no padding use here;
// a table entry freed behind a sliding window holds KvCacheManager::kNullBlockId instead).
// Thread affinity: engine thread only; reached by the scheduler only through KvCacheManager.
#pragma once

#include "kv/free_block_queue.h"
#include "kv/kv_cache_block.h"
#include "sched/request.h"

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvscope {

// Raw pool counters: prefix-cache lookups are counted per block looked up.
struct BlockPoolCounters {
    int64_t num_queries = 0;    // get_cached_block calls
    int64_t num_hits = 0;       // ... that found a block
    int64_t num_evictions = 0;  // cached blocks whose hash was dropped to reuse the block
};

class BlockPool {
public:
    BlockPool(int num_blocks, bool enable_caching);
    BlockPool(const BlockPool&) = delete;  // blocks are linked by address
    BlockPool& operator=(const BlockPool&) = delete;

    // Pops n blocks from the head of the free queue (LRU first) with ref_cnt 1. A popped block that
    // was cached is evicted: its hash leaves the map. Throws std::logic_error when n > free blocks.
    std::vector<KvCacheBlock*> get_new_blocks(int n);
    // A prefix hit: ref_cnt++, and a cached block with ref_cnt 0 leaves the free queue (no eviction).
    void touch(std::span<KvCacheBlock* const> blocks);
    // ref_cnt--; blocks reaching 0 are appended to the free queue in the given order (first given =
    // evicted first). Cached ones keep their hash: they stay findable until evicted.
    void free_blocks(std::span<KvCacheBlock* const> ordered_blocks);
    // Makes blocks[num_cached_blocks, num_full_blocks) findable under request.block_hashes[i]
    // (which must cover num_full_blocks); null entries (freed behind a sliding window) are skipped.
    // No-op when caching is off.
    void cache_full_blocks(const Request& request, std::span<KvCacheBlock* const> blocks,
                           int num_cached_blocks, int num_full_blocks, int block_size);
    // The cached block for this hash, or nullptr. Counts one query (and one hit when found).
    KvCacheBlock* get_cached_block(BlockHash block_hash);
    // Drops every hash; only when no block is in use (returns false, nothing changed, otherwise).
    bool reset_prefix_cache();

    int num_blocks() const { return int(blocks_.size()); }
    bool enable_caching() const { return enable_caching_; }
    int num_free_blocks() const { return free_block_queue_.num_free_blocks(); }
    double usage() const;  // in-use fraction; cached-free blocks count as free (evictable)
    const BlockPoolCounters& counters() const { return counters_; }

    KvCacheBlock* block(int block_id) { return &blocks_.at(size_t(block_id)); }
    const KvCacheBlock& block(int block_id) const { return blocks_.at(size_t(block_id)); }
    const std::vector<KvCacheBlock>& blocks() const { return blocks_; }
    const FreeBlockQueue& free_block_queue() const { return free_block_queue_; }
    const std::unordered_map<BlockHash, KvCacheBlock*>& cached_blocks() const { return cached_block_hash_to_block_; }

private:
    void evict_if_cached(KvCacheBlock* block);

    bool enable_caching_;
    std::vector<KvCacheBlock> blocks_;  // never resized after construction: the queue links addresses
    FreeBlockQueue free_block_queue_;
    // Invariant: map[h] == b exactly when b->block_hash == h. When a second block gets a hash that is
    // already mapped (two requests computed the same prefix at once), the first block stays the
    // cached one and the second stays unhashed (vLLM's simplest path); it is freed as a plain block.
    std::unordered_map<BlockHash, KvCacheBlock*> cached_block_hash_to_block_;
    BlockPoolCounters counters_;
};

}  // namespace kvscope
