#include "metrics/summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace kvscope {

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(rank));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

std::string percentile_word(double p) {
    if (p == std::floor(p)) return std::to_string(static_cast<long long>(p));
    std::ostringstream s;
    s << p;
    return s.str();
}

LatencyStats latency_stats(const std::vector<double>& seconds, const std::vector<double>& percentiles) {
    LatencyStats s;
    std::vector<double> ms(seconds.size());
    std::transform(seconds.begin(), seconds.end(), ms.begin(), [](double x) { return x * 1e3; });
    if (!ms.empty()) {
        s.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / double(ms.size());
        double var = 0;
        for (double x : ms) var += (x - s.mean) * (x - s.mean);
        s.std = std::sqrt(var / double(ms.size()));
    }
    s.median = percentile(ms, 50);
    for (double p : percentiles) s.percentiles.emplace_back(p, percentile(ms, p));
    return s;
}

namespace {

bool succeeded(const RequestMetrics& m) {
    return m.finish_time >= 0 && m.finish_reason != FinishReason::ERROR && m.finish_reason != FinishReason::ABORT &&
           m.has_first_token();
}

// vLLM: tokens per 1 s bucket from the earliest arrival; a request counts as concurrent in every
// bucket from its arrival second to its finish second.
// Per-second buckets from the first arrival, as vLLM's bench counts them, kept sparse: a run spread over a
// long time (a tiny --request-rate: 10^20 s) costs its requests and tokens, not its seconds (a dense vector
// of buckets took 9 GB at 10^9 s, and crashed past that).
void fill_peaks(const std::vector<const RequestMetrics*>& ok, BenchmarkSummary& s) {
    if (ok.empty()) return;
    double t0 = ok.front()->arrival_time;
    for (const RequestMetrics* m : ok) t0 = std::min(t0, m->arrival_time);
    auto bucket = [t0](double t) { return std::floor(t - t0); };
    std::vector<double> token_buckets;
    for (const RequestMetrics* m : ok)
        for (double t : m->token_times) token_buckets.push_back(bucket(t));
    std::sort(token_buckets.begin(), token_buckets.end());
    for (size_t i = 0, j = 0; i < token_buckets.size(); i = j) {
        while (j < token_buckets.size() && token_buckets[j] == token_buckets[i]) ++j;
        s.max_output_tokens_per_s = std::max(s.max_output_tokens_per_s, static_cast<double>(j - i));
    }
    // A request counts in every bucket from its arrival's to its finish's; leaving sorts before arriving.
    std::vector<std::pair<double, int>> spans, events;  // (bucket or time, -1 leave / +1 arrive)
    for (const RequestMetrics* m : ok) {
        spans.emplace_back(bucket(m->arrival_time), 1), spans.emplace_back(bucket(m->finish_time) + 1, -1);
        events.emplace_back(m->arrival_time, 1), events.emplace_back(m->finish_time, -1);
    }
    std::sort(spans.begin(), spans.end());
    std::sort(events.begin(), events.end());
    int alive = 0;
    for (const auto& [b, d] : spans) s.max_concurrent_requests = std::max(s.max_concurrent_requests, alive += d);
    alive = 0;  // at an instant, finishes first on ties
    for (const auto& [t, d] : events) s.max_concurrent_requests_instant = std::max(s.max_concurrent_requests_instant, alive += d);
}

// vLLM: a request is good when it meets every given SLO; TPOT of a one-token request is 0.
bool meets(const RequestMetrics& m, const GoodputSlo& slo) {
    const double tpot = m.num_output_tokens > 1 ? m.tpot() : 0.0;
    return (!slo.ttft_ms || m.ttft() * 1e3 <= *slo.ttft_ms) && (!slo.tpot_ms || tpot * 1e3 <= *slo.tpot_ms) &&
           (!slo.e2el_ms || m.e2el() * 1e3 <= *slo.e2el_ms);
}

void put_stats(nlohmann::json& j, const std::string& name, const LatencyStats& s) {
    j["mean_" + name + "_ms"] = s.mean;
    j["median_" + name + "_ms"] = s.median;
    j["std_" + name + "_ms"] = s.std;
    for (const auto& [p, v] : s.percentiles) j["p" + percentile_word(p) + "_" + name + "_ms"] = v;
}

LatencyStats get_stats(const nlohmann::json& j, const std::string& name) {
    LatencyStats s;
    s.mean = j.value("mean_" + name + "_ms", 0.0);
    s.median = j.value("median_" + name + "_ms", 0.0);
    s.std = j.value("std_" + name + "_ms", 0.0);
    const std::string suffix = "_" + name + "_ms";
    for (const auto& [key, v] : j.items())
        if (key.size() > suffix.size() + 1 && key[0] == 'p' && key.ends_with(suffix) && v.is_number())
            s.percentiles.emplace_back(std::stod(key.substr(1, key.size() - 1 - suffix.size())), v.get<double>());
    std::sort(s.percentiles.begin(), s.percentiles.end());
    return s;
}

}  // namespace

