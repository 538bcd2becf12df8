// KvCacheManager: the scheduler's only door to KV memory (vLLM v1's KVCacheManager). It owns the
// BlockPool and every running request's block table, finds prefix-cache hits, allocates slots for each
// step's new tokens, frees finished or preempted requests, and reports usage, waste and snapshots.
// Under a sliding window on every layer it also frees the blocks a running request has left behind
// (vLLM's SlidingWindowManager): their table entries become kNullBlockId, which the kernels never read,
// and a prefix hit needs only the blocks inside the window of the query after it.
// Thread affinity: engine thread only; the UI gets KvCacheSnapshot values.
#pragma once

#include "kv/block_pool.h"
#include "kv/kv_cache_snapshot.h"
#include "sched/request.h"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvscope {

// Leading prefix-cache hits of a waiting request, from get_computed_blocks, to pass to allocate_slots
// in the same step (a later allocation may evict them: allocate_slots checks and throws if so).
struct ComputedBlocks {
    std::vector<int32_t> block_ids;  // in block-table order; kNullBlockId where a windowed hit needs none
    int num_computed_tokens = 0;     // block_ids.size() * block_size
};

class KvCacheManager {
public:
    // The table entry of a block freed because every layer has left it behind. The table keeps its
    // length (position p stays in entry p / block_size); attention never reads keys before a query's
    // window, so this id is never dereferenced.
    static constexpr int32_t kNullBlockId = -1;

    KvCacheManager(int num_blocks, int block_size, bool enable_caching);

    // The model's sliding window (0 = none): a windowed layer's query at position p reads keys
    // (p - sliding_window, p]. free_outside_window: every layer is windowed, so blocks wholly before
    // the window of a request's next query are freed in allocate_slots; otherwise (a mixed model such as
    // Gemma, whose global layers read everything) they are only marked in the snapshot. Survives reset().
    void set_sliding_window(int sliding_window, bool free_outside_window);
    int sliding_window() const { return sliding_window_; }
    bool frees_outside_window() const { return free_outside_window_; }
    // Leading blocks that no windowed layer reads again once num_computed_tokens are computed: the next
    // query sits at position num_computed_tokens and sees keys from num_computed_tokens + 1 - window on.
    int num_skipped_blocks(int num_computed_tokens) const;

    // Longest run of leading full blocks of the request found in the prefix cache. At most
    // num_tokens - 1 tokens are served from cache: the last token is recomputed to produce logits.
    // When frees_outside_window(), only the blocks inside the window of the query after the hit must be
    // cached: those before may be missing (kNullBlockId). Empty when caching is off. Updates
    // request.block_hashes and the prefix-cache stats.
    ComputedBlocks get_computed_blocks(Request& request);

    // Blocks to take from the free queue to hold request.num_computed_tokens + the hits + num_new_tokens
    // (+ num_lookahead_tokens), beyond those the request already holds.
    int num_blocks_needed(const Request& request, int num_new_tokens, const ComputedBlocks& new_computed = {},
                          int num_lookahead_tokens = 0) const;
    // Blocks that allocate_slots would take out of the free queue (vLLM's get_num_blocks_to_allocate):
    // num_blocks_needed plus the hits that sit in it (ref_cnt 0, cached-free), which num_free_blocks()
    // counts as free. Compare this, not num_blocks_needed, with num_free_blocks().
    int num_blocks_to_allocate(const Request& request, int num_new_tokens, const ComputedBlocks& new_computed = {},
                               int num_lookahead_tokens = 0) const;
    // Whether allocate_slots would succeed: num_blocks_to_allocate <= num_free_blocks().
    bool can_fit(const Request& request, int num_new_tokens, const ComputedBlocks& new_computed = {},
                 int num_lookahead_tokens = 0) const;
    // Frees the blocks the request has left behind (when frees_outside_window(); this happens even when
    // the rest does not fit: nothing reads them again), takes the hits (those already behind the window
    // enter the table as kNullBlockId, untouched), then appends enough new blocks to the request's (append-only) block table for
    // num_new_tokens more tokens after request.num_computed_tokens (not yet advanced by the caller),
    // and caches the blocks this step fills. Returns false, changing nothing else, when it does not fit.
    // num_lookahead_tokens: blocks reserved beyond the new tokens, not counted as filled (vLLM's name;
    // the naive baseline reserves max_model_len up front with it).
    bool allocate_slots(Request& request, int num_new_tokens, const ComputedBlocks& new_computed = {},
                        int num_lookahead_tokens = 0);
    // Releases the request's blocks tail first (so its last blocks are evicted first) and forgets its
    // table. Keeps request.block_hashes for a later re-admission. No-op for unknown requests.
    void free(const Request& request);
    // Drops all hashes; only when no request holds blocks (false otherwise).
    bool reset_prefix_cache();
    // Rebuilds the pool for a new size or block size. Throws std::logic_error while any request holds
    // blocks (the engine drains first). Prefix-cache stats stay cumulative.
    void reset(int num_blocks, int block_size);

