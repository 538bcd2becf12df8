// Continuous batching over the paged KV cache (vLLM v1's scheduler). There is no prefill or decode
// phase: each request's num_computed_tokens catches up with its num_tokens, within one token budget per
// step. Running requests go first (decodes and unfinished prefill chunks), then waiting ones are
// admitted while seats, budget and blocks last; chunked prefill falls out of the budget.
#pragma once

#include "sched/scheduler.h"

namespace kvscope {

class ContinuousScheduler final : public Scheduler {
public:
    using Scheduler::Scheduler;
    std::string_view mode() const override { return "paged"; }
    SchedulerOutput schedule() override;

private:
    int chunk_size(const Request& r, int budget) const;
    void schedule_running(SchedulerOutput& out, int& budget);
    void schedule_waiting(SchedulerOutput& out, int& budget);
    void take_seats_by_priority(SchedulerOutput& out);
};

}  // namespace kvscope
