// StepRecorder: a MetricsSink that keeps every StepStats and finished RequestMetrics of a run, and the
// engine-side aggregates the benchmark reports beside vLLM's figures (batch size, tokens per step, KV
// usage and waste, preemptions, prefix-cache hit rate). Called on the engine thread only.
#pragma once

#include "metrics/metrics_sink.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace kvscope {

struct EngineAggregates {
    int block_size = 0;                 // of the pool at the last step
    int num_blocks = 0;
    int64_t num_steps = 0;              // steps that scheduled something
    double mean_batch_size = 0;         // scheduled sequences per such step
    double mean_tokens_per_step = 0;    // prefill + decode tokens per such step
    int64_t num_padding_tokens = 0;     // naive mode: rows computed and thrown away (padded batch)
    double kv_usage_peak = 0;
    double kv_usage_mean = 0;           // over steps that scheduled something
    double kv_waste_mean = 0;           // over steps with any block reserved
    int64_t num_preemptions = 0;
    int64_t prefix_cache_queries = 0;   // tokens
    int64_t prefix_cache_hits = 0;      // tokens
    double prefix_cache_hit_rate = 0;

    nlohmann::json to_json() const;
    static EngineAggregates from_json(const nlohmann::json& j);
};

class StepRecorder final : public MetricsSink {
public:
    void on_step(const StepStats& stats) override;
    void on_request_finished(const RequestMetrics& metrics) override;

    // Forgets what was recorded (after warm-up); cumulative counters are measured from the latest
    // step seen, or from set_baseline() (after a pool rebuild restarted them).
    void clear();
    void set_baseline(int64_t total_preemptions, int64_t prefix_cache_queries, int64_t prefix_cache_hits);
    const std::vector<StepStats>& steps() const { return steps_; }
    const std::vector<RequestMetrics>& requests() const { return requests_; }
    std::vector<RequestMetrics>& requests() { return requests_; }
    EngineAggregates aggregates() const;

private:
    std::vector<StepStats> steps_;
    std::vector<RequestMetrics> requests_;
    StepStats last_;  // the latest step seen, kept across clear() as the baseline of cumulative counters
    StepStats base_;
};

// One step as a JSON object (the per-step timeline export).
nlohmann::json step_stats_to_json(const StepStats& s);
// A step's "work" object and back (from_json throws nlohmann's exception on a missing or mistyped key).
nlohmann::json step_work_to_json(const StepWorkSummary& w);
StepWorkSummary step_work_from_json(const nlohmann::json& j);

}  // namespace kvscope
