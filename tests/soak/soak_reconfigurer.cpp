#include "soak_reconfigurer.h"

#include "kv/kv_cache_dtype.h"
#include "kv_cache_layout.h"
#include "util/errors.h"

#include <algorithm>
#include <vector>

namespace kvscope::soak {

namespace {

const std::vector<int> kMaxNumSeqs = {1, 2, 4, 8, 16, 32, 64, 64, 256, 256};
const std::vector<int> kMaxNumBatchedTokens = {8, 16, 32, 64, 128, 256, 512, 512, 2048, 2048};

template <class T>
T pick(std::mt19937_64& rng, const std::vector<T>& items) {
    return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng)];
}

bool chance(std::mt19937_64& rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

DType resolve(const EngineConfig& c, const ModelConfig& model) {
    // The CPU backend holds every KV type.
    return resolve_kv_cache_dtype(c.kv_cache_dtype, model.weight_dtype, std::string(to_string(c.backend)), [](DType) { return true; });
}

int64_t bytes_per_block(const ModelConfig& m, int block_size, DType dtype) {
    return static_cast<int64_t>(KvCacheLayout::bytes_per_block(m.num_layers, m.num_kv_heads, m.head_dim, block_size, dtype));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The blocks an unfinished request needs in a pool of `c` (LlmEngine::check_fits_pool's rule, as
// llm_engine.h states the contract: naive mode reserves max_model_len for every request).
int64_t blocks_needed(const Request& r, const EngineConfig& c) {
    const int max_len = c.scheduler.max_model_len;
    const int64_t tokens = c.mode == BatchingMode::NAIVE ? max_len
                                             : std::min<int64_t>(max_len, int64_t{r.num_prompt_tokens} + r.sampling_params.max_tokens);
    return ceil_div(tokens, c.block_size);
}

std::vector<const Request*> unfinished(const LlmEngine& engine) {
    std::vector<const Request*> out(engine.scheduler().running().begin(), engine.scheduler().running().end());
    out.insert(out.end(), engine.scheduler().waiting().begin(), engine.scheduler().waiting().end());
    return out;
}

}  // namespace

Reconfiguration Reconfigurer::choose(const LlmEngine& engine) {
    Reconfiguration r = chance(rng_, 0.15) ? impossible(engine) : random(engine);
    predict(engine, r);
    return r;
}

Reconfiguration Reconfigurer::impossible(const LlmEngine& engine) {
    const ModelConfig& model = engine.model().config;
    Reconfiguration r;
    r.config = engine.config();
    EngineConfig& c = r.config;
    const int max_len = c.scheduler.max_model_len;
    int64_t longest = 0;
    for (const Request* q : unfinished(engine)) {
        EngineConfig paged = c;
        paged.mode = BatchingMode::PAGED;
        longest = std::max(longest, blocks_needed(*q, paged));
    }
    std::vector<int> kinds = {2, 3, 4};
    if (longest >= 2) kinds.push_back(0), kinds.push_back(0);
    if (longest >= 1 && ceil_div(max_len, c.block_size) >= 2) kinds.push_back(1), kinds.push_back(1);
    switch (pick(rng_, kinds)) {
    case 0:
        c.mode = BatchingMode::PAGED;
        c.num_blocks = static_cast<int>(longest - 1);
        c.kv_cache_memory = 0;
        r.what = "a pool of " + std::to_string(c.num_blocks) + " blocks, one short of the longest unfinished request";
        break;
    case 1:
        c.mode = BatchingMode::NAIVE;
        c.num_blocks = static_cast<int>(ceil_div(max_len, c.block_size) - 1);
        c.kv_cache_memory = 0;
        r.what = "naive mode with " + std::to_string(c.num_blocks) + " blocks, fewer than one request reserves";
        break;
    case 2:
        c.num_blocks = 0;
        c.kv_cache_memory = bytes_per_block(model, c.block_size, resolve(c, model)) - 1;
        r.what = "a KV budget of " + std::to_string(c.kv_cache_memory) + " bytes, less than one block";
        break;
    case 3:
        c.block_size = 48;
        r.what = "block_size 48 (not a power of two)";
        break;
    default:
        c.scheduler.max_num_seqs = 0;
        r.what = "max_num_seqs 0";
        break;
    }
    return r;
}

Reconfiguration Reconfigurer::random(const LlmEngine& engine) {
    const ModelConfig& model = engine.model().config;
    Reconfiguration r;
    r.config = engine.config();
    EngineConfig& c = r.config;
    SchedulerConfig& s = c.scheduler;
    s.max_num_seqs = pick(rng_, kMaxNumSeqs);
    s.max_num_batched_tokens = pick(rng_, kMaxNumBatchedTokens);
    s.long_prefill_token_threshold = pick<int>(rng_, {0, 0, 0, 8, 32, 128});
    s.policy = chance(rng_, 0.5) ? SchedulerPolicy::PRIORITY : SchedulerPolicy::FCFS;
    r.what = "max_num_seqs " + std::to_string(s.max_num_seqs) + ", max_num_batched_tokens " +
             std::to_string(s.max_num_batched_tokens) + ", " + std::string(to_string(s.policy));
    if (chance(rng_, 0.3)) return r;  // scheduler knobs only: no rebuild

    // The pool: block size, mode, element type, prefix caching and a budget sized in requests of
    // max_model_len tokens (now and then half of one: then longer requests are refused until the next change).
    const int max_len = s.max_model_len;
    c.block_size = pick<int>(rng_, {1, 2, 4, 8, 16, 16, 32, 64});
    c.mode = chance(rng_, 0.2) ? BatchingMode::NAIVE : BatchingMode::PAGED;
    c.kv_cache_dtype = pick<std::string>(rng_, {"auto", "float32", "float16"});
    s.enable_prefix_caching = chance(rng_, 0.5);
    const double requests = c.mode == BatchingMode::NAIVE ? pick<double>(rng_, {1, 2, 4, 8}) : pick<double>(rng_, {0.5, 1, 2, 4, 8, 16});
    const int64_t blocks = std::max<int64_t>(1, static_cast<int64_t>(requests * static_cast<double>(ceil_div(max_len, c.block_size))));
    if (chance(rng_, 0.5)) {
        c.num_blocks = static_cast<int>(blocks);
        c.kv_cache_memory = 0;
    } else {
        const int64_t per_block = bytes_per_block(model, c.block_size, resolve(c, model));
        c.num_blocks = 0;
        c.kv_cache_memory = blocks * per_block + std::uniform_int_distribution<int64_t>(0, per_block - 1)(rng_);
    }
    r.what += ", " + std::string(to_string(c.mode)) + ", block_size " + std::to_string(c.block_size) + ", " +
              (c.num_blocks ? std::to_string(c.num_blocks) + " blocks" : std::to_string(c.kv_cache_memory) + " bytes") + ", " +
              c.kv_cache_dtype + (s.enable_prefix_caching ? ", prefix caching" : "");
    return r;
}

EngineConfig Reconfigurer::widest(EngineConfig c) {
    c.scheduler.max_num_seqs = *std::max_element(kMaxNumSeqs.begin(), kMaxNumSeqs.end());
    c.scheduler.max_num_batched_tokens = *std::max_element(kMaxNumBatchedTokens.begin(), kMaxNumBatchedTokens.end());
    return c;
}

void Reconfigurer::predict(const LlmEngine& engine, Reconfiguration& r) {
    const EngineConfig& next = r.config;
    const EngineConfig& now = engine.config();
    const ModelConfig& model = engine.model().config;
    r.must_refuse = true;
    r.expected_num_blocks = engine.num_blocks();
    DType dtype;
    try {
        next.validate();
        dtype = resolve(next, model);
    } catch (const BadInput&) {
        return;
    }
    if (next.scheduler.max_model_len != now.scheduler.max_model_len) return;
    const bool rebuild = next.block_size != now.block_size || next.kv_cache_memory != now.kv_cache_memory ||
                         next.num_blocks != now.num_blocks || next.mode != now.mode || dtype != engine.kv_cache_dtype() ||
                         next.scheduler.enable_prefix_caching != now.scheduler.enable_prefix_caching;
    if (rebuild) {
        int64_t n = next.num_blocks;
        if (n == 0) {
            const int64_t budget = next.kv_cache_memory > 0
                                       ? next.kv_cache_memory
                                       : default_kv_cache_memory(model.kv_bytes_per_token(dtype), next.scheduler.max_num_seqs,
                                                                 next.scheduler.max_model_len);
            n = std::min<int64_t>(budget / bytes_per_block(model, next.block_size, dtype), int64_t{1} << 24);
            if (n < 1) return;
        }
        for (const Request* q : unfinished(engine))
            if (blocks_needed(*q, next) > n) return;
        r.expected_num_blocks = static_cast<int>(n);
    }
    r.must_refuse = false;
}

std::string Reconfigurer::differs(const EngineConfig& a, const EngineConfig& b) {
    const SchedulerConfig& x = a.scheduler;
    const SchedulerConfig& y = b.scheduler;
    if (x.max_num_seqs != y.max_num_seqs) return "max_num_seqs";
    if (x.max_num_batched_tokens != y.max_num_batched_tokens) return "max_num_batched_tokens";
    if (x.policy != y.policy) return "policy";
    if (x.enable_prefix_caching != y.enable_prefix_caching) return "enable_prefix_caching";
    if (x.max_model_len != y.max_model_len) return "max_model_len";
    if (x.long_prefill_token_threshold != y.long_prefill_token_threshold) return "long_prefill_token_threshold";
    if (a.block_size != b.block_size) return "block_size";
    if (a.kv_cache_memory != b.kv_cache_memory) return "kv_cache_memory";
    if (a.num_blocks != b.num_blocks) return "num_blocks";
    if (a.mode != b.mode) return "mode";
    if (a.kv_cache_dtype != b.kv_cache_dtype) return "kv_cache_dtype";
    if (a.num_threads != b.num_threads) return "num_threads";
    if (a.backend != b.backend) return "backend";
    if (a.seed != b.seed) return "seed";
    if (a.enforce_eager != b.enforce_eager) return "enforce_eager";
    if (a.check_invariants != b.check_invariants) return "check_invariants";
    return "";
}

}  // namespace kvscope::soak
