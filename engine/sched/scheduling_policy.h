// Scheduling policies as separate pieces, not branches in schedule(): the order of the waiting queue,
// the preemption victim, and whether a waiting request may take a running one's seat.
#pragma once

#include "sched/request.h"

#include <memory>
#include <string_view>
#include <vector>

namespace kvscope {

class SchedulingPolicy {
public:
    virtual ~SchedulingPolicy() = default;
    virtual std::string_view name() const = 0;
    // True when a is served before b.
    virtual bool before(const Request& a, const Request& b) const = 0;
    // Index into running of the request to preempt when KV memory runs out.
    virtual size_t pick_victim(const std::vector<Request*>& running) const = 0;
    // Whether a waiting request that is served before a running one may preempt it when max_num_seqs
    // is the bottleneck (vLLM does not do this: vllm#40004).
    virtual bool preempts_for_seats() const = 0;
};

// fcfs: arrival order; the victim is the last admitted.
// priority: lower priority value first, then earlier arrival; the victim is the lowest priority,
// latest arrival.
std::unique_ptr<SchedulingPolicy> make_policy(std::string_view name);  // throws BadInput for unknown names

}  // namespace kvscope
