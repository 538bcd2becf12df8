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

BenchPlan finishPlan(const BenchSpec& spec, std::vector<BenchRequest> workload, int maxModelLen) {
    BenchPlan plan;
    plan.workload = std::move(workload);
    for (size_t i = 0; i < plan.workload.size(); ++i) {
        const BenchRequest& r = plan.workload[i];
        if (int(r.prompt_token_ids.size()) + r.output_len > maxModelLen)
            throw BadInput("benchmark: request " + std::to_string(i) + " needs " +
                           std::to_string(r.prompt_token_ids.size() + size_t(r.output_len)) +
                           " tokens, more than max_model_len " + std::to_string(maxModelLen));
    }
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
    return finishPlan(spec, make_workload(workloadOptions(spec, maxModelLen), model.tokenizer, model.config.vocab_size),
                      maxModelLen);
}

BenchPlan makeBenchPlan(const BenchSpec& spec, const std::vector<int32_t>& ordinaryIds, int maxModelLen) {
    return finishPlan(spec, make_workload(workloadOptions(spec, maxModelLen), ordinaryIds), maxModelLen);
}

}  // namespace kvscope::ui
