// KvCacheManager: prefix hits, slot allocation, freeing, waste, snapshots and invariant checks over
// the BlockPool. Engine thread only.
#include "kv/kv_cache_manager.h"

#include "kv/block_hash.h"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <unordered_set>

namespace kvscope {
namespace {

int cdiv(int a, int b) { return (a + b - 1) / b; }

void check_sizes(int num_blocks, int block_size) {
    if (num_blocks <= 0 || block_size <= 0)
        throw std::invalid_argument("KvCacheManager: num_blocks and block_size must be > 0, got " +
                                    std::to_string(num_blocks) + " and " + std::to_string(block_size));
}

}  // namespace

KvCacheManager::KvCacheManager(int num_blocks, int block_size, bool enable_caching)
    : block_size_(block_size) {
    check_sizes(num_blocks, block_size);
    pool_ = std::make_unique<BlockPool>(num_blocks, enable_caching);
    tokens_filled_.assign(size_t(num_blocks), 0);
}

ComputedBlocks KvCacheManager::get_computed_blocks(Request& request) {
    if (!enable_caching()) return {};
    update_block_hashes(request, block_size_);
    // The last token is always recomputed: its logits sample the next token.
    const int max_hit_blocks = std::max(0, request.num_tokens() - 1) / block_size_;
    const int num_query_blocks = std::min(max_hit_blocks, int(request.block_hashes.size()));
    ComputedBlocks hits;
    if (free_outside_window_) {
        hits.block_ids = find_windowed_hit(request, num_query_blocks);
    } else {
        for (int i = 0; i < num_query_blocks; ++i) {
            KvCacheBlock* b = pool_->get_cached_block(request.block_hashes[size_t(i)]);
            if (!b) break;  // every layer reads every earlier block: the hit ends at the first miss
            hits.block_ids.push_back(b->block_id);
        }
    }
    hits.num_computed_tokens = int(hits.block_ids.size()) * block_size_;
    ++stats_.num_requests;
    stats_.num_query_tokens += request.num_tokens();
    stats_.num_hit_tokens += hits.num_computed_tokens;
    stats_.num_query_blocks += num_query_blocks;
    stats_.num_hit_blocks += int64_t(hits.block_ids.size());
    return hits;
}

// vLLM's SlidingWindowManager::find_longest_cache_hit. A hit that ends at block L needs only what the query
// at L * block_size reads: the last cdiv(window - 1, block_size) blocks before L. Earlier ones may have
// been evicted since a request left them behind; they enter as kNullBlockId (all behind the window, so
// allocate_slots never reads them). Searched from the right for the longest such run; with none, a
// leading run still counts, as nothing before it is missing.
std::vector<int32_t> KvCacheManager::find_windowed_hit(const Request& request, int num_query_blocks) {
    const int num_needed = cdiv(sliding_window_ - 1, block_size_);
    std::vector<int32_t> ids(size_t(num_query_blocks), kNullBlockId);
    int run = 0;
    for (int i = num_query_blocks - 1; i >= 0; --i) {
        const KvCacheBlock* b = pool_->get_cached_block(request.block_hashes[size_t(i)]);
        if (!b) {
            run = 0;
            continue;
        }
        ids[size_t(i)] = b->block_id;
        if (++run >= num_needed) {
            ids.resize(size_t(i + run));
            return ids;
        }
    }
    ids.resize(size_t(run));
    return ids;
}

int KvCacheManager::num_blocks_needed(const Request& request, int num_new_tokens,
                                      const ComputedBlocks& new_computed, int num_lookahead_tokens) const {
    auto it = requests_.find(request.request_id);
    const int num_held = it == requests_.end() ? 0 : int(it->second.blocks.size());
    return num_blocks_beyond(num_held, request, num_new_tokens, new_computed, num_lookahead_tokens);
}

int KvCacheManager::num_blocks_beyond(int num_held, const Request& request, int num_new_tokens,
                                      const ComputedBlocks& new_computed, int num_lookahead_tokens) const {
    const int num_tokens =
        request.num_computed_tokens + new_computed.num_computed_tokens + num_new_tokens + num_lookahead_tokens;
    return std::max(0, cdiv(num_tokens, block_size_) - num_held - int(new_computed.block_ids.size()));
}

void KvCacheManager::set_sliding_window(int sliding_window, bool free_outside_window) {
    if (sliding_window < 0) throw std::invalid_argument("KvCacheManager: sliding_window must be >= 0");
    for (const auto& [id, rb] : requests_)
        if (!rb.blocks.empty())
            throw std::logic_error("KvCacheManager::set_sliding_window: request " + id + " still holds blocks");
    sliding_window_ = sliding_window;
    free_outside_window_ = free_outside_window && sliding_window > 0;
}

// vLLM's remove_skipped_blocks: the first key the next query reads is num_computed_tokens + 1 - window.
int KvCacheManager::num_skipped_blocks(int num_computed_tokens) const {
    if (sliding_window_ <= 0) return 0;
    return std::max(0, num_computed_tokens + 1 - sliding_window_) / block_size_;
}

int KvCacheManager::num_skipped_at_allocate(const Request& request, const ComputedBlocks& new_computed) const {
    return free_outside_window_ ? num_skipped_blocks(request.num_computed_tokens + new_computed.num_computed_tokens) : 0;
}

// Hit blocks with ref_cnt 0 sit in the free queue: touching them takes them out of it. Hits behind the
// window are never touched.
int KvCacheManager::num_evictable_hits(const ComputedBlocks& new_computed, int first_useful) const {
    int n = 0;
    for (size_t i = size_t(std::max(0, first_useful)); i < new_computed.block_ids.size(); ++i)
        n += block_pool().block(new_computed.block_ids[i]).ref_cnt == 0;
    return n;
}

int KvCacheManager::num_reclaimable(const std::string& request_id, int num_skipped) const {
    auto it = requests_.find(request_id);
    if (it == requests_.end()) return 0;
    const RequestBlocks& rb = it->second;
    int n = 0;
    for (int i = rb.num_freed_blocks; i < std::min(num_skipped, int(rb.blocks.size())); ++i)
        n += rb.blocks[size_t(i)]->ref_cnt == 1;
    return n;
}

int KvCacheManager::num_blocks_to_allocate(const Request& request, int num_new_tokens,
                                           const ComputedBlocks& new_computed, int num_lookahead_tokens) const {
    const int num_skipped = num_skipped_at_allocate(request, new_computed);
    return num_blocks_needed(request, num_new_tokens, new_computed, num_lookahead_tokens) +
           num_evictable_hits(new_computed, num_skipped) - num_reclaimable(request.request_id, num_skipped);
}

bool KvCacheManager::can_fit(const Request& request, int num_new_tokens,
                             const ComputedBlocks& new_computed, int num_lookahead_tokens) const {
    return num_blocks_to_allocate(request, num_new_tokens, new_computed, num_lookahead_tokens) <=
           pool_->num_free_blocks();
}

// Blocks wholly before the window go back to the pool tail first, as free() orders a whole table, so a
// prompt's first blocks (the likeliest prefix hits) are evicted last; cached ones stay findable by their
// hash until evicted (a later request with the same prefix can still hit them).
void KvCacheManager::free_skipped_blocks(RequestBlocks& rb, int num_skipped) {
    num_skipped = std::min(num_skipped, int(rb.blocks.size()));
    if (num_skipped <= rb.num_freed_blocks) return;
    std::vector<KvCacheBlock*> freed;
    for (int i = num_skipped - 1; i >= rb.num_freed_blocks; --i) {
        freed.push_back(rb.blocks[size_t(i)]);
        rb.blocks[size_t(i)] = nullptr;
        rb.block_ids[size_t(i)] = kNullBlockId;
    }
    pool_->free_blocks(freed);
    rb.num_freed_blocks = num_skipped;
}

// The scheduler calls this once per running request per step, so it looks the request up once and
// only appends to its table (a decode usually adds nothing: one new block every block_size steps).
bool KvCacheManager::allocate_slots(Request& request, int num_new_tokens, const ComputedBlocks& new_computed,
                                    int num_lookahead_tokens) {
    if (num_new_tokens < 0) throw std::invalid_argument("allocate_slots: num_new_tokens < 0");
    std::vector<KvCacheBlock*> hits = resolve_hits(request, new_computed);
    auto it = requests_.find(request.request_id);
    const int num_computed = request.num_computed_tokens + new_computed.num_computed_tokens;
    const int num_skipped = num_skipped_at_allocate(request, new_computed);
    if (it != requests_.end()) {  // freed even when the rest does not fit: nothing reads them again
        free_skipped_blocks(it->second, num_skipped);
        it->second.num_computed_at_allocate = num_computed;
    }
    const int num_held = it == requests_.end() ? 0 : int(it->second.blocks.size());
    const int num_new_blocks = num_blocks_beyond(num_held, request, num_new_tokens, new_computed, num_lookahead_tokens);
    if (num_new_blocks + num_evictable_hits(new_computed, num_skipped) > pool_->num_free_blocks()) return false;  // can_fit
    if (it == requests_.end()) it = requests_.try_emplace(request.request_id).first;
    RequestBlocks& rb = it->second;
    // Hits behind the window enter the table as null entries: nothing will read them.
    const size_t num_null_hits = std::min(hits.size(), size_t(num_skipped));
    std::span<KvCacheBlock* const> useful_hits = std::span(hits).subspan(num_null_hits);
    if (std::find(useful_hits.begin(), useful_hits.end(), nullptr) != useful_hits.end())
        throw std::logic_error("allocate_slots: request " + request.request_id +
                               " has a missing prefix hit inside the window of its next query");
    // Touch before taking new blocks, or get_new_blocks could evict a hit.
    pool_->touch(useful_hits);
    auto append = [&rb](KvCacheBlock* b) {
        rb.blocks.push_back(b);
        rb.block_ids.push_back(b ? b->block_id : kNullBlockId);
    };
    for (size_t i = 0; i < hits.size(); ++i) append(i < num_null_hits ? nullptr : hits[i]);
    if (num_null_hits > 0) rb.num_freed_blocks = int(num_null_hits);
    if (num_new_blocks > 0)
        for (KvCacheBlock* b : pool_->get_new_blocks(num_new_blocks)) append(b);
    if (!hits.empty()) rb.num_cached_blocks = int(hits.size());
    rb.num_computed_at_allocate = num_computed;
    record_fill(rb, num_computed + num_new_tokens);
    if (enable_caching()) cache_blocks(request, rb, std::min(num_computed + num_new_tokens, request.num_tokens()));
    return true;
}

// Hit blocks come from get_computed_blocks in this step; anything else is a scheduler bug.
std::vector<KvCacheBlock*> KvCacheManager::resolve_hits(const Request& request, const ComputedBlocks& hits) {
    std::vector<KvCacheBlock*> blocks;
    if (hits.block_ids.empty()) return blocks;
    if (!block_table(request.request_id).empty() || request.num_computed_tokens != 0 ||
        hits.num_computed_tokens != int(hits.block_ids.size()) * block_size_ ||
        hits.block_ids.size() > request.block_hashes.size())
        throw std::logic_error("allocate_slots: prefix hits for request " + request.request_id +
                               " that is not new, or hits that do not match its blocks");
    for (size_t i = 0; i < hits.block_ids.size(); ++i) {
        if (hits.block_ids[i] == kNullBlockId) {  // a windowed hit's evicted block, behind the window
            blocks.push_back(nullptr);
            continue;
        }
        KvCacheBlock* b = pool_->block(hits.block_ids[i]);
        if (b->block_hash != request.block_hashes[i])
            throw std::logic_error("allocate_slots: hit block " + std::to_string(b->block_id) + " of request " +
                                   request.request_id + " was evicted since get_computed_blocks");
        blocks.push_back(b);
    }
    return blocks;
}

// Tokens per block for the blocks whose fill changed: from the block of the old fill level onwards.
void KvCacheManager::record_fill(RequestBlocks& rb, int num_filled_tokens) {
    const int first = std::min(rb.num_filled_tokens, num_filled_tokens) / block_size_;
    for (int i = std::max(first, rb.num_freed_blocks); i < int(rb.blocks.size()); ++i)
        tokens_filled_[size_t(rb.block_ids[size_t(i)])] =
            std::clamp(num_filled_tokens - i * block_size_, 0, block_size_);
    rb.num_filled_tokens = num_filled_tokens;
}

void KvCacheManager::cache_blocks(Request& request, RequestBlocks& rb, int num_tokens_to_cache) {
    const int num_full_blocks = num_tokens_to_cache / block_size_;
    if (num_full_blocks <= rb.num_cached_blocks) return;
    // The full check (re-hashing the first block) once per holding of blocks; the block size cannot
    // change until the request is freed, so after that only new blocks are hashed.
    if (rb.hashes_checked) {
        extend_block_hashes(request, block_size_);
    } else {
        update_block_hashes(request, block_size_);
        rb.hashes_checked = true;
    }
    pool_->cache_full_blocks(request, rb.blocks, rb.num_cached_blocks, num_full_blocks, block_size_);
    rb.num_cached_blocks = num_full_blocks;
}

void KvCacheManager::free(const Request& request) {
    auto it = requests_.find(request.request_id);
    if (it == requests_.end()) return;
    std::vector<KvCacheBlock*> tail_first;
    for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b)
        if (*b) tail_first.push_back(*b);  // entries freed behind the window are null
    pool_->free_blocks(tail_first);
    requests_.erase(it);
}

