// Property test of the KV cache bookkeeping: thousands of random scheduler-like operations (admit
// with prefix hits and chunked prefill, decode, preempt, finish, drain-and-rebuild) over block sizes
// 1..256 with caching on and off. A shadow of every slot's token stands in for the real K/V: every
// running request must read back exactly its own tokens, and every cached hash must name a block that
// holds exactly the tokens it was hashed from. check_invariants() runs after every operation.
#include "test_support.h"

#include "kv/block_hash.h"
#include "kv/kv_cache_manager.h"

#include <deque>
#include <map>
#include <optional>
#include <random>
#include <unordered_map>

using namespace kvscope;

namespace {

struct HashedBlock {
    std::optional<BlockHash> parent;
    std::vector<int32_t> tokens;
};

class KvCacheSim {
public:
    KvCacheSim(uint64_t seed, int block_size, bool caching) : rng_(seed), caching_(caching) {
        rebuild(block_size);
        for (int p = 0; p < 3; ++p) prefixes_.push_back(random_tokens(uniform(max_len_ / 4, max_len_ * 2 / 3)));
    }

    // One random operation; returns "" or what went wrong.
    std::string step() {
        const int op = uniform(0, 99);
        std::string err;
        if (op < 20) add_request();
        else if (op < 45) err = admit_one();
        else if (op < 90) err = advance_running();
        else if (op < 96) err = finish_random();
        else if (op < 98) err = preempt(running_.empty() ? -1 : pick_running());
        else if (op < 99) kv_->reset_prefix_cache();  // refused unless idle
        else err = drain_and_rebuild();
        if (err.empty()) err = kv_->check_invariants();
        if (err.empty()) err = check_contents();
        return err;
    }

    std::string drain() {
        while (!running_.empty()) {
            auto it = running_.begin();
            kv_->free(it->second);
            running_.erase(it);
        }
        KvCacheSnapshot s = kv_->snapshot();
        if (s.num_free_blocks != s.num_blocks || s.num_in_use_blocks != 0) return "blocks still in use after the drain";
        for (KvBlockState st : s.state)
            if (st == KvBlockState::IN_USE) return "a block is IN_USE after the drain";
        return kv_->check_invariants();
    }

    int64_t hits() const { return kv_->prefix_cache_stats().num_hit_tokens; }
    int64_t evictions() const { return kv_->prefix_cache_stats().num_evictions; }

private:
    int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

    std::vector<int32_t> random_tokens(int n) {
        std::vector<int32_t> t;
        for (int i = 0; i < n; ++i) t.push_back(uniform(0, 999));
        return t;
    }

    void rebuild(int block_size) {
        bs_ = block_size;
        max_len_ = std::max(48, 6 * bs_);
        const int max_req_blocks = (max_len_ + bs_ - 1) / bs_;
        const int num_blocks = uniform(max_req_blocks + 1, 4 * max_req_blocks);
        if (!kv_) kv_ = std::make_unique<KvCacheManager>(num_blocks, bs_, caching_);
        else kv_->reset(num_blocks, bs_);
        shadow_.assign(size_t(num_blocks), std::vector<int32_t>(size_t(bs_), -1));
        hashed_.clear();
    }

    void add_request() {
        Request r;
        r.request_id = "r" + std::to_string(next_id_++);
        std::vector<int32_t> prompt;
        if (!prompts_.empty() && uniform(0, 4) == 0) {
            prompt = prompts_[size_t(uniform(0, int(prompts_.size()) - 1))];  // exact repeat: all hit
        } else {
            const auto& prefix = prefixes_[size_t(uniform(0, int(prefixes_.size()) - 1))];
            prompt.assign(prefix.begin(), prefix.begin() + uniform(0, int(prefix.size())));
            for (int32_t t : random_tokens(uniform(prompt.empty() ? 1 : 0, max_len_ / 4))) prompt.push_back(t);
        }
        prompts_.push_back(prompt);
        if (uniform(0, 9) == 0) r.cache_salt = "tenant-" + std::to_string(uniform(0, 1));
        r.all_token_ids = prompt;
        r.num_prompt_tokens = int(prompt.size());
        r.sampling_params.max_tokens = uniform(1, std::max(1, max_len_ - r.num_prompt_tokens));
        waiting_.push_back(std::move(r));
    }

