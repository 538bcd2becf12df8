#include "sched/scheduler_config.h"

#include "util/errors.h"

namespace kvscope {

std::string_view to_string(SchedulerPolicy policy) { return policy == SchedulerPolicy::PRIORITY ? "priority" : "fcfs"; }

SchedulerPolicy parse_scheduler_policy(std::string_view name) {
    if (name == "fcfs") return SchedulerPolicy::FCFS;
    if (name == "priority") return SchedulerPolicy::PRIORITY;
    throw BadInput("policy must be fcfs or priority, got '" + std::string(name.substr(0, 64)) + "'");
}

void SchedulerConfig::validate() const {
    auto bad = [](const std::string& what) { throw BadInput("invalid scheduler setting: " + what); };
    if (max_num_seqs < 1) bad("max_num_seqs must be >= 1, got " + std::to_string(max_num_seqs));
    if (max_num_batched_tokens < 1)
        bad("max_num_batched_tokens must be >= 1, got " + std::to_string(max_num_batched_tokens));
    if (max_model_len < 1) bad("max_model_len must be >= 1, got " + std::to_string(max_model_len));
    if (long_prefill_token_threshold < 0)
        bad("long_prefill_token_threshold must be >= 0, got " + std::to_string(long_prefill_token_threshold));
}

}  // namespace kvscope