    // Block ids of the request's table, empty when it holds none; freed leading entries are kNullBlockId.
    const std::vector<int32_t>& block_table(const std::string& request_id) const;
    int num_blocks() const { return pool_->num_blocks(); }
    int block_size() const { return block_size_; }
    bool enable_caching() const { return pool_->enable_caching(); }
    int num_free_blocks() const { return pool_->num_free_blocks(); }  // includes cached-free
    int num_cached_free_blocks() const;  // evictable blocks that still hold a prefix; O(cached blocks)
    double usage() const { return pool_->usage(); }

    // Waste accounting over blocks held by requests. A shared prefix block is counted once, both as
    // block_size reserved slots and as block_size filled ones. O(num_blocks).
    int64_t num_reserved_slots() const;
    int64_t num_filled_slots() const;
    double kv_waste() const;  // 1 - filled / reserved; 0 when nothing is reserved

    PrefixCacheStats prefix_cache_stats() const;
    KvCacheSnapshot snapshot() const;
    // The same into an existing snapshot, reusing its buffers (no allocation or page faults once
    // warm: the engine can refresh one snapshot per frame and hand out copies).
    void snapshot_into(KvCacheSnapshot& out) const;
    // "" or the first violated invariant (tests and debug builds call it after every step).
    std::string check_invariants() const;
    const BlockPool& block_pool() const { return *pool_; }

private:
    struct RequestBlocks {
        std::vector<KvCacheBlock*> blocks;  // parallel to block_ids; nullptr where freed (kNullBlockId)
        std::vector<int32_t> block_ids;
        // Leading entries freed behind the sliding window. Invariant: exactly entries [0, num_freed_blocks)
        // are null, and num_freed_blocks <= num_skipped_blocks(num_computed_at_allocate).
        int num_freed_blocks = 0;
        int num_computed_at_allocate = 0;  // request.num_computed_tokens (+ hits) at the last allocate_slots call
        int num_filled_tokens = 0;   // num_computed_tokens + new tokens at the last allocate_slots
        int num_cached_blocks = 0;   // leading blocks already handed to cache_full_blocks
        bool hashes_checked = false; // request.block_hashes were checked for this block size and salt
    };

    // get_computed_blocks's hit where every layer is windowed, over the first num_query_blocks blocks.
    std::vector<int32_t> find_windowed_hit(const Request& request, int num_query_blocks);
    // num_blocks_needed for a request that holds num_held blocks.
    int num_blocks_beyond(int num_held, const Request& request, int num_new_tokens, const ComputedBlocks& new_computed,
                          int num_lookahead_tokens) const;
    // Hits that leave the free queue: cached-free ones at or after entry first_useful.
    int num_evictable_hits(const ComputedBlocks& new_computed, int first_useful) const;
    // Entries [0, num_skipped) of the table the request would have at an allocate_slots now.
    int num_skipped_at_allocate(const Request& request, const ComputedBlocks& new_computed) const;
    // Blocks free_skipped_blocks would return to the free queue (held by this table alone).
    int num_reclaimable(const std::string& request_id, int num_skipped) const;
    void free_skipped_blocks(RequestBlocks& rb, int num_skipped);
    std::vector<KvCacheBlock*> resolve_hits(const Request& request, const ComputedBlocks& hits);
    void record_fill(RequestBlocks& rb, int num_filled_tokens);
    void cache_blocks(Request& request, RequestBlocks& rb, int num_tokens_to_cache);
    void fill_owners(KvCacheSnapshot& s, int32_t num_owner_entries) const;
    void mark_outside_window(KvCacheSnapshot& s) const;
    std::string check_free_queue() const;
    std::string check_tables() const;
    std::string check_prefix_cache() const;
    std::string check_windows() const;

    std::unique_ptr<BlockPool> pool_;  // replaced by reset()
    int block_size_;
    int sliding_window_ = 0;
    bool free_outside_window_ = false;
    std::unordered_map<std::string, RequestBlocks> requests_;
    std::vector<int32_t> tokens_filled_;  // [num_blocks]: meaningful for in-use blocks only
    PrefixCacheStats stats_;              // all but num_evictions (read from the pool)
    int64_t evictions_before_reset_ = 0;
};

}  // namespace kvscope
