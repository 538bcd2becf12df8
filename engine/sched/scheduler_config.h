// The scheduler's knobs (vLLM's names). All of them may change between steps (live reconfiguration);
// block_size and the KV budget live in the engine config because changing them rebuilds the pool.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace kvscope {

// vLLM's --scheduling-policy. fcfs: arrival order; priority: lower priority value first.
enum class SchedulerPolicy { FCFS, PRIORITY };
std::string_view to_string(SchedulerPolicy policy);  // "fcfs" | "priority"
// Throws BadInput naming the value.
SchedulerPolicy parse_scheduler_policy(std::string_view name);

struct SchedulerConfig {
    int max_num_seqs = 256;             // running requests at most
    int max_num_batched_tokens = 2048;  // token budget of one step (prefill chunks + decodes)
    SchedulerPolicy policy = SchedulerPolicy::FCFS;
    bool enable_prefix_caching = false;
    int max_model_len = 2048;           // prompt + output tokens of one request at most
    // Head-of-line guard: while other requests wait, a prefill chunk takes at most this many tokens
    // (0 = a quarter of the token budget). vLLM's long_prefill_token_threshold.
    int long_prefill_token_threshold = 0;

    // Throws BadInput naming the knob and value.
    void validate() const;
    int prefill_chunk_cap() const {
        return long_prefill_token_threshold > 0 ? long_prefill_token_threshold
                                                : std::max(1, max_num_batched_tokens / 4);
    }
};

}  // namespace kvscope
