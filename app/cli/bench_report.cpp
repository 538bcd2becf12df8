#include "bench_report.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

namespace kvscope::cli {

namespace {

void rule(const char* title, char fill) {
    const int n = 50, len = static_cast<int>(std::string(title).size());
    const int left = (n - len) / 2;
    std::printf("%s%s%s\n", std::string(static_cast<size_t>(std::max(left, 0)), fill).c_str(), title,
                std::string(static_cast<size_t>(std::max(n - len - left, 0)), fill).c_str());
}

void row(const std::string& name, double v, int decimals = 2) { std::printf("%-40s %-10.*f\n", name.c_str(), decimals, v); }
void row_int(const std::string& name, int64_t v) { std::printf("%-40s %-10lld\n", name.c_str(), static_cast<long long>(v)); }
void row_str(const std::string& name, const std::string& v) { std::printf("%-40s %-10s\n", name.c_str(), v.c_str()); }

void latency_section(const char* title, const char* name, const LatencyStats& s) {
    rule(title, '-');
    row(std::string("Mean ") + name + " (ms):", s.mean);
    row(std::string("Median ") + name + " (ms):", s.median);
    for (const auto& [p, v] : s.percentiles) row("P" + percentile_word(p) + " " + name + " (ms):", v);
}

void engine_section(const BenchRun& r) {
    rule("Engine (kvscope)", '-');
    row_str("Mode:", std::string(to_string(r.config.mode)));
    row_int("Block size:", r.engine.block_size);
    row_int("KV blocks:", r.engine.num_blocks);
    row_int("Max num seqs:", r.config.scheduler.max_num_seqs);
    row("Mean batch size:", r.engine.mean_batch_size);
    row("Mean tokens per step:", r.engine.mean_tokens_per_step);
    if (r.config.mode == BatchingMode::NAIVE) row_int("Padding tokens computed:", r.engine.num_padding_tokens);
    row("KV usage peak (%):", 100 * r.engine.kv_usage_peak);
    row("KV usage mean (%):", 100 * r.engine.kv_usage_mean);
    row("KV waste mean (%):", 100 * r.engine.kv_waste_mean);
    row_int("Preemptions:", r.engine.num_preemptions);
    row("Prefix cache hit rate (%):", 100 * r.engine.prefix_cache_hit_rate);
}

}  // namespace

std::function<void(int, int)> make_progress(const std::string& label) {
    const bool tty = isatty(2);
    auto start = std::chrono::steady_clock::now();
    auto last_decile = std::make_shared<int>(-1);
    return [=](int done, int total) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const int pct = total ? done * 100 / total : 100;
        if (tty) {
            const int width = 30, fill = total ? done * width / total : width;
            std::fprintf(stderr, "\r%s [%s%s] %d/%d (%d%%) %.1f s", label.c_str(), std::string(size_t(fill), '#').c_str(),
                         std::string(size_t(width - fill), '.').c_str(), done, total, pct, secs);
            if (done == total) std::fputc('\n', stderr);
        } else if (pct / 10 != *last_decile) {
            *last_decile = pct / 10;
            std::fprintf(stderr, "%s: %d/%d requests done (%d%%, %.1f s)\n", label.c_str(), done, total, pct, secs);
        }
        std::fflush(stderr);
    };
}

void print_result_table(const BenchRun& r, const std::string& simulation) {
    const BenchmarkSummary& s = r.summary;
    rule((" Serving Benchmark Result (" + r.label + ") ").c_str(), '=');
    if (!simulation.empty()) std::printf("SIMULATED, not measured: %s; times are simulated seconds\n", simulation.c_str());
    row_int("Successful requests:", s.completed);
    if (s.failed) row_int("Failed requests:", s.failed);
    // Why they failed, once per reason with its count (a server that died fails dozens alike).
    std::map<std::string, int> why;
    for (const std::string& e : r.errors)
        if (!e.empty()) ++why[e];
    for (const auto& [e, n] : why) std::fprintf(stderr, "kvscope-cli bench: %s: %d request(s) failed: %s\n", r.label.c_str(), n, e.c_str());
    row("Benchmark duration (s):", s.duration);
    row_int("Total input tokens:", s.total_input_tokens);
    row_int("Total generated tokens:", s.total_output_tokens);
    row("Request throughput (req/s):", s.request_throughput);
    if (s.request_goodput) row("Request goodput (req/s):", *s.request_goodput);
    row("Output token throughput (tok/s):", s.output_throughput);
    row("Peak output token throughput (tok/s):", s.max_output_tokens_per_s);
    row_int("Peak concurrent requests:", s.max_concurrent_requests);
    row_int("Peak concurrent requests (instant):", s.max_concurrent_requests_instant);
    row("Total Token throughput (tok/s):", s.total_token_throughput);
    latency_section("Time to First Token", "TTFT", s.ttft);
    latency_section("Time per Output Token (excl. 1st token)", "TPOT", s.tpot);
    latency_section("Inter-token Latency", "ITL", s.itl);
    latency_section("End-to-end Latency", "E2EL", s.e2el);
    if (r.engine.num_steps > 0) engine_section(r);  // a remote target has no engine steps of ours
    rule("", '=');
    std::fflush(stdout);
}

void print_ratios(const nlohmann::json& ratios) {
    rule(" Paged vs naive (> 1: paged is better) ", '=');
    for (const auto& [k, v] : ratios.items()) row(k + ":", v.get<double>());
    rule("", '=');
    std::fflush(stdout);
}

void print_sweep_table(const std::string& knob, const std::vector<std::string>& values, const std::vector<BenchRun>& runs,
                       bool local_engine) {
    // The TTFT column is p99 where it was asked for, else the highest percentile asked (--percentiles).
    double pct = 99;
    if (!runs.empty() && !runs.front().summary.ttft.percentiles.empty()) {
        const auto& asked = runs.front().summary.ttft.percentiles;
        if (std::none_of(asked.begin(), asked.end(), [](const auto& pv) { return pv.first == 99; })) pct = asked.back().first;
    }
    char pct_label[32];
    std::snprintf(pct_label, sizeof pct_label, "p%gTTFT", pct);
    std::printf("%-24s %8s %10s %10s %10s %10s %10s", knob.c_str(), "req/s", "out tok/s", "meanTTFT", pct_label, "meanTPOT",
                "meanE2EL");
    if (local_engine) std::printf(" %7s %7s", "batch", "preempt");  // a remote server's steps are not seen
    std::printf("\n");
    for (size_t i = 0; i < runs.size(); ++i) {
        const BenchmarkSummary& s = runs[i].summary;
        double ttft_at = 0;
        for (const auto& [p, v] : s.ttft.percentiles)
            if (p == pct) ttft_at = v;
        std::printf("%-24s %8.2f %10.1f %10.1f %10.1f %10.2f %10.1f", values[i].c_str(), s.request_throughput,
                    s.output_throughput, s.ttft.mean, ttft_at, s.tpot.mean, s.e2el.mean);
        if (local_engine)
            std::printf(" %7.2f %7lld", runs[i].engine.mean_batch_size, static_cast<long long>(runs[i].engine.num_preemptions));
        std::printf("\n");
    }
    std::fflush(stdout);
}

}  // namespace kvscope::cli
