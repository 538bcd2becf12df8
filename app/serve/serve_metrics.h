// ServeMetrics: the figures kvscope-cli serve exposes on GET /metrics, in the Prometheus text format
// with vLLM's metric families, labels (model_name, engine) and buckets (vllm/v1/metrics/loggers.py),
// under the prefix `kvscope:` or, with --metrics-prefix vllm, `vllm:` so that vLLM's dashboards read
// them unchanged. Written by the engine thread (as the engine's MetricsSink and after every loop turn),
// read by request threads; a mutex guards everything.
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

// What vllm:cache_config_info carries as labels.
struct CacheConfigInfo {
    int block_size = 0;
    int num_gpu_blocks = 0;  // vLLM's name for the blocks of the KV pool, wherever it lives
    std::string cache_dtype;
    bool enable_prefix_caching = false;
};

// What a simulated engine's metrics say about it (sim/simulation_info.h); empty gpu = a real engine.
struct SimulationInfo {
    std::string gpu;              // "h100-sxm"
    int tensor_parallel_size = 1;
    std::string step_time_model;  // "sim-v1"
    std::string label;            // "simulated NVIDIA H100 SXM 80GB, dummy:llama-3-8b, step-time model sim-v1"
};

// A Prometheus histogram: counts per upper bound, plus +Inf, sum and count.
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
    // prefix: "kvscope" or "vllm".
    ServeMetrics(std::string model_name, std::string prefix, int max_model_len, CacheConfigInfo cache);

    // MetricsSink (engine thread).
    void on_step(const StepStats& stats) override;
    void on_request_finished(const RequestMetrics& metrics) override;

    // Engine thread.
    void set_engine_gauges(const EngineGauges& gauges);
    void add_prompt_tokens(int64_t n);
    void add_generation_tokens(int64_t n);
    void observe_request_params(int n, int max_tokens);

    // Before the server starts: every scrape then begins with a SIMULATED comment and carries a
    // <prefix>:simulation_info gauge, and every time in the histograms is simulated.
    void set_simulation(SimulationInfo info) { simulation_ = std::move(info); }

    // Any thread.
    std::string render_prometheus() const;

private:
    std::string model_name_;
    std::string prefix_;
    CacheConfigInfo cache_;
    SimulationInfo simulation_;
    mutable std::mutex mu_;
    EngineGauges gauges_;
    int64_t num_steps_ = 0;
    int64_t prompt_tokens_ = 0;
    int64_t generation_tokens_ = 0;
    std::map<std::string, int64_t> finished_by_reason_;
    Histogram iteration_tokens_;
    Histogram ttft_;
    Histogram itl_;           // every gap between consecutive tokens
    Histogram request_tpot_;  // per request: (e2el - ttft) / (output tokens - 1)
    Histogram e2e_;
    Histogram queue_time_;
    Histogram inference_time_;
    Histogram prefill_time_;
    Histogram decode_time_;
    Histogram prompt_tokens_per_request_;
    Histogram generation_tokens_per_request_;
    Histogram params_n_;
    Histogram params_max_tokens_;
};

}  // namespace kvscope::cli
