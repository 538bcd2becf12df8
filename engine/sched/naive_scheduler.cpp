#include "sched/naive_scheduler.h"

#include <algorithm>

namespace kvscope {

NaiveScheduler::NaiveScheduler(KvCacheManager& kv, const SchedulerConfig& config) : Scheduler(kv, config) {}

int64_t NaiveScheduler::num_reserved_slots() const {
    return static_cast<int64_t>(batch_.size()) * config_.max_model_len;
}

// Admits up to max_num_seqs waiting requests as one batch, each reserving the blocks of max_model_len
// tokens (as lookahead: reserved, not yet filled).
void NaiveScheduler::admit_batch() {
    batch_.clear();
    const int reserve_blocks = (config_.max_model_len + kv_.block_size() - 1) / kv_.block_size();
    while (!waiting_.empty() && static_cast<int>(running_.size()) < config_.max_num_seqs &&
           kv_.num_free_blocks() >= reserve_blocks) {
        Request* r = waiting_.front();
        if (!kv_.allocate_slots(*r, 0, {}, config_.max_model_len - r->num_computed_tokens)) break;
        waiting_.pop_front();
        r->status = RequestStatus::RUNNING;
        if (r->num_cached_tokens < 0) r->num_cached_tokens = 0;
        running_.push_back(r);
        batch_.push_back(r);
    }
}

SchedulerOutput NaiveScheduler::schedule() {
    SchedulerOutput out;
    enforce_seat_limit(out);
    // The batch is over when all its members finished (finish_request removed them from running_).
    if (running_.empty()) admit_batch();
    int budget = config_.max_num_batched_tokens;
    for (Request* r : running_) {
        if (budget == 0) break;
        const int n = std::min(r->num_tokens() - r->num_computed_tokens, budget);
        if (n <= 0) continue;
        // Blocks were reserved at admission: this never fails, and nothing is ever preempted.
        kv_.allocate_slots(*r, n);
        out.scheduled.push_back(make_scheduled(r, n));
        (out.scheduled.back().is_prefill ? out.num_prefill_tokens : out.num_decode_tokens) += n;
        budget -= n;
    }
    return out;
}

}  // namespace kvscope