bool KvCacheManager::reset_prefix_cache() { return pool_->reset_prefix_cache(); }

void KvCacheManager::reset(int num_blocks, int block_size) {
    check_sizes(num_blocks, block_size);
    for (const auto& [id, rb] : requests_)
        if (!rb.blocks.empty())
            throw std::logic_error("KvCacheManager::reset: request " + id + " still holds blocks");
    evictions_before_reset_ += pool_->counters().num_evictions;
    pool_ = std::make_unique<BlockPool>(num_blocks, pool_->enable_caching());
    block_size_ = block_size;
    requests_.clear();
    tokens_filled_.assign(size_t(num_blocks), 0);
}

const std::vector<int32_t>& KvCacheManager::block_table(const std::string& request_id) const {
    static const std::vector<int32_t> kEmpty;
    auto it = requests_.find(request_id);
    return it == requests_.end() ? kEmpty : it->second.block_ids;
}

int KvCacheManager::num_cached_free_blocks() const {
    int n = 0;
    for (const auto& [h, b] : pool_->cached_blocks()) n += b->ref_cnt == 0;
    return n;
}

int64_t KvCacheManager::num_reserved_slots() const {
    return int64_t(num_blocks() - num_free_blocks()) * block_size_;
}

int64_t KvCacheManager::num_filled_slots() const {
    int64_t filled = 0;
    for (const KvCacheBlock& b : pool_->blocks())
        if (b.ref_cnt > 0) filled += tokens_filled_[size_t(b.block_id)];
    return filled;
}