    // A waiting request: prefix hits, then a prefill chunk. Refusal must change nothing.
    std::string admit_one() {
        if (waiting_.empty()) return "";
        Request r = std::move(waiting_.front());
        waiting_.pop_front();
        ComputedBlocks hits = kv_->get_computed_blocks(r);
        if (!caching_ && !hits.block_ids.empty()) return "hits with caching off";
        if (hits.num_computed_tokens >= r.num_tokens()) return "the last token was not left to recompute";
        const int chunk = uniform(1, r.num_tokens() - hits.num_computed_tokens);
        const bool fits = kv_->can_fit(r, chunk, hits);
        const int free_before = kv_->num_free_blocks();
        if (kv_->allocate_slots(r, chunk, hits) != fits) return "can_fit disagrees with allocate_slots";
        if (!fits) {
            if (kv_->num_free_blocks() != free_before || !kv_->block_table(r.request_id).empty())
                return "a refused allocate_slots changed state";
            waiting_.push_front(std::move(r));
            return "";
        }
        std::string err = compute(r, hits.num_computed_tokens, hits.num_computed_tokens + chunk);
        running_.emplace(r.request_id, std::move(r));
        return err;
    }

    // A running request: finish or sample a token when caught up, then compute a chunk.
    std::string advance_running() {
        if (running_.empty()) return "";
        Request& r = running_.at(pick_running_id());
        if (r.num_computed_tokens == r.num_tokens()) {
            if (r.num_output_tokens() >= r.sampling_params.max_tokens) return finish(r.request_id);
            r.all_token_ids.push_back(uniform(0, 999));  // the sampled token
        }
        const int chunk = uniform(1, r.num_tokens() - r.num_computed_tokens);
        if (!kv_->allocate_slots(r, chunk)) return preempt(int(running_.size()) - 1);
        return compute(r, r.num_computed_tokens, r.num_computed_tokens + chunk);
    }

    // "Runs the model": writes tokens [begin, end) into their slots, then records the new hashes.
    std::string compute(Request& r, int begin, int end) {
        const auto& table = kv_->block_table(r.request_id);
        if (int64_t(table.size()) * bs_ < end) return "block table too short for " + r.request_id;
        for (int p = begin; p < end; ++p) {
            const int32_t block = table[size_t(p / bs_)];
            if (kv_->block_pool().block(block).ref_cnt != 1) return "writing into a shared block " + std::to_string(block);
            shadow_[size_t(block)][size_t(p % bs_)] = r.all_token_ids[size_t(p)];
        }
        r.num_computed_tokens = end;
        if (caching_) update_block_hashes(r, bs_);
        for (size_t j = 0; j < r.block_hashes.size(); ++j) {
            HashedBlock hb{j ? std::optional<BlockHash>(r.block_hashes[j - 1]) : std::nullopt,
                           {r.all_token_ids.begin() + long(j) * bs_, r.all_token_ids.begin() + long(j + 1) * bs_}};
            auto [it, inserted] = hashed_.try_emplace(r.block_hashes[j], hb);
            if (!inserted && (it->second.tokens != hb.tokens || it->second.parent != hb.parent))
                return "64-bit block hash collision (or a hashing bug)";
        }
        return "";
    }

    std::string finish(std::string id) {  // by value: callers pass the erased request's own id
        kv_->free(running_.at(id));
        running_.erase(id);
        return kv_->block_table(id).empty() ? "" : "freed request still has a block table";
    }

    std::string finish_random() { return running_.empty() ? "" : finish(pick_running_id()); }

