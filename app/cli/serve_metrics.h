// ServeMetrics: the figures kvscope-cli serve exposes on GET /metrics, in the Prometheus text format
// with vLLM's metric names under the kvscope: prefix (gauges, counters, latency histograms with vLLM's
// buckets). Written by the engine thread (as the engine's MetricsSink and after every loop turn), read
// by connection threads; a mutex guards everything.
#pragma once

#include "metrics/metrics_sink.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kvscope::cli {

// The engine's state after a loop turn: gauges and the engine's own cumulative counters.
struct EngineGauges {
    int num_running = 0;
    int num_waiting = 0;
    double kv_cache_usage = 0;  // used blocks / all blocks, in [0, 1]
    int64_t num_preemptions = 0;
    int64_t prefix_cache_queries = 0;  // tokens
    int64_t prefix_cache_hits = 0;     // tokens
};

// A Prometheus histogram: cumulative counts per upper bound, plus +Inf, sum and count.
struct Histogram {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // per bucket, not cumulative; the last one is +Inf
    double sum = 0;
    uint64_t count = 0;

    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double value);
};

class ServeMetrics : public MetricsSink {
public:
    explicit ServeMetrics(std::string model_name);

    // MetricsSink (engine thread).
    void on_step(const StepStats& stats) override;
    void on_request_finished(const RequestMetrics& metrics) override;

    // Engine thread.
    void set_engine_gauges(const EngineGauges& gauges);
    void add_prompt_tokens(int64_t n);
    void add_generation_tokens(int64_t n);

    // Any thread.
    std::string render_prometheus() const;

private:
    std::string model_name_;
    mutable std::mutex mu_;
    EngineGauges gauges_;
    int64_t num_steps_ = 0;
    int64_t prompt_tokens_ = 0;
    int64_t generation_tokens_ = 0;
    std::map<std::string, int64_t> finished_by_reason_;
    Histogram ttft_;
    Histogram e2e_;
    Histogram tpot_;        // every inter-token gap (vLLM's time_per_output_token_seconds)
    Histogram queue_time_;
};

}  // namespace kvscope::cli
