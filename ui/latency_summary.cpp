#include "latency_summary.h"

#include "metrics/summary.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvscope::ui {

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double pos = std::clamp(p, 0.0, 100.0) / 100.0 * double(v.size() - 1);
    const size_t lo = size_t(std::floor(pos)), hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

Distribution distribution(const std::vector<double>& v, const QList<int>& percentiles) {
    Distribution d;
    if (!v.empty()) {
        d.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
        double sq = 0;
        for (double x : v) sq += (x - d.mean) * (x - d.mean);
        d.stddev = std::sqrt(sq / double(v.size()));
        d.median = percentile(v, 50);
    }
    for (int p : percentiles) d.percentiles.emplace_back(p, percentile(v, p));
    return d;
}

QJsonObject summarizeRequests(const std::vector<RequestMetrics>& requests, double duration,
                              const QList<int>& percentiles) {
    if (duration <= 0) {
        double first = 1e300, last = -1e300;
        for (const RequestMetrics& m : requests) {
            first = std::min(first, m.arrival_time);
            last = std::max(last, m.finish_time);
        }
        duration = last > first ? last - first : 0;
    }
    std::vector<double> ps(percentiles.begin(), percentiles.end());
    // The engine's summary (engine/metrics/summary.h) writes vLLM's keys; the CLI uses the same code.
    const std::string text = kvscope::summarize(requests, duration, ps).to_json().dump();
    QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(text)).object();
    qint64 cached = 0, preemptions = 0;
    for (const RequestMetrics& m : requests) {
        cached += m.num_cached_tokens;
        preemptions += m.num_preemptions;
    }
    o["total_cached_tokens"] = cached;
    o["total_preemptions"] = preemptions;
    return o;
}

QJsonObject metricDefinitions() {
    return {
        {"ttft", "Time to first token: first output token time - arrival time (includes queueing and prefill)."},
        {"tpot", "Time per output token (vLLM): (E2EL - TTFT) / (output_tokens - 1), per request."},
        {"itl", "Inter-token latency (vLLM): every gap between consecutive output tokens, pooled over requests."},
        {"e2el", "End-to-end latency: finish time - arrival time."},
        {"queue_time", "First scheduled time - arrival time."},
        {"request_phases", "Request timeline lanes: queued = arrival to first scheduled; prefill = one span per step that "
                           "computes prompt tokens (or recomputes them after a preemption), until the token it samples; "
                           "decode = from that token to the finish; preempted = preemption (also the drain of a KV pool "
                           "rebuild) to the next prefill chunk."},
        {"request_throughput", "Completed requests / benchmark duration (req/s)."},
        {"output_throughput", "Output tokens / duration (tok/s)."},
        {"total_token_throughput", "(Input + output tokens) / duration (tok/s)."},
        {"kv_cache_usage", "KV blocks held by running requests / all blocks (kvscope:kv_cache_usage_perc)."},
        {"kv_waste", "Reserved KV slots that hold no token / reserved slots (internal fragmentation of the last "
                     "block in paged mode, the unused max_model_len tail in naive mode)."},
        {"batch_occupancy", "Requests scheduled in a step against max_num_seqs."},
        {"token_budget", "Prefill + decode tokens scheduled in a step against max_num_batched_tokens."},
        {"prefix_cache_hit_rate", "Prompt tokens served from the prefix cache / prompt tokens queried (vLLM's PrefixCacheStats)."},
        {"gui_max_stall_ms", "Longest lateness of a 5 ms GUI-thread timer: how long the event loop was blocked at worst."},
    };
}

}  // namespace kvscope::ui
