// KvCacheSnapshot: a value copy of the KV block map for the UI (block map, charts), made by
// KvCacheManager::snapshot() on the engine thread and safe to send to any thread. Flat per-block
// arrays (struct of arrays, owners as indices), no per-block heap objects: refreshing one for 100,000
// blocks with snapshot_into takes ~0.5 ms; a fresh one also pays first-touch page faults on ~3 MB.
#pragma once

#include "sched/request.h"  // BlockHash

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvscope {

enum class KvBlockState : uint8_t {
    FREE,         // in the free queue, no hash: nothing reusable in it
    CACHED_FREE,  // in the free queue with a hash: evictable, a prefix hit revives it
    IN_USE,       // ref_cnt > 0: held by running requests' block tables
};

// Cumulative prefix-cache figures (survive KvCacheManager::reset). Query/hit tokens follow vLLM's
// PrefixCacheStats: each get_computed_blocks call queries all of the request's tokens.
struct PrefixCacheStats {
    int64_t num_requests = 0;      // get_computed_blocks calls with caching on
    int64_t num_query_tokens = 0;  // sum of request.num_tokens() over those calls
    int64_t num_hit_tokens = 0;    // tokens served from the cache
    int64_t num_query_blocks = 0;  // full blocks eligible for a hit (the last token is never a hit)
    int64_t num_hit_blocks = 0;
    int64_t num_evictions = 0;     // cached blocks reused for other tokens

    double hit_rate() const { return num_query_tokens ? double(num_hit_tokens) / num_query_tokens : 0.0; }
};

struct KvCacheSnapshot {
    int num_blocks = 0;
    int block_size = 0;

    // Per block, indexed by block_id: [num_blocks] each.
    std::vector<KvBlockState> state;
    std::vector<int32_t> ref_cnt;
    std::vector<int32_t> tokens_filled;   // 0..block_size (CACHED_FREE blocks are full)
    std::vector<int32_t> eviction_order;  // position in the free queue, 0 = evicted next; -1 IN_USE
    std::vector<std::optional<BlockHash>> block_hash;
    // 1 for an IN_USE block that lies wholly behind the sliding window of every request holding it: no
    // windowed layer reads it again. Only the global layers of a mixed model (Gemma) still do; where
    // every layer is windowed the manager frees such blocks instead, unless freeing is switched off.
    std::vector<uint8_t> outside_window;
    // Owners in compressed rows: block b is held by request_ids[owners[i]] for i in
    // [owner_offsets[b], owner_offsets[b + 1]). owner_offsets has num_blocks + 1 entries.
    std::vector<int32_t> owner_offsets;
    std::vector<int32_t> owners;
    std::vector<std::string> request_ids;  // requests holding blocks, sorted

    // Totals.
    int num_free_blocks = 0;         // FREE + CACHED_FREE
    int num_cached_free_blocks = 0;  // CACHED_FREE
    int num_in_use_blocks = 0;
    int num_cached_blocks = 0;       // blocks with a hash (in use or not)
    int num_outside_window_blocks = 0;  // IN_USE blocks marked outside_window
    int sliding_window = 0;             // the model's (0: none, nothing is marked)
    bool frees_outside_window = false;  // every layer windowed: left-behind blocks are freed
    int64_t num_reserved_slots = 0;
    int64_t num_filled_slots = 0;
    double usage = 0;     // in-use fraction
    double kv_waste = 0;  // 1 - filled / reserved
    PrefixCacheStats prefix_cache_stats;

    std::span<const int32_t> owner_indices(int block_id) const {
        return std::span<const int32_t>(owners).subspan(
            size_t(owner_offsets[size_t(block_id)]),
            size_t(owner_offsets[size_t(block_id) + 1] - owner_offsets[size_t(block_id)]));
    }
    std::vector<std::string> owner_ids(int block_id) const {
        std::vector<std::string> ids;
        for (int32_t i : owner_indices(block_id)) ids.push_back(request_ids[size_t(i)]);
        return ids;
    }
};

}  // namespace kvscope
