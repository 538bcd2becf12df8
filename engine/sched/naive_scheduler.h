// The naive batching baseline of the seed article (docs/DESIGN.md section 2): static batches of up to
// max_num_seqs requests, each reserving max_model_len KV slots up front, as a contiguous per-request
// cache would. A batch runs until its longest request ends; new requests wait for the whole batch.
// Same model, kernels and cache as the paged mode, so the two modes differ only in scheduling.
// Like a padded static batch (Hugging Face generate on a batch of prompts), the batch also computes
// what it throws away: prompts are padded to the batch's longest prompt, and members that finished keep
// a row in every decode step until the batch ends. These padding rows run through the model (see
// PaddingRows) but are never sampled; their tokens are reported as num_padding_tokens.
#pragma once

#include "sched/scheduler.h"

#include <utility>

namespace kvscope {

class NaiveScheduler final : public Scheduler {
public:
    NaiveScheduler(KvCacheManager& kv, const SchedulerConfig& config);
    std::string_view mode() const override { return "naive"; }
    SchedulerOutput schedule() override;

    // Slots reserved by the current batch (every member reserves max_model_len).
    int64_t num_reserved_slots() const;

private:
    void admit_batch();
    void schedule_padding(SchedulerOutput& out, int budget);
    int batch_size_ = 0;  // members of the running batch, finished ones included
    // Prompt padding still owed by each running member: the batch's longest prompt minus its own.
    std::vector<std::pair<const Request*, int>> prompt_padding_;
};

}  // namespace kvscope
