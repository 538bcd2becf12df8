// FreeBlockQueue: the LRU eviction order of free blocks (vLLM v1's FreeKVCacheBlockQueue), an intrusive
// doubly linked list with head/tail sentinels so that a cached block hit by a new request leaves the
// queue in O(1). Head = evicted first. Thread affinity: engine thread only.
#pragma once

#include "kv/kv_cache_block.h"

#include <span>
#include <vector>

namespace kvscope {

class FreeBlockQueue {
public:
    // Links `blocks` in order (block 0 at the head). The blocks must outlive the queue and not move.
    explicit FreeBlockQueue(std::span<KvCacheBlock> blocks);
    // The sentinels are members that blocks point at: the queue cannot be copied or moved.
    FreeBlockQueue(const FreeBlockQueue&) = delete;
    FreeBlockQueue& operator=(const FreeBlockQueue&) = delete;

    // Unlinks and returns the head. Throws std::logic_error when empty.
    KvCacheBlock* popleft();
    // The first n blocks, head first. Throws std::logic_error (queue unchanged) when n > num_free_blocks().
    std::vector<KvCacheBlock*> popleft_n(int n);
    // O(1) unlink from anywhere. Throws std::logic_error when the block is not in the queue.
    void remove(KvCacheBlock* block);
    // Link at the tail (evicted last). Throws std::logic_error when the block is already queued.
    void append(KvCacheBlock* block);
    void append_n(std::span<KvCacheBlock* const> blocks);

    int num_free_blocks() const { return num_free_blocks_; }
    // Head first; for tests and invariant checks (allocates).
    std::vector<KvCacheBlock*> get_all_free_blocks() const;
    // Visits the queued blocks head first without allocating (snapshots of 100k blocks).
    template <class F>
    void for_each_free(F&& visit) const {
        for (const KvCacheBlock* b = head_.next_free; b != &tail_; b = b->next_free) visit(*b);
    }

private:
    void link_before_tail(KvCacheBlock* block);
    void unlink(KvCacheBlock* block);

    KvCacheBlock head_;  // sentinel (block_id -1): head_.next_free is the first free block
    KvCacheBlock tail_;  // sentinel (block_id -1): tail_.prev_free is the last free block
    int num_free_blocks_ = 0;
};

}  // namespace kvscope
