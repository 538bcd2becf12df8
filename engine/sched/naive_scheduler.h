// The naive batching baseline of the seed article (DESIGN.md section 2): static batches of up to
// max_num_seqs requests, each reserving max_model_len KV slots up front, as a contiguous per-request
// cache would. A batch runs until its longest request ends; new requests wait for the whole batch.
// Same model, kernels and cache as the paged mode, so the two modes differ only in scheduling.
// Finished requests of a batch keep their reservation but are not computed any more (a padded static
// batch would still spend compute on them: this baseline is the generous kind).
#pragma once

#include "sched/scheduler.h"

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
    std::vector<Request*> batch_;  // members of the running batch, finished ones included
};

}  // namespace kvscope
