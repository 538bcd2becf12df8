// BenchRunner: replays a workload through an LlmEngine on the calling (engine) thread, the way
// `vllm bench serve` drives a server: timed arrivals, a max-concurrency cap, uncounted warm-up
// requests, forced output lengths (ignore_eos). One runner can run the same workload several times
// under different configurations (--compare naive, --sweep) via engine.reconfigure(), no reload.
#pragma once

#include "bench/workload.h"
#include "engine_config.h"
#include "llm_engine.h"
#include "metrics/step_recorder.h"
#include "metrics/summary.h"

#include <functional>
#include <string>
#include <vector>

namespace kvscope {

struct BenchOptions {
    std::vector<double> arrival_offsets;  // seconds from the start, one per request; empty = all at once
    int max_concurrency = 0;              // requests in flight at most; 0 = no cap
    int num_warmups = 1;                  // requests run before the timed part, not counted
    float temperature = 0.0f;             // 0 = greedy
    uint64_t seed = 0;
    std::vector<double> percentiles = {50, 90, 99};
    GoodputSlo goodput;
    std::function<void(int done, int total)> progress;  // called on the engine thread
};

// One timed run: the summary, the engine figures and the raw per-request and per-step records.
struct BenchRun {
    std::string label;  // "paged", "naive", "max-num-seqs=16"
    EngineConfig config;
    BenchmarkSummary summary;
    EngineAggregates engine;
    double start_time = 0;                 // engine clock at the start of the timed part
    std::vector<RequestMetrics> requests;  // workload order; arrival_time = when it was due
    std::vector<double> submit_times;      // when it entered the engine (-1: rejected)
    std::vector<std::string> errors;       // "" or why the request failed
    std::vector<StepStats> steps;
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
    struct Pending;  // per-run bookkeeping of arrivals
    NewRequest make_request(size_t index, const std::string& id, int max_tokens) const;
    void warm_up();
    void admit(Pending& p, double t0);
    void wait_for_arrival(const Pending& p, double t0) const;
    BenchRun collect(Pending& p, const std::string& label, double t0, double duration);

    LlmEngine& engine_;
    std::vector<BenchRequest> workload_;
    BenchOptions options_;
    StepRecorder recorder_;
    int run_count_ = 0;
};

}  // namespace kvscope