double KvCacheManager::kv_waste() const {
    const int64_t reserved = num_reserved_slots();
    return reserved == 0 ? 0.0 : 1.0 - double(num_filled_slots()) / double(reserved);
}

PrefixCacheStats KvCacheManager::prefix_cache_stats() const {
    PrefixCacheStats s = stats_;
    s.num_evictions = evictions_before_reset_ + pool_->counters().num_evictions;
    return s;
}

// ---- snapshot: flat arrays, one pass over blocks, one over the free queue, one over the tables ----

KvCacheSnapshot KvCacheManager::snapshot() const {
    KvCacheSnapshot s;
    snapshot_into(s);
    return s;
}

void KvCacheManager::snapshot_into(KvCacheSnapshot& s) const {
    const int n = num_blocks();
    s.num_blocks = n;
    s.block_size = block_size_;
    s.state.resize(size_t(n));  // resize, not assign: every element is overwritten below
    s.ref_cnt.resize(size_t(n));
    s.tokens_filled.resize(size_t(n));
    s.eviction_order.assign(size_t(n), -1);
    s.block_hash.resize(size_t(n));
    s.owner_offsets.resize(size_t(n) + 1);
    s.owner_offsets[0] = 0;
    int num_in_use = 0, num_cached = 0, num_cached_free = 0;
    int32_t num_owner_entries = 0;
    int64_t num_filled = 0;
    for (const KvCacheBlock& b : pool_->blocks()) {
        const size_t i = size_t(b.block_id);
        const bool in_use = b.ref_cnt > 0, cached = b.block_hash.has_value();
        s.ref_cnt[i] = b.ref_cnt;
        s.block_hash[i] = b.block_hash;
        s.state[i] = in_use ? KvBlockState::IN_USE : cached ? KvBlockState::CACHED_FREE : KvBlockState::FREE;
        s.tokens_filled[i] = in_use ? tokens_filled_[i] : cached ? block_size_ : 0;
        s.owner_offsets[i + 1] = num_owner_entries;  // start of row i for now: fill_owners advances it
        num_owner_entries += b.ref_cnt;
        num_in_use += in_use;
        num_cached += cached;
        num_cached_free += cached && !in_use;
        if (in_use) num_filled += tokens_filled_[i];
    }
    int position = 0;
    pool_->free_block_queue().for_each_free(
        [&](const KvCacheBlock& b) { s.eviction_order[size_t(b.block_id)] = position++; });
    fill_owners(s, num_owner_entries);
    mark_outside_window(s);
    s.num_free_blocks = num_free_blocks();
    s.num_cached_free_blocks = num_cached_free;
    s.num_in_use_blocks = num_in_use;
    s.num_cached_blocks = num_cached;
    s.num_reserved_slots = int64_t(num_in_use) * block_size_;
    s.num_filled_slots = num_filled;
    s.usage = usage();
    s.kv_waste = s.num_reserved_slots ? 1.0 - double(num_filled) / double(s.num_reserved_slots) : 0.0;
    s.prefix_cache_stats = prefix_cache_stats();
}

