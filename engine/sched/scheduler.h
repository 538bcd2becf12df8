// The scheduler's shared state: the waiting queue (ordered by the policy), the running list, and the
// rules every mode keeps: preemption by recompute (the victim's blocks are freed, its
// num_computed_tokens reset, and it waits again), finishing, draining. The two modes differ only in
// schedule(): ContinuousScheduler (paged + continuous batching) and NaiveScheduler (static batches).
// Engine thread only.
#pragma once

#include "kv/kv_cache_manager.h"
#include "sched/scheduler_config.h"
#include "sched/scheduler_output.h"
#include "sched/scheduling_policy.h"

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

class Scheduler {
public:
    Scheduler(KvCacheManager& kv, const SchedulerConfig& config);
    virtual ~Scheduler() = default;

    virtual std::string_view mode() const = 0;
    virtual SchedulerOutput schedule() = 0;

    void add_request(Request* request);
    // Removes the request from the queues and frees its blocks.
    void finish_request(Request* request, FinishReason reason);
    // After the model ran: every scheduled request has its new tokens computed.
    void update_after_step(const SchedulerOutput& out);
    // Drain for a rebuild of the KV pool: every running request is preempted (recompute later).
    void preempt_all();
    // Live reconfiguration between steps (policy, max_num_seqs, token budget, prefix caching).
    virtual void set_config(const SchedulerConfig& config);

    const SchedulerConfig& config() const { return config_; }
    const std::vector<Request*>& running() const { return running_; }
    const std::deque<Request*>& waiting() const { return waiting_; }
    bool has_unfinished_requests() const { return !running_.empty() || !waiting_.empty(); }
    int64_t num_preemptions() const { return num_preemptions_; }

    // "" or the first broken invariant of the step just scheduled: tokens within the budget, running
    // within max_num_seqs, waiting and preempted requests hold no blocks, no block a scheduled request's
    // attention reads was freed behind a sliding window, the KV pool's own invariants.
    std::string check_invariants(const SchedulerOutput& out) const;

protected:
    // Moves running_[index] back to the waiting queue, freeing its blocks.
    void preempt(size_t index, SchedulerOutput& out);
    // max_num_seqs may be lowered while requests run: the policy's victims wait again (recompute).
    void enforce_seat_limit(SchedulerOutput& out);
    // The first chunk of a request that has not started (or restarts after preemption).
    static ScheduledRequest make_scheduled(Request* r, int num_new_tokens);

    KvCacheManager& kv_;
    SchedulerConfig config_;
    std::unique_ptr<SchedulingPolicy> policy_;
    std::vector<Request*> running_;
    std::deque<Request*> waiting_;
    int64_t num_preemptions_ = 0;
};

}  // namespace kvscope
