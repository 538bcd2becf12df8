#include "serve_metrics.h"

#include <cstdio>

namespace kvscope::cli {

namespace {

// vLLM's bucket bounds (vllm/v1/metrics/loggers.py), in seconds.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,   0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTpotBuckets = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLatencyBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,    10.0,   15.0,  20.0,
                                             30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

std::string num(double v, const char* format = "%.9g") {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

std::string escape_label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds) : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double value) {
    size_t i = 0;
    while (i < bounds.size() && value > bounds[i]) ++i;  // le: a value equal to a bound falls in it
    ++counts[i];
    sum += value;
    ++count;
}

ServeMetrics::ServeMetrics(std::string model_name)
    : model_name_(std::move(model_name)), ttft_(kTtftBuckets), e2e_(kLatencyBuckets), tpot_(kTpotBuckets),
      queue_time_(kLatencyBuckets) {}

void ServeMetrics::on_step(const StepStats&) {
    std::lock_guard lock(mu_);
    ++num_steps_;
}

void ServeMetrics::on_request_finished(const RequestMetrics& m) {
    std::lock_guard lock(mu_);
    ++finished_by_reason_[std::string(to_string(m.finish_reason))];
    if (m.has_first_token()) ttft_.observe(m.ttft());
    if (m.finish_time >= 0) e2e_.observe(m.e2el());
    if (m.queue_time() >= 0) queue_time_.observe(m.queue_time());
    for (double gap : m.itls()) tpot_.observe(gap);
}

void ServeMetrics::set_engine_gauges(const EngineGauges& gauges) {
    std::lock_guard lock(mu_);
    gauges_ = gauges;
}

void ServeMetrics::add_prompt_tokens(int64_t n) {
    std::lock_guard lock(mu_);
    prompt_tokens_ += n;
}

void ServeMetrics::add_generation_tokens(int64_t n) {
    std::lock_guard lock(mu_);
    generation_tokens_ += n;
}

std::string ServeMetrics::render_prometheus() const {
    std::lock_guard lock(mu_);
    const std::string label = "model_name=\"" + escape_label(model_name_) + "\"";
    std::string out;
    auto scalar = [&](const char* name, const char* type, const char* help, const std::string& value) {
        out += std::string("# HELP kvscope:") + name + " " + help + "\n";
        out += std::string("# TYPE kvscope:") + name + " " + type + "\n";
        out += std::string("kvscope:") + name + "{" + label + "} " + value + "\n";
    };
    auto histogram = [&](const char* name, const char* help, const Histogram& h) {
        const std::string base = std::string("kvscope:") + name;
        out += "# HELP " + base + " " + help + "\n# TYPE " + base + " histogram\n";
        uint64_t cumulative = 0;
        for (size_t i = 0; i < h.bounds.size(); ++i) {
            cumulative += h.counts[i];
            out += base + "_bucket{" + label + ",le=\"" + num(h.bounds[i], "%g") + "\"} " + std::to_string(cumulative) + "\n";
        }
        out += base + "_bucket{" + label + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
        out += base + "_sum{" + label + "} " + num(h.sum) + "\n";
        out += base + "_count{" + label + "} " + std::to_string(h.count) + "\n";
    };

    scalar("num_requests_running", "gauge", "Number of requests in model execution batches.",
           std::to_string(gauges_.num_running));
    scalar("num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           std::to_string(gauges_.num_waiting));
    scalar("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", num(gauges_.kv_cache_usage));
    scalar("prompt_tokens_total", "counter", "Number of prefill tokens processed.", std::to_string(prompt_tokens_));
    scalar("generation_tokens_total", "counter", "Number of generation tokens processed.",
           std::to_string(generation_tokens_));
    scalar("num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.",
           std::to_string(gauges_.num_preemptions));
    scalar("prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
           std::to_string(gauges_.prefix_cache_queries));
    scalar("prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
           std::to_string(gauges_.prefix_cache_hits));
    scalar("engine_steps_total", "counter", "Number of engine steps run.", std::to_string(num_steps_));

    out += "# HELP kvscope:request_success_total Count of finished requests, by finish reason.\n"
           "# TYPE kvscope:request_success_total counter\n";
    for (const char* reason : {"stop", "length", "abort"}) {
        auto it = finished_by_reason_.find(reason);
        out += "kvscope:request_success_total{" + label + ",finished_reason=\"" + reason + "\"} " +
               std::to_string(it == finished_by_reason_.end() ? 0 : it->second) + "\n";
    }

    histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_);
    histogram("time_per_output_token_seconds", "Histogram of time per output token (inter-token latency) in seconds.",
              tpot_);
    histogram("e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", e2e_);
    histogram("request_queue_time_seconds", "Histogram of time spent waiting in the queue in seconds.", queue_time_);
    return out;
}

}  // namespace kvscope::cli
