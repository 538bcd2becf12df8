// Per-request timestamps (monotonic seconds since the engine started) and the latency figures derived
// from them with vLLM's definitions (docs/DESIGN.md section 3).
#pragma once

#include "sched/request.h"

#include <string>
#include <vector>

namespace kvscope {

struct RequestMetrics {
    std::string request_id;
    int priority = 0;
    int num_prompt_tokens = 0;
    int num_output_tokens = 0;
    int num_cached_tokens = 0;   // prompt tokens served from the prefix cache
    int num_preemptions = 0;
    FinishReason finish_reason = FinishReason::NONE;
    double arrival_time = 0;
    double first_scheduled_time = -1;
    // Start of each step that ran a prompt chunk of it (chunked prefill) or a recompute chunk after a
    // preemption: with preemption_times and token_times this gives the request's phases over time.
    std::vector<double> prefill_chunk_times;
    std::vector<double> preemption_times;  // every preemption, also the drain of a pool rebuild
    std::vector<double> token_times;  // one per output token
    double finish_time = -1;

    bool has_first_token() const { return !token_times.empty(); }
    double ttft() const { return token_times.empty() ? -1 : token_times.front() - arrival_time; }
    double e2el() const { return finish_time - arrival_time; }
    double queue_time() const { return first_scheduled_time < 0 ? -1 : first_scheduled_time - arrival_time; }
    // (E2EL - TTFT) / (output tokens - 1); -1 when there is no second token.
    double tpot() const {
        return num_output_tokens > 1 ? (e2el() - ttft()) / (num_output_tokens - 1) : -1;
    }
    // Every gap between consecutive tokens.
    std::vector<double> itls() const {
        std::vector<double> out;
        for (size_t i = 1; i < token_times.size(); ++i) out.push_back(token_times[i] - token_times[i - 1]);
        return out;
    }
};

}  // namespace kvscope
