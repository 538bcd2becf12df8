// What the scheduler decided for one step: which requests run how many new tokens, and what happened
// on the way (preemptions), for the model runner and the per-step metrics.
#pragma once

#include "sched/request.h"

#include <vector>

namespace kvscope {

struct ScheduledRequest {
    Request* request = nullptr;
    int num_new_tokens = 0;       // tokens of all_token_ids from request->num_computed_tokens on
    bool is_prefill = false;      // the chunk holds prompt tokens (first scheduling or recompute)
    bool samples = false;         // the chunk reaches the last known token: a new token is sampled
};

// Rows a static batch computes and throws away (the naive baseline's padding): they run through every
// layer and attend over `context`'s cached tokens (read only: they own no slot), the cost a padded batch
// row pays, and are never sampled.
struct PaddingRows {
    const Request* context = nullptr;  // a running request whose num_computed_tokens (>= 1) they attend over
    int num_tokens = 0;
};

struct SchedulerOutput {
    std::vector<ScheduledRequest> scheduled;
    std::vector<PaddingRows> padding;    // naive mode only
    std::vector<Request*> preempted;     // preempted during this schedule() call
    int num_prefill_tokens = 0;
    int num_decode_tokens = 0;
    int num_padding_tokens = 0;
    int total_num_tokens() const { return num_prefill_tokens + num_decode_tokens + num_padding_tokens; }
};

}  // namespace kvscope
