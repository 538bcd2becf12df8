// The reconfigurations of kvscope-soak: random engine configurations (block_size, max_num_seqs,
// max_num_batched_tokens, long_prefill_token_threshold, mode paged/naive, KV budget as num_blocks or
// kv_cache_memory, prefix caching, KV dtype float32/float16, policy), and now and then one the engine
// must refuse (a pool one block short of the longest unfinished request, naive mode with fewer blocks
// than one request reserves, a budget that holds no block, an invalid knob). For each it also says what
// LlmEngine::reconfigure must do, worked out from the engine's state on the engine thread by the
// contract in llm_engine.h (refuse, changing nothing, exactly when the configuration is invalid or its
// new pool cannot hold every unfinished request), so that the harness can check the engine kept it.
// choose() runs on the engine thread (EngineLoop::reconfigure); one Reconfigurer per thread.
#pragma once

#include "llm_engine.h"

#include <cstdint>
#include <random>
#include <string>

namespace kvscope::soak {

struct Reconfiguration {
    EngineConfig config;
    bool must_refuse = false;
    int expected_num_blocks = 0;  // when accepted
    std::string what;             // a short description for messages
};

class Reconfigurer {
public:
    // Each change starts from the engine's configuration of the moment (so max_model_len, threads, seed
    // and check_invariants stay).
    explicit Reconfigurer(uint64_t seed) : rng_(seed) {}

    // The next configuration to try, from the engine's state now. Engine thread.
    Reconfiguration choose(const LlmEngine& engine);

    // What the contract says `engine` must do with `config`: must_refuse and expected_num_blocks.
    static void predict(const LlmEngine& engine, Reconfiguration& r);

    // `config` with the largest scheduler knobs that choose() picks: applied once at start, it grows the
    // model runner's buffers (which never shrink) to their size for the whole run.
    static EngineConfig widest(EngineConfig config);

    // "" when `engine`'s configuration equals `config` in every knob, else the first knob that differs.
    static std::string differs(const EngineConfig& engine, const EngineConfig& config);

private:
    Reconfiguration impossible(const LlmEngine& engine);
    Reconfiguration random(const LlmEngine& engine);

    std::mt19937_64 rng_;
};

}  // namespace kvscope::soak