// An in-use block is behind the window when no holder's next query reads it: clear the mark on every
// entry at or after a holder's first read block. O(table entries).
void KvCacheManager::mark_outside_window(KvCacheSnapshot& s) const {
    s.sliding_window = sliding_window_;
    s.frees_outside_window = free_outside_window_;
    s.outside_window.resize(size_t(s.num_blocks));
    for (int b = 0; b < s.num_blocks; ++b) s.outside_window[size_t(b)] = s.state[size_t(b)] == KvBlockState::IN_USE;
    for (const auto& [id, rb] : requests_) {
        const int first_read = num_skipped_blocks(rb.num_filled_tokens);
        for (size_t i = size_t(first_read); i < rb.block_ids.size(); ++i) s.outside_window[size_t(rb.block_ids[i])] = 0;
    }
    int n = 0;
    for (uint8_t m : s.outside_window) n += m;
    s.num_outside_window_blocks = n;
}

// Compressed owner rows. On entry owner_offsets[b + 1] is the START of block b's row; writing an
// owner advances it, so on exit it is the end of row b = the start of row b + 1 (no cursor array).
void KvCacheManager::fill_owners(KvCacheSnapshot& s, int32_t num_owner_entries) const {
    s.request_ids.clear();
    for (const auto& [id, rb] : requests_)
        if (!rb.blocks.empty()) s.request_ids.push_back(id);
    std::sort(s.request_ids.begin(), s.request_ids.end());
    s.owners.resize(size_t(num_owner_entries));
    for (size_t r = 0; r < s.request_ids.size(); ++r)
        for (int32_t id : requests_.at(s.request_ids[r]).block_ids)
            if (id != kNullBlockId) s.owners[size_t(s.owner_offsets[size_t(id) + 1]++)] = int32_t(r);
}

