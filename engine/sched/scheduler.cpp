#include "sched/scheduler.h"

#include <algorithm>

namespace kvscope {

Scheduler::Scheduler(KvCacheManager& kv, const SchedulerConfig& config)
    : kv_(kv), config_(config), policy_(make_policy(config.policy)) {
    config_.validate();
}

void Scheduler::set_config(const SchedulerConfig& config) {
    config.validate();
    if (config.policy != config_.policy) {
        policy_ = make_policy(config.policy);
        std::stable_sort(waiting_.begin(), waiting_.end(),
                         [this](const Request* a, const Request* b) { return policy_->before(*a, *b); });
    }
    config_ = config;
}

void Scheduler::add_request(Request* request) {
    request->status = RequestStatus::WAITING;
    const size_t pos = policy_->arrival_position(waiting_, *request);
    waiting_.insert(waiting_.begin() + static_cast<std::ptrdiff_t>(pos), request);
}

void Scheduler::finish_request(Request* request, FinishReason reason) {
    std::erase(running_, request);
    std::erase(waiting_, request);
    kv_.free(*request);
    request->status = RequestStatus::FINISHED;
    request->finish_reason = reason;
}

void Scheduler::preempt(size_t index, SchedulerOutput& out) {
    Request* r = running_[index];
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
    kv_.free(*r);
    r->status = RequestStatus::PREEMPTED;
    r->num_computed_tokens = 0;
    ++r->num_preemptions;
    ++num_preemptions_;
    out.preempted.push_back(r);
    const size_t pos = policy_->requeue_position(waiting_, *r);
    waiting_.insert(waiting_.begin() + static_cast<std::ptrdiff_t>(pos), r);
}

void Scheduler::enforce_seat_limit(SchedulerOutput& out) {
    while (static_cast<int>(running_.size()) > config_.max_num_seqs) preempt(policy_->pick_victim(running_), out);
}

void Scheduler::preempt_all() {
    SchedulerOutput ignored;
    while (!running_.empty()) preempt(running_.size() - 1, ignored);
}

void Scheduler::update_after_step(const SchedulerOutput& out) {
    for (const ScheduledRequest& s : out.scheduled) s.request->num_computed_tokens += s.num_new_tokens;
}

ScheduledRequest Scheduler::make_scheduled(Request* r, int num_new_tokens) {
    ScheduledRequest s;
    s.request = r;
    s.num_new_tokens = num_new_tokens;
    // A decode is one new token after the request's own sampled token; anything else (prompt chunks,
    // recompute after preemption) counts as prefill.
    s.is_prefill = !(num_new_tokens == 1 && r->num_output_tokens() > 0 && r->num_computed_tokens == r->num_tokens() - 1);
    s.samples = r->num_computed_tokens + num_new_tokens == r->num_tokens();
    return s;
}

std::string Scheduler::check_invariants(const SchedulerOutput& out) const {
    if (out.total_num_tokens() > config_.max_num_batched_tokens)
        return "step schedules " + std::to_string(out.total_num_tokens()) + " tokens, budget " +
               std::to_string(config_.max_num_batched_tokens);
    if (static_cast<int>(running_.size()) > config_.max_num_seqs)
        return std::to_string(running_.size()) + " running requests exceed max_num_seqs " +
               std::to_string(config_.max_num_seqs);
    for (const Request* r : waiting_)
        if (!kv_.block_table(r->request_id).empty())
            return "waiting request " + r->request_id + " holds blocks";
    for (const Request* r : out.preempted)
        if (!kv_.block_table(r->request_id).empty())
            return "preempted request " + r->request_id + " holds blocks";
    for (const ScheduledRequest& s : out.scheduled) {
        const Request* r = s.request;
        const int64_t need = (static_cast<int64_t>(r->num_computed_tokens) + s.num_new_tokens + kv_.block_size() - 1) /
                             kv_.block_size();
        const std::vector<int32_t>& table = kv_.block_table(r->request_id);
        if (static_cast<int64_t>(table.size()) < need)
            return "request " + r->request_id + " is scheduled without blocks for its tokens";
        // Every block this step's attention reads (from its first query's window on) is really held.
        for (int64_t i = kv_.num_skipped_blocks(r->num_computed_tokens); i < need; ++i)
            if (table[static_cast<size_t>(i)] == KvCacheManager::kNullBlockId)
                return "request " + r->request_id + " is scheduled with block " + std::to_string(i) +
                       " of its table freed, inside its sliding window";
    }
    return kv_.check_invariants();
}

}  // namespace kvscope
