#include "sched/naive_scheduler.h"

#include <algorithm>

namespace kvscope {

NaiveScheduler::NaiveScheduler(KvCacheManager& kv, const SchedulerConfig& config) : Scheduler(kv, config) {}

int64_t NaiveScheduler::num_reserved_slots() const {
    return static_cast<int64_t>(batch_size_) * config_.max_model_len;
}

// Admits up to max_num_seqs waiting requests as one batch, each reserving the blocks of max_model_len
// tokens (as lookahead: reserved, not yet filled).
void NaiveScheduler::admit_batch() {
    batch_size_ = 0;
    prompt_padding_.clear();
    const int reserve_blocks = (config_.max_model_len + kv_.block_size() - 1) / kv_.block_size();
    while (!waiting_.empty() && static_cast<int>(running_.size()) < config_.max_num_seqs &&
           kv_.num_free_blocks() >= reserve_blocks) {
        Request* r = waiting_.front();
        if (!kv_.allocate_slots(*r, 0, {}, config_.max_model_len - r->num_computed_tokens)) break;
        waiting_.pop_front();
        r->status = RequestStatus::RUNNING;
        if (r->num_cached_tokens < 0) r->num_cached_tokens = 0;
        running_.push_back(r);
        ++batch_size_;
    }
    int longest = 0;
    for (const Request* r : running_) longest = std::max(longest, r->num_tokens());
    for (const Request* r : running_)
        if (r->num_tokens() < longest) prompt_padding_.emplace_back(r, longest - r->num_tokens());
}

// Padding rows attend over the context of the running member that has computed the most, as every row
// of a padded batch attends over the padded length.
void NaiveScheduler::schedule_padding(SchedulerOutput& out, int budget) {
    const Request* context = nullptr;
    for (const Request* r : running_)
        if (r->num_computed_tokens > 0 && (!context || r->num_computed_tokens > context->num_computed_tokens)) context = r;
    if (!context) return;  // nothing cached yet to attend over: the padding waits a step
    auto add = [&](int n) {
        n = std::min(n, budget);
        if (n <= 0) return 0;
        out.padding.push_back({context, n});
        out.num_padding_tokens += n;
        budget -= n;
        return n;
    };
    for (auto& [r, owed] : prompt_padding_)
        if (std::find(running_.begin(), running_.end(), r) != running_.end()) owed -= add(owed);
    std::erase_if(prompt_padding_, [&](const auto& p) {
        return p.second <= 0 || std::find(running_.begin(), running_.end(), p.first) == running_.end();
    });
    add(batch_size_ - static_cast<int>(running_.size()));  // one decode row per finished member
}

SchedulerOutput NaiveScheduler::schedule() {
    SchedulerOutput out;
    enforce_seat_limit(out);
    // Members sent back to the queue by a lowered max_num_seqs leave the batch.
    batch_size_ = std::min(batch_size_, config_.max_num_seqs);
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
    if (!out.scheduled.empty()) schedule_padding(out, budget);
    return out;
}

}  // namespace kvscope
