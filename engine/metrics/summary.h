// BenchmarkSummary: what `vllm bench serve` reports, computed from finished RequestMetrics with vLLM's
// definitions (docs/DESIGN.md section 3): throughputs, peak output tokens/s (1 s buckets), peak concurrency,
// mean/median/std/pNN of TTFT, TPOT, ITL, E2EL in ms (numpy's linear percentiles), and goodput.
// Pure values; to_json() writes vLLM's key names so results diff against vLLM runs.
#pragma once

#include "metrics/request_metrics.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvscope {

// Service-level objectives for goodput, in ms (vLLM's --goodput ttft:MS tpot:MS e2el:MS).
struct GoodputSlo {
    std::optional<double> ttft_ms, tpot_ms, e2el_ms;
    bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};

// Statistics of one latency metric, in ms.
struct LatencyStats {
    double mean = 0, median = 0, std = 0;
    std::vector<std::pair<double, double>> percentiles;  // (p, value ms)
};

struct BenchmarkSummary {
    int completed = 0;
    int failed = 0;
    int64_t total_input_tokens = 0;
    int64_t total_output_tokens = 0;
    double duration = 0;  // seconds
    double request_throughput = 0;
    double output_throughput = 0;
    double total_token_throughput = 0;
    double max_output_tokens_per_s = 0;
    int max_concurrent_requests = 0;          // vLLM: requests alive in the busiest 1 s bucket
    int max_concurrent_requests_instant = 0;  // requests alive at the same instant
    std::optional<double> request_goodput;  // only with SLOs
    LatencyStats ttft, tpot, itl, e2el;

    nlohmann::json to_json() const;
    // Reads what to_json() wrote (missing keys stay 0). Used to compare saved sessions.
    static BenchmarkSummary from_json(const nlohmann::json& j);
};

// numpy.percentile with the default linear interpolation; p in [0, 100]; 0 for an empty input.
double percentile(std::vector<double> values, double p);
// Mean, median, population std (numpy's default) and percentiles of values given in seconds.
LatencyStats latency_stats(const std::vector<double>& seconds, const std::vector<double>& percentiles);
// vLLM's percentile key word: 99 -> "99", 99.9 -> "99.9".
std::string percentile_word(double p);

// Requests whose finish_reason is ERROR or ABORT (or that never finished) count as failed.
BenchmarkSummary summarize(const std::vector<RequestMetrics>& requests, double duration,
                           const std::vector<double>& percentiles, const GoodputSlo& slo = {});

// --compare naive ratios, each written so that > 1 means paged is better.
nlohmann::json compare_ratios(const BenchmarkSummary& naive, const BenchmarkSummary& paged);

}  // namespace kvscope