// ---- invariants: each check returns "" or the first violation it finds ----

namespace {

std::string block_str(int32_t block_id) { return "block " + std::to_string(block_id); }

}  // namespace

std::string KvCacheManager::check_invariants() const {
    for (std::string e : {check_free_queue(), check_tables(), check_prefix_cache(), check_windows()})
        if (!e.empty()) return e;
    return "";
}

// The free queue holds exactly the blocks with ref_cnt 0, once each; free + in-use == total.
std::string KvCacheManager::check_free_queue() const {
    const FreeBlockQueue& q = pool_->free_block_queue();
    std::vector<char> queued(size_t(num_blocks()), 0);
    int count = 0;
    for (const KvCacheBlock* b : q.get_all_free_blocks()) {
        if (b->ref_cnt != 0)
            return block_str(b->block_id) + " is in the free queue with ref_cnt " + std::to_string(b->ref_cnt);
        if (queued[size_t(b->block_id)]++) return block_str(b->block_id) + " is twice in the free queue";
        ++count;
    }
    if (count != q.num_free_blocks())
        return "the free queue links " + std::to_string(count) + " blocks but counts " + std::to_string(q.num_free_blocks());
    int num_in_use = 0;
    for (const KvCacheBlock& b : pool_->blocks()) {
        if (b.ref_cnt < 0) return block_str(b.block_id) + " has ref_cnt " + std::to_string(b.ref_cnt);
        if (b.ref_cnt == 0 && !queued[size_t(b.block_id)]) return block_str(b.block_id) + " has ref_cnt 0 but is not queued";
        num_in_use += b.ref_cnt > 0;
    }
    if (num_in_use + count != num_blocks()) return "free + in-use blocks != num_blocks";
    return "";
}