    // Preemption by recompute: free everything, start over from the waiting queue's front.
    std::string preempt(int index) {
        if (index < 0) return "";
        auto it = std::next(running_.begin(), index);
        Request r = std::move(it->second);
        running_.erase(it);
        kv_->free(r);
        r.num_computed_tokens = 0;
        ++r.num_preemptions;
        waiting_.push_front(std::move(r));
        return "";
    }

    // The engine's drain-and-rebuild when the block size or KV budget changes.
    std::string drain_and_rebuild() {
        while (!running_.empty()) preempt(0);
        const int new_bs = std::clamp(uniform(0, 1) ? bs_ * 2 : bs_ / 2, 1, 256);
        try {
            rebuild(new_bs);
        } catch (const std::exception& e) {
            return std::string("reset failed: ") + e.what();
        }
        return "";
    }

    int pick_running() { return uniform(0, int(running_.size()) - 1); }
    std::string pick_running_id() { return std::next(running_.begin(), pick_running())->first; }

    // Every running request reads back its own tokens; every cached hash names its own tokens.
    std::string check_contents() const {
        for (const auto& [id, r] : running_) {
            const auto& table = kv_->block_table(id);
            for (int p = 0; p < r.num_computed_tokens; ++p)
                if (shadow_[size_t(table[size_t(p / bs_)])][size_t(p % bs_)] != r.all_token_ids[size_t(p)])
                    return id + " reads a wrong token at position " + std::to_string(p);
        }
        for (const auto& [h, block] : kv_->block_pool().cached_blocks()) {
            auto it = hashed_.find(h);
            if (it == hashed_.end()) return "a cached hash that no request produced";
            if (shadow_[size_t(block->block_id)] != it->second.tokens)
                return "cached block " + std::to_string(block->block_id) + " does not hold its hash's tokens";
            if (it->second.parent && !hashed_.count(*it->second.parent)) return "a cached hash with an unknown parent";
        }
        return "";
    }

    std::mt19937_64 rng_;
    bool caching_;
    int bs_ = 0;
    int max_len_ = 0;
    std::unique_ptr<KvCacheManager> kv_;
    std::vector<std::vector<int32_t>> shadow_;  // [num_blocks][block_size]: token last written per slot
    std::unordered_map<BlockHash, HashedBlock> hashed_;
    std::vector<std::vector<int32_t>> prefixes_, prompts_;
    std::deque<Request> waiting_;
    std::map<std::string, Request> running_;  // by id; the preemption victim is simply the last id
    int next_id_ = 0;
};

}  // namespace

class TestKvCacheProperty : public QObject {
    Q_OBJECT
private slots:
    void randomOperations_data() {
        QTest::addColumn<int>("block_size");
        QTest::addColumn<bool>("caching");
        for (int bs = 1; bs <= 256; bs *= 2)
            for (bool caching : {true, false})
                QTest::addRow("block_size %d caching %s", bs, caching ? "on" : "off") << bs << caching;
    }
    void randomOperations() {
        QFETCH(int, block_size);
        QFETCH(bool, caching);
        const uint64_t seed = test::test_seed(20240611);  // each case mixes in its own parameters
        KvCacheSim sim(seed ^ (uint64_t(block_size) << 1 | caching), block_size, caching);
        const int num_ops = 6000;  // ~1 s in Release, ~10 s under ASan+UBSan
        for (int i = 0; i < num_ops; ++i) {
            const std::string err = sim.step();
            if (!err.empty()) QFAIL(qPrintable(QString("op %1: %2").arg(i).arg(QString::fromStdString(err))));
        }
        const std::string err = sim.drain();
        QVERIFY2(err.empty(), err.c_str());
        if (caching) QVERIFY2(sim.hits() > 0, "shared prefixes never hit: the test exercises nothing");
        qInfo("hit tokens %lld, evictions %lld", (long long)sim.hits(), (long long)sim.evictions());
    }
};

QTEST_GUILESS_MAIN(TestKvCacheProperty)
#include "test_kv_cache_property.moc"
