#include "bench_workload.h"

#include "bench/arrivals.h"
#include "bench/workload.h"
#include "model/model.h"
#include "util/errors.h"

#include <atomic>

namespace kvscope::ui {

namespace {
std::atomic<int> g_runCounter{0};
}

std::vector<BenchArrival> makeBenchWorkload(const BenchSpec& spec, const Model& model, int maxModelLen) {
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
    const auto workload = make_workload(w, model.tokenizer, model.config.vocab_size);
    const auto offsets = arrival_offsets(int(workload.size()), spec.requestRate, spec.burstiness, spec.seed);
    const int run = ++g_runCounter;
    std::vector<BenchArrival> out;
    out.reserve(workload.size());
    for (size_t i = 0; i < workload.size(); ++i) {
        const BenchRequest& r = workload[i];
        if (int(r.prompt_token_ids.size()) + r.output_len > maxModelLen)
            throw BadInput("benchmark: request " + std::to_string(i) + " needs " +
                           std::to_string(r.prompt_token_ids.size() + size_t(r.output_len)) +
                           " tokens, more than max_model_len " + std::to_string(maxModelLen));
        BenchArrival a;
        a.requestId = QString("bench-%1-%2").arg(run).arg(i);
        a.promptTokenIds = r.prompt_token_ids;
        a.sampling.temperature = 0.0f;  // greedy, forced length: like `vllm bench serve` with ignore_eos
        a.sampling.ignore_eos = true;
        a.sampling.max_tokens = r.output_len;
        a.arrivalOffset = i < offsets.size() ? offsets[i] : 0.0;
        out.push_back(std::move(a));
    }
    return out;
}

}  // namespace kvscope::ui
