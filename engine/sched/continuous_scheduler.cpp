#include "sched/continuous_scheduler.h"

#include <algorithm>

namespace kvscope {

SchedulerOutput ContinuousScheduler::schedule() {
    SchedulerOutput out;
    // At most everyone running and waiting, within the seats: no regrowth at hundreds of requests.
    out.scheduled.reserve(std::min(running_.size() + waiting_.size(), static_cast<size_t>(config_.max_num_seqs)));
    int budget = config_.max_num_batched_tokens;
    enforce_seat_limit(out);
    take_seats_by_priority(out);
    const size_t preempted_before = out.preempted.size();
    schedule_running(out, budget);
    // After a preemption for memory, admitting new requests would only evict them again.
    if (out.preempted.size() == preempted_before) schedule_waiting(out, budget);
    for (const ScheduledRequest& s : out.scheduled)
        (s.is_prefill ? out.num_prefill_tokens : out.num_decode_tokens) += s.num_new_tokens;
    return out;
}

// The tokens to compute for r this step: what it lacks, within the budget and max_model_len, and
// capped for long prefills while others wait (the head-of-line guard).
int ContinuousScheduler::chunk_size(const Request& r, int budget) const {
    int n = std::min(r.num_tokens() - r.num_computed_tokens, budget);
    n = std::min(n, config_.max_model_len - r.num_computed_tokens);
    if (n > 1 && !waiting_.empty()) n = std::min(n, config_.prefill_chunk_cap());
    return std::max(n, 0);
}

void ContinuousScheduler::schedule_running(SchedulerOutput& out, int& budget) {
    size_t i = 0;
    while (i < running_.size() && budget > 0) {
        Request* r = running_[i];
        const int n = chunk_size(*r, budget);
        if (n == 0) {
            ++i;
            continue;
        }
        bool scheduled = false;
        while (!(scheduled = kv_.allocate_slots(*r, n))) {
            // Out of blocks: preempt by recompute until r fits, or r itself is the victim.
            const size_t victim = policy_->pick_victim(running_);
            if (victim == i) break;
            if (victim < i) {  // already scheduled this step: give its tokens back
                auto it = std::find_if(out.scheduled.begin(), out.scheduled.end(),
                                       [&](const ScheduledRequest& s) { return s.request == running_[victim]; });
                if (it != out.scheduled.end()) {
                    budget += it->num_new_tokens;
                    out.scheduled.erase(it);
                }
                --i;  // r moves down one place when the victim before it leaves
            }
            preempt(victim, out);
        }
        if (!scheduled) {
            preempt(i, out);
            continue;
        }
        out.scheduled.push_back(make_scheduled(r, n));
        budget -= n;
        ++i;
    }
}

void ContinuousScheduler::schedule_waiting(SchedulerOutput& out, int& budget) {
    while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < config_.max_num_seqs) {
        Request* r = waiting_.front();
        ComputedBlocks hits;
        // A request with prompt_logprobs takes no hits (as in vLLM): it needs the logits of every position.
        if (kv_.enable_caching() && !r->sampling_params.prompt_logprobs) hits = kv_.get_computed_blocks(*r);
        const int cached = hits.num_computed_tokens;
        int n = std::min(r->num_tokens() - cached, budget);
        if (n > 1 && waiting_.size() > 1) n = std::min(n, config_.prefill_chunk_cap());
        // Admission keeps one free block per running request in reserve for their growth: admitting into
        // the last free blocks only makes the next decode steps preempt someone and recompute it, which
        // costs far more than waiting (35 recomputes in a 64-request CPU benchmark without this).
        // Hits that sit in the free queue (cached-free) leave it too, so they count against the free
        // blocks as new ones do; hits held by running requests cost nothing.
        const int reserve = static_cast<int>(running_.size());
        if (kv_.num_blocks_to_allocate(*r, n, hits) + reserve > kv_.num_free_blocks() && !running_.empty()) break;
        if (!kv_.allocate_slots(*r, n, hits)) break;
        waiting_.pop_front();
        r->num_computed_tokens = cached;
        if (r->num_cached_tokens < 0) r->num_cached_tokens = cached;
        r->status = RequestStatus::RUNNING;
        running_.push_back(r);
        out.scheduled.push_back(make_scheduled(r, n));
        budget -= n;
    }
}

// Under the priority policy a waiting request that outranks a running one takes its seat when
// max_num_seqs is what keeps it out (not memory: that is handled by preemption in schedule_running).
void ContinuousScheduler::take_seats_by_priority(SchedulerOutput& out) {
    if (!policy_->preempts_for_seats()) return;
    while (!waiting_.empty() && static_cast<int>(running_.size()) >= config_.max_num_seqs && !running_.empty()) {
        const size_t victim = policy_->pick_victim(running_);
        if (!policy_->before(*waiting_.front(), *running_[victim])) return;
        preempt(victim, out);
    }
}

}  // namespace kvscope
