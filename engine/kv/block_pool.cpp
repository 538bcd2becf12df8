// BlockPool: ref counts, LRU free queue and the prefix-cache map. Engine thread only.
#include "kv/block_pool.h"

#include <stdexcept>
#include <string>

namespace kvscope {
namespace {

std::vector<KvCacheBlock> make_blocks(int num_blocks) {
    if (num_blocks <= 0) throw std::invalid_argument("BlockPool: num_blocks must be > 0, got " +
                                                     std::to_string(num_blocks));
    std::vector<KvCacheBlock> blocks(static_cast<size_t>(num_blocks));
    for (int i = 0; i < num_blocks; ++i) blocks[size_t(i)].block_id = i;
    return blocks;
}

}  // namespace

BlockPool::BlockPool(int num_blocks, bool enable_caching)
    : enable_caching_(enable_caching), blocks_(make_blocks(num_blocks)), free_block_queue_(blocks_) {}

std::vector<KvCacheBlock*> BlockPool::get_new_blocks(int n) {
    std::vector<KvCacheBlock*> blocks = free_block_queue_.popleft_n(n);  // throws when short
    for (KvCacheBlock* b : blocks) {
        evict_if_cached(b);
        b->ref_cnt = 1;
    }
    return blocks;
}

void BlockPool::evict_if_cached(KvCacheBlock* block) {
    if (!block->block_hash) return;
    cached_block_hash_to_block_.erase(*block->block_hash);
    block->block_hash.reset();
    ++counters_.num_evictions;
}

void BlockPool::touch(std::span<KvCacheBlock* const> blocks) {
    for (KvCacheBlock* b : blocks) {
        if (b->ref_cnt == 0) free_block_queue_.remove(b);  // ref_cnt 0 <=> in the free queue
        ++b->ref_cnt;
    }
}

void BlockPool::free_blocks(std::span<KvCacheBlock* const> ordered_blocks) {
    for (KvCacheBlock* b : ordered_blocks) {
        if (b->ref_cnt <= 0)
            throw std::logic_error("BlockPool::free_blocks: block " + std::to_string(b->block_id) +
                                   " is already free");
        if (--b->ref_cnt == 0) free_block_queue_.append(b);
    }
}

void BlockPool::cache_full_blocks(const Request& request, std::span<KvCacheBlock* const> blocks,
                                  int num_cached_blocks, int num_full_blocks, int block_size) {
    if (!enable_caching_ || num_full_blocks <= num_cached_blocks) return;
    if (size_t(num_full_blocks) > request.block_hashes.size() || size_t(num_full_blocks) > blocks.size())
        throw std::logic_error("BlockPool::cache_full_blocks: request " + request.request_id + " has " +
                               std::to_string(request.block_hashes.size()) + " block hashes and " +
                               std::to_string(blocks.size()) + " blocks, needs " +
                               std::to_string(num_full_blocks));
    for (int i = num_cached_blocks; i < num_full_blocks; ++i) {
        KvCacheBlock* b = blocks[size_t(i)];
        if (!b) continue;             // freed behind a sliding window (it was cached before, if ever)
        if (b->block_hash) continue;  // a prefix hit: already the cached block
        BlockHash h = request.block_hashes[size_t(i)];
        if (cached_block_hash_to_block_.try_emplace(h, b).second) b->block_hash = h;
    }
}

KvCacheBlock* BlockPool::get_cached_block(BlockHash block_hash) {
    ++counters_.num_queries;
    auto it = cached_block_hash_to_block_.find(block_hash);
    if (it == cached_block_hash_to_block_.end()) return nullptr;
    ++counters_.num_hits;
    return it->second;
}

bool BlockPool::reset_prefix_cache() {
    if (num_free_blocks() != num_blocks()) return false;
    for (auto& [h, b] : cached_block_hash_to_block_) b->block_hash.reset();
    cached_block_hash_to_block_.clear();
    return true;
}

double BlockPool::usage() const {
    return 1.0 - double(num_free_blocks()) / double(num_blocks());
}

}  // namespace kvscope