BenchmarkSummary summarize(const std::vector<RequestMetrics>& requests, double duration,
                           const std::vector<double>& percentiles, const GoodputSlo& slo) {
    BenchmarkSummary s;
    s.duration = duration;
    std::vector<const RequestMetrics*> ok;
    std::vector<double> ttfts, tpots, itls, e2els;
    int good = 0;
    for (const RequestMetrics& m : requests) {
        if (!succeeded(m)) {
            ++s.failed;
            continue;
        }
        ok.push_back(&m);
        ++s.completed;
        s.total_input_tokens += m.num_prompt_tokens;
        s.total_output_tokens += m.num_output_tokens;
        ttfts.push_back(m.ttft());
        e2els.push_back(m.e2el());
        if (m.num_output_tokens > 1) tpots.push_back(m.tpot());
        for (double x : m.itls()) itls.push_back(x);
        good += meets(m, slo);
    }
    if (duration > 0) {
        s.request_throughput = s.completed / duration;
        s.output_throughput = double(s.total_output_tokens) / duration;
        s.total_token_throughput = double(s.total_input_tokens + s.total_output_tokens) / duration;
        if (!slo.empty()) s.request_goodput = good / duration;
    }
    s.ttft = latency_stats(ttfts, percentiles);
    s.tpot = latency_stats(tpots, percentiles);
    s.itl = latency_stats(itls, percentiles);
    s.e2el = latency_stats(e2els, percentiles);
    fill_peaks(ok, s);
    return s;
}

nlohmann::json BenchmarkSummary::to_json() const {
    nlohmann::json j;
    j["duration"] = duration;
    j["completed"] = completed;
    j["failed"] = failed;
    j["total_input_tokens"] = total_input_tokens;
    j["total_output_tokens"] = total_output_tokens;
    j["request_throughput"] = request_throughput;
    j["request_goodput"] = request_goodput ? nlohmann::json(*request_goodput) : nlohmann::json(nullptr);
    j["output_throughput"] = output_throughput;
    j["total_token_throughput"] = total_token_throughput;
    j["max_output_tokens_per_s"] = max_output_tokens_per_s;
    j["max_concurrent_requests"] = max_concurrent_requests;
    j["max_concurrent_requests_instant"] = max_concurrent_requests_instant;
    put_stats(j, "ttft", ttft);
    put_stats(j, "tpot", tpot);
    put_stats(j, "itl", itl);
    put_stats(j, "e2el", e2el);
    return j;
}

BenchmarkSummary BenchmarkSummary::from_json(const nlohmann::json& j) {
    BenchmarkSummary s;
    s.duration = j.value("duration", 0.0);
    s.completed = j.value("completed", 0);
    s.failed = j.value("failed", 0);
    s.total_input_tokens = j.value("total_input_tokens", int64_t{0});
    s.total_output_tokens = j.value("total_output_tokens", int64_t{0});
    s.request_throughput = j.value("request_throughput", 0.0);
    if (j.contains("request_goodput") && j["request_goodput"].is_number()) s.request_goodput = j["request_goodput"];
    s.output_throughput = j.value("output_throughput", 0.0);
    s.total_token_throughput = j.value("total_token_throughput", 0.0);
    s.max_output_tokens_per_s = j.value("max_output_tokens_per_s", 0.0);
    s.max_concurrent_requests = j.value("max_concurrent_requests", 0);
    s.max_concurrent_requests_instant = j.value("max_concurrent_requests_instant", 0);
    s.ttft = get_stats(j, "ttft");
    s.tpot = get_stats(j, "tpot");
    s.itl = get_stats(j, "itl");
    s.e2el = get_stats(j, "e2el");
    return s;
}

namespace {

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

double p99(const LatencyStats& s) {
    for (const auto& [p, v] : s.percentiles)
        if (p == 99) return v;
    return s.percentiles.empty() ? s.mean : s.percentiles.back().second;
}

}  // namespace

nlohmann::json compare_ratios(const BenchmarkSummary& naive, const BenchmarkSummary& paged) {
    return {{"speedup_output_throughput", ratio(paged.output_throughput, naive.output_throughput)},
            {"speedup_request_throughput", ratio(paged.request_throughput, naive.request_throughput)},
            {"ratio_mean_e2el", ratio(naive.e2el.mean, paged.e2el.mean)},
            {"ratio_p99_e2el", ratio(p99(naive.e2el), p99(paged.e2el))},
            {"ratio_mean_ttft", ratio(naive.ttft.mean, paged.ttft.mean)},
            {"ratio_p99_ttft", ratio(p99(naive.ttft), p99(paged.ttft))},
            {"ratio_mean_tpot", ratio(naive.tpot.mean, paged.tpot.mean)}};
}

}  // namespace kvscope
