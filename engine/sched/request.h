// A request as the scheduler and the KV cache manager see it (vLLM v1's Request). Owned by the engine
// thread; the UI only ever receives value snapshots of it.
//
// num_computed_tokens catches up with num_tokens() each step: there is no prefill or decode phase.
// Prompt tokens and output tokens are stored together in all_token_ids (prompt first).
#pragma once

#include "sched/sampling_params.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

enum class RequestStatus { WAITING, RUNNING, PREEMPTED, FINISHED };
enum class FinishReason { NONE, STOP, LENGTH, ABORT, ERROR };

std::string_view to_string(RequestStatus s);
std::string_view to_string(FinishReason r);

// Chained hash of one full block: hash(parent block hash, the block's token ids, extra keys).
using BlockHash = uint64_t;

struct Request {
    std::string request_id;
    std::vector<int32_t> all_token_ids;  // prompt + output
    int num_prompt_tokens = 0;
    int num_computed_tokens = 0;  // tokens whose K/V are in the cache
    int num_cached_tokens = -1;   // prefix-cache hit tokens at first scheduling (-1: not scheduled yet)
    SamplingParams sampling_params;
    int priority = 0;         // lower value = scheduled first (vLLM's convention)
    double arrival_time = 0;  // seconds, monotonic
    uint64_t arrival_seq = 0; // tie-break: submission order
    std::string cache_salt;   // extra key of the first block hash: isolates prefix-cache users
    RequestStatus status = RequestStatus::WAITING;
    FinishReason finish_reason = FinishReason::NONE;
    int num_preemptions = 0;

    // Hashes of the full blocks of all_token_ids for the current block size, extended as tokens arrive
    // (owned by the KV cache manager, which recomputes them when the block size changes).
    std::vector<BlockHash> block_hashes;

    int num_tokens() const { return static_cast<int>(all_token_ids.size()); }
    int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
    bool is_finished() const { return status == RequestStatus::FINISHED; }
    std::vector<int32_t> output_token_ids() const {
        return {all_token_ids.begin() + num_prompt_tokens, all_token_ids.end()};
    }
};

}  // namespace kvscope
