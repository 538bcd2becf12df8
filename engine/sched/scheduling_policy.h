// Scheduling policies as separate pieces, not branches in schedule(): the order of the waiting queue,
// where a request enters it (on arrival, and after preemption), the preemption victim, and whether a
// waiting request may take a running one's seat.
#pragma once

#include "sched/request.h"
#include "sched/scheduler_config.h"

#include <deque>
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
    // Index in `waiting` (kept in this policy's order) at which a new request enters, and at which a
    // request preempted by recompute waits again. Both default to policy order: after every waiting
    // request served before it (O(log n) compares).
    virtual size_t arrival_position(const std::deque<Request*>& waiting, const Request& request) const;
    virtual size_t requeue_position(const std::deque<Request*>& waiting, const Request& preempted) const;
    // Index into running of the request to preempt when KV memory runs out.
    virtual size_t pick_victim(const std::vector<Request*>& running) const = 0;
    // Whether a waiting request that is served before a running one may preempt it when max_num_seqs
    // is the bottleneck (vLLM does not do this: vllm#40004).
    virtual bool preempts_for_seats() const = 0;
};

// fcfs: arrival order; new requests join the back, and the victim, the last admitted, waits again at
// the front (it was admitted before anything still waiting).
// priority: lower priority value first, then earlier arrival; the victim is the lowest priority,
// latest arrival, and waits again in policy order.
std::unique_ptr<SchedulingPolicy> make_policy(SchedulerPolicy policy);

}  // namespace kvscope
