// A benchmark as the GUI describes it (BenchSpec) turned into what the engine's BenchDriver runs: the
// workload of `kvscope-cli bench` (engine/bench: random, shared-prefix, sharegpt) and its options
// (gamma arrivals with burstiness, max concurrency, seed, one warm-up request). Deterministic for a
// seed; the same spec gives the same requests as the CLI's flags of the same values.
#pragma once

#include "bench/bench_driver.h"
#include "bench_spec.h"

#include <vector>

namespace kvscope {
struct Model;
}

namespace kvscope::ui {

struct BenchPlan {
    std::vector<BenchRequest> workload;
    BenchOptions options;
};

// Throws BadInput when the spec cannot run (prompts that cannot fit max_model_len, no prompts), as
// `kvscope-cli bench` refuses them; a request whose prompt and output pass max_model_len runs to it.
BenchPlan makeBenchPlan(const BenchSpec& spec, const Model& model, int maxModelLen);
// Throws BadInput for values no model could run (no prompts, lengths < 1, a negative rate), before any
// model is known: what a script's benchmark action is checked with at load.
void checkBenchSpec(const BenchSpec& spec);
// For a remote engine known only through its /tokenize: random and shared-prefix prompts drawn from
// `ordinaryIds` (server_vocabulary_sample), as `kvscope-cli bench --base-url` without --tokenizer.
BenchPlan makeBenchPlan(const BenchSpec& spec, const std::vector<int32_t>& ordinaryIds, int maxModelLen);

}  // namespace kvscope::ui