// ref_cnt == number of tables holding the block; no block twice in one table; fill fits the table.
std::string KvCacheManager::check_tables() const {
    std::vector<int32_t> holders(size_t(num_blocks()), 0);
    for (const auto& [id, rb] : requests_) {
        if (rb.blocks.size() != rb.block_ids.size()) return "request " + id + ": block pointers and ids differ";
        std::unordered_set<int32_t> seen;
        for (size_t i = 0; i < rb.blocks.size(); ++i) {
            const bool freed = int(i) < rb.num_freed_blocks;
            if (freed != (rb.blocks[i] == nullptr) || freed != (rb.block_ids[i] == kNullBlockId))
                return "request " + id + ": table entry " + std::to_string(i) + (freed ? " is not" : " is") +
                       " a null entry, but " + std::to_string(rb.num_freed_blocks) + " leading entries were freed";
            if (freed) continue;
            if (rb.blocks[i]->block_id != rb.block_ids[i])
                return "request " + id + ": table entry " + std::to_string(i) + " disagrees";
            if (!seen.insert(rb.block_ids[i]).second)
                return "request " + id + " holds " + block_str(rb.block_ids[i]) + " twice";
            ++holders[size_t(rb.block_ids[i])];
        }
        if (int64_t(rb.num_filled_tokens) > int64_t(rb.blocks.size()) * block_size_)
            return "request " + id + " fills more tokens than its blocks hold";
    }
    for (const KvCacheBlock& b : pool_->blocks())
        if (b.ref_cnt != holders[size_t(b.block_id)])
            return block_str(b.block_id) + " has ref_cnt " + std::to_string(b.ref_cnt) + " but " +
                   std::to_string(holders[size_t(b.block_id)]) + " tables hold it";
    return "";
}

// Blocks are freed only behind the window of the request's next query (so no kernel reads a null entry
// or a block that another request reuses), and only when every layer is windowed.
std::string KvCacheManager::check_windows() const {
    for (const auto& [id, rb] : requests_) {
        if (rb.num_freed_blocks > 0 && !free_outside_window_)
            return "request " + id + " has freed blocks, but the model has layers without a sliding window";
        if (rb.num_freed_blocks > num_skipped_blocks(rb.num_computed_at_allocate))
            return "request " + id + " freed " + std::to_string(rb.num_freed_blocks) + " blocks, but its window at " +
                   std::to_string(rb.num_computed_at_allocate) + " computed tokens still reads block " +
                   std::to_string(num_skipped_blocks(rb.num_computed_at_allocate));
    }
    return "";
}

// The map and the blocks' hashes agree both ways (map[h] == b exactly when b.block_hash == h).
std::string KvCacheManager::check_prefix_cache() const {
    const auto& map = pool_->cached_blocks();
    if (!enable_caching() && !map.empty()) return "caching is off but the prefix cache has entries";
    for (const auto& [h, b] : map)
        if (b->block_hash != h) return "a cached hash maps to " + block_str(b->block_id) + ", whose hash differs";
    for (const KvCacheBlock& b : pool_->blocks()) {
        if (!b.block_hash) continue;
        auto it = map.find(*b.block_hash);
        if (it == map.end() || it->second != &b)
            return block_str(b.block_id) + " has a hash that the prefix cache does not map to it";
    }
    return "";
}

}  // namespace kvscope
