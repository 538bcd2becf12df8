// BenchRunner: runs a workload through an LlmEngine on the calling (engine) thread with the
// BenchDriver's rules, the way `vllm bench serve` drives a server: timed arrivals, a max-concurrency
// cap, uncounted warm-up requests, forced output lengths (ignore_eos). One runner can run the same
// workload several times under different configurations (--compare naive, --sweep) via
// engine.reconfigure(), no reload. Blocks until the run ends (it sleeps while nothing is due).
#pragma once

#include "bench/bench_driver.h"
#include "bench/workload.h"
#include "engine_config.h"
#include "llm_engine.h"

#include <string>
#include <utility>
#include <vector>

namespace kvscope {

// The local engine as a BenchTarget.
class EngineBenchTarget final : public BenchTarget {
public:
    explicit EngineBenchTarget(LlmEngine& engine) : engine_(engine) {}
    double now() const override { return engine_.now(); }
    void submit(NewRequest request) override { engine_.add_request(std::move(request)); }

private:
    LlmEngine& engine_;
};

class BenchRunner {
public:
    BenchRunner(LlmEngine& engine, std::vector<BenchRequest> workload, BenchOptions options);

    // Runs with the engine's current configuration.
    BenchRun run(const std::string& label);
    // Reconfigures the engine (drain-and-rebuild when the pool changes), then runs.
    BenchRun run_with(const EngineConfig& config, const std::string& label);
    // The same workload in naive mode, then in paged mode: {naive, paged}.
    std::pair<BenchRun, BenchRun> run_compare_naive(const EngineConfig& paged);

private:
    LlmEngine& engine_;
    std::vector<BenchRequest> workload_;
    BenchOptions options_;
    int run_count_ = 0;
};

}  // namespace kvscope
