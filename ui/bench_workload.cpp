#include "bench_workload.h"

#include "bench/arrivals.h"
#include "bench/workload.h"
#include "model/model.h"
#include "util/errors.h"

namespace kvscope::ui {

namespace {

WorkloadOptions workloadOptions(const BenchSpec& spec, int maxModelLen) {
    WorkloadOptions w;
    w.dataset = spec.dataset.toStdString();
    w.dataset_path = spec.datasetPath.toStdString();
    w.num_prompts = spec.numPrompts;
    w.input_len = spec.inputLen;
    w.output_len = spec.outputLen;
    w.output_len_fixed = true;
    w.range_ratio = spec.rangeRatio;
    w.prefix_len = spec.dataset == "shared-prefix" ? spec.prefixLen : 0;
    w.max_model_len = maxModelLen;
    w.seed = spec.seed;
    return w;
}

// The workload's requests run as `kvscope-cli bench` runs them: a prompt past max_model_len is refused on
// its own, an output that reaches it ends there. Prompts that no request could fit are refused up front by
// makeBenchPlan, with the CLI's check (the panel refused any request whose prompt and output passed it, after
// building them all: a benchmark the CLI ran was refused here).
BenchPlan finishPlan(const BenchSpec& spec, std::vector<BenchRequest> workload) {
    BenchPlan plan;
    plan.workload = std::move(workload);
    // `kvscope-cli bench`'s defaults for what the panel does not set: greedy, one warm-up request.
    plan.options.arrival_offsets = arrival_offsets(int(plan.workload.size()), spec.requestRate, spec.burstiness, spec.seed);
    plan.options.max_concurrency = spec.maxConcurrency;
    plan.options.seed = spec.seed;
    return plan;
}

}  // namespace

void checkBenchSpec(const BenchSpec& spec) {
    check_workload_options(workloadOptions(spec, 1 << 30));
    (void)arrival_offsets(0, spec.requestRate, spec.burstiness, spec.seed);  // checks the burstiness
    if (spec.requestRate < 0) throw BadInput("request_rate must be >= 0 (0: all at once), got " + std::to_string(spec.requestRate));
    if (spec.maxConcurrency < 0) throw BadInput("max_concurrency must be >= 0, got " + std::to_string(spec.maxConcurrency));
}

BenchPlan makeBenchPlan(const BenchSpec& spec, const Model& model, int maxModelLen) {
    const WorkloadOptions options = workloadOptions(spec, maxModelLen);
    check_prompts_fit(options, maxModelLen);
    return finishPlan(spec, make_workload(options, model.tokenizer, model.config.vocab_size));
}

BenchPlan makeBenchPlan(const BenchSpec& spec, const std::vector<int32_t>& ordinaryIds, int maxModelLen) {
    const WorkloadOptions options = workloadOptions(spec, maxModelLen);
    check_prompts_fit(options, maxModelLen);
    return finishPlan(spec, make_workload(options, ordinaryIds));
}

}  // namespace kvscope::ui
