#include "sched/scheduler_config.h"

#include "util/errors.h"

namespace kvscope {

void SchedulerConfig::validate() const {
    auto bad = [](const std::string& what) { throw BadInput("invalid scheduler setting: " + what); };
    if (max_num_seqs < 1) bad("max_num_seqs must be >= 1, got " + std::to_string(max_num_seqs));
    if (max_num_batched_tokens < 1)
        bad("max_num_batched_tokens must be >= 1, got " + std::to_string(max_num_batched_tokens));
    if (policy != "fcfs" && policy != "priority") bad("policy must be fcfs or priority, got '" + policy + "'");
    if (max_model_len < 1) bad("max_model_len must be >= 1, got " + std::to_string(max_model_len));
    if (long_prefill_token_threshold < 0)
        bad("long_prefill_token_threshold must be >= 0, got " + std::to_string(long_prefill_token_threshold));
}

}  // namespace kvscope
