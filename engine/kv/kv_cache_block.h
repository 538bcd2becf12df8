// KvCacheBlock: the bookkeeping record of one physical KV block (vLLM v1's KVCacheBlock). No tensor
// data lives here; the block's K/V slots are addressed by block_id elsewhere.
// Thread affinity: engine thread only (owned by BlockPool, linked by FreeBlockQueue).
#pragma once

#include "sched/request.h"  // BlockHash

#include <cstdint>
#include <optional>

namespace kvscope {

struct KvCacheBlock {
    // Immutable after BlockPool construction: index into the pool, and the physical block number.
    int32_t block_id = 0;
    // BlockPool only (get_new_blocks, touch, free_blocks): number of request block tables holding
    // this block. Invariant: ref_cnt == 0 exactly when the block is in the free queue.
    int32_t ref_cnt = 0;
    // BlockPool only: set by cache_full_blocks when the block is FULL and becomes the prefix cache's
    // block for this hash; reset when the block is evicted. Invariant: set exactly when the pool's
    // hash map points at this block.
    std::optional<BlockHash> block_hash;
    // FreeBlockQueue only: neighbours in the intrusive free list; both null when not in the queue.
    KvCacheBlock* prev_free = nullptr;
    KvCacheBlock* next_free = nullptr;

    bool is_in_free_queue() const { return prev_free != nullptr; }
};

}  // namespace kvscope
