// FreeBlockQueue: intrusive LRU list of free blocks. Engine thread only.
#include "kv/free_block_queue.h"

#include <stdexcept>
#include <string>

namespace kvscope {

FreeBlockQueue::FreeBlockQueue(std::span<KvCacheBlock> blocks) {
    head_.block_id = tail_.block_id = -1;
    head_.next_free = &tail_;
    tail_.prev_free = &head_;
    for (KvCacheBlock& b : blocks) append(&b);
}

KvCacheBlock* FreeBlockQueue::popleft() {
    if (num_free_blocks_ == 0) throw std::logic_error("FreeBlockQueue::popleft: no free blocks");
    KvCacheBlock* first = head_.next_free;
    unlink(first);
    return first;
}

std::vector<KvCacheBlock*> FreeBlockQueue::popleft_n(int n) {
    if (n < 0 || n > num_free_blocks_)
        throw std::logic_error("FreeBlockQueue::popleft_n: asked for " + std::to_string(n) + " of " +
                               std::to_string(num_free_blocks_) + " free blocks");
    std::vector<KvCacheBlock*> out;
    out.reserve(n);
    for (int i = 0; i < n; ++i) out.push_back(popleft());
    return out;
}

void FreeBlockQueue::remove(KvCacheBlock* block) {
    if (!block->is_in_free_queue())
        throw std::logic_error("FreeBlockQueue::remove: block " + std::to_string(block->block_id) +
                               " is not in the free queue");
    unlink(block);
}

void FreeBlockQueue::append(KvCacheBlock* block) {
    if (block->is_in_free_queue() || block->next_free)
        throw std::logic_error("FreeBlockQueue::append: block " + std::to_string(block->block_id) +
                               " is already in the free queue");
    link_before_tail(block);
}

void FreeBlockQueue::append_n(std::span<KvCacheBlock* const> blocks) {
    for (KvCacheBlock* b : blocks) append(b);
}

std::vector<KvCacheBlock*> FreeBlockQueue::get_all_free_blocks() const {
    std::vector<KvCacheBlock*> out;
    out.reserve(num_free_blocks_);
    for (KvCacheBlock* b = head_.next_free; b != &tail_; b = b->next_free) out.push_back(b);
    return out;
}

void FreeBlockQueue::link_before_tail(KvCacheBlock* block) {
    KvCacheBlock* last = tail_.prev_free;
    last->next_free = block;
    block->prev_free = last;
    block->next_free = &tail_;
    tail_.prev_free = block;
    ++num_free_blocks_;
}

// Sentinels guarantee both neighbours exist, so no head/tail special cases.
void FreeBlockQueue::unlink(KvCacheBlock* block) {
    block->prev_free->next_free = block->next_free;
    block->next_free->prev_free = block->prev_free;
    block->prev_free = nullptr;
    block->next_free = nullptr;
    --num_free_blocks_;
}

}  // namespace kvscope
