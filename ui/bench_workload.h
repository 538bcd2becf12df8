// The requests of one benchmark run as the engine worker feeds them: the workloads and arrivals of
// `kvscope-cli bench` (engine/bench: random, shared-prefix, sharegpt; gamma arrivals with burstiness),
// each with its request id, sampling and arrival offset. Deterministic for a seed; engine thread.
#pragma once

#include "bench_spec.h"
#include "sched/sampling_params.h"

#include <QString>

#include <vector>

namespace kvscope {
struct Model;
}

namespace kvscope::ui {

struct BenchArrival {
    QString requestId;  // "bench-<run>-<index>"
    std::vector<int32_t> promptTokenIds;
    SamplingParams sampling;
    double arrivalOffset = 0;  // seconds after the run starts
};

// Throws BadInput when the spec cannot run (lengths beyond max_model_len, no prompts).
std::vector<BenchArrival> makeBenchWorkload(const BenchSpec& spec, const Model& model, int maxModelLen);

}  // namespace kvscope::ui
