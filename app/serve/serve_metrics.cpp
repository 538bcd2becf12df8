#include "serve_metrics.h"

#include <cstdio>

namespace kvscope::cli {

namespace {

// vLLM's bucket bounds (vllm/v1/metrics/loggers.py), in seconds or tokens.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,   0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                                  0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestLatencyBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,    10.0,   15.0,  20.0,
                                                    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kIterationTokenBuckets = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
const std::vector<double> kParamsNBuckets = {1, 2, 5, 10, 20};
// vLLM's finished_reason label values (FINISH_REASON_STRINGS); kvscope never stops for repetition.
const char* const kFinishReasons[] = {"stop", "length", "abort", "error", "repetition"};

// 1, 2, 5, 10, 20, 50, ... up to max_value (vLLM's build_1_2_5_buckets).
std::vector<double> buckets_1_2_5(int max_value) {
    std::vector<double> out;
    for (double scale = 1;; scale *= 10)
        for (double m : {1.0, 2.0, 5.0}) {
            if (m * scale > max_value) return out;
            out.push_back(m * scale);
        }
}

std::string num(double v, const char* format = "%.9g") {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

// A bucket bound as Python's prometheus_client writes it ("0.001", "1.0", "2560.0"), so that label
// values match vLLM's exactly.
std::string bound_label(double v) {
    std::string s = num(v, "%g");
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
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

ServeMetrics::ServeMetrics(std::string model_name, std::string prefix, int max_model_len, CacheConfigInfo cache)
    : model_name_(std::move(model_name)), prefix_(std::move(prefix)), cache_(std::move(cache)),
      iteration_tokens_(kIterationTokenBuckets), ttft_(kTtftBuckets), itl_(kTokenLatencyBuckets),
      request_tpot_(kTokenLatencyBuckets), e2e_(kRequestLatencyBuckets), queue_time_(kRequestLatencyBuckets),
      inference_time_(kRequestLatencyBuckets), prefill_time_(kRequestLatencyBuckets), decode_time_(kRequestLatencyBuckets),
      prompt_tokens_per_request_(buckets_1_2_5(max_model_len)), generation_tokens_per_request_(buckets_1_2_5(max_model_len)),
      params_n_(kParamsNBuckets), params_max_tokens_(buckets_1_2_5(max_model_len)) {}

void ServeMetrics::on_step(const StepStats& stats) {
    std::lock_guard lock(mu_);
    ++num_steps_;
    const int tokens = stats.num_prefill_tokens + stats.num_decode_tokens;
    if (tokens > 0) iteration_tokens_.observe(tokens);
}

void ServeMetrics::on_request_finished(const RequestMetrics& m) {
    std::lock_guard lock(mu_);
    ++finished_by_reason_[std::string(to_string(m.finish_reason))];
    if (m.finish_time >= 0) e2e_.observe(m.e2el());
    if (m.queue_time() >= 0) queue_time_.observe(m.queue_time());
    prompt_tokens_per_request_.observe(m.num_prompt_tokens);
    generation_tokens_per_request_.observe(m.num_output_tokens);
    if (!m.has_first_token()) return;
    ttft_.observe(m.ttft());
    for (double gap : m.itls()) itl_.observe(gap);
    if (m.tpot() >= 0) request_tpot_.observe(m.tpot());
    if (m.first_scheduled_time >= 0) {
        prefill_time_.observe(m.token_times.front() - m.first_scheduled_time);
        inference_time_.observe(m.token_times.back() - m.first_scheduled_time);
    }
    decode_time_.observe(m.token_times.back() - m.token_times.front());
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

void ServeMetrics::observe_request_params(int n, int max_tokens) {
    std::lock_guard lock(mu_);
    params_n_.observe(n);
    params_max_tokens_.observe(max_tokens);
}

std::string ServeMetrics::render_prometheus() const {
    std::lock_guard lock(mu_);
    const std::string labels = "model_name=\"" + escape_label(model_name_) + "\",engine=\"0\"";
    std::string out;
    auto head = [&](const std::string& name, const char* type, const char* help) {
        out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    };
    auto scalar = [&](const char* name, const char* type, const char* help, const std::string& value) {
        const std::string full = prefix_ + ":" + name;
        head(full, type, help);
        out += full + "{" + labels + "} " + value + "\n";
    };
    if (!simulation_.gpu.empty()) {
        out += "# SIMULATED, not measured: " + simulation_.label + "; times are simulated seconds\n";
        const std::string info = prefix_ + ":simulation_info";
        head(info, "gauge", "A simulated accelerator: the GPU, tensor parallelism and step-time model in the labels");
        out += info + "{" + labels + ",gpu=\"" + escape_label(simulation_.gpu) + "\",tensor_parallel_size=\"" +
               std::to_string(simulation_.tensor_parallel_size) + "\",step_time_model=\"" +
               escape_label(simulation_.step_time_model) + "\"} 1.0\n";
    }
    auto histogram = [&](const char* name, const char* help, const Histogram& h) {
        const std::string base = prefix_ + ":" + name;
        head(base, "histogram", help);
        uint64_t cumulative = 0;
        for (size_t i = 0; i < h.bounds.size(); ++i) {
            cumulative += h.counts[i];
            out += base + "_bucket{" + labels + ",le=\"" + bound_label(h.bounds[i]) + "\"} " + std::to_string(cumulative) + "\n";
        }
        out += base + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
        out += base + "_sum{" + labels + "} " + num(h.sum) + "\n";
        out += base + "_count{" + labels + "} " + std::to_string(h.count) + "\n";
    };

    scalar("num_requests_running", "gauge", "Number of requests in model execution batches.",
           std::to_string(gauges_.num_running));
    scalar("num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           std::to_string(gauges_.num_waiting));
    scalar("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", num(gauges_.kv_cache_usage));
    scalar("prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
           std::to_string(gauges_.prefix_cache_queries));
    scalar("prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
           std::to_string(gauges_.prefix_cache_hits));
    scalar("num_preemptions_total", "counter", "Cumulative number of preemption from the engine.",
           std::to_string(gauges_.num_preemptions));
    scalar("prompt_tokens_total", "counter", "Number of prefill tokens processed.", std::to_string(prompt_tokens_));
    scalar("generation_tokens_total", "counter", "Number of generation tokens processed.",
           std::to_string(generation_tokens_));

    const std::string success = prefix_ + ":request_success_total";
    head(success, "counter", "Count of successfully processed requests.");
    for (const char* reason : kFinishReasons) {
        auto it = finished_by_reason_.find(reason);
        out += success + "{" + labels + ",finished_reason=\"" + reason + "\"} " +
               std::to_string(it == finished_by_reason_.end() ? 0 : it->second) + "\n";
    }

    // vLLM's info-style gauge: always 1, the configuration in its labels.
    const std::string info = prefix_ + ":cache_config_info";
    head(info, "gauge", "Information of the LLMEngine CacheConfig");
    out += info + "{block_size=\"" + std::to_string(cache_.block_size) + "\",cache_dtype=\"" + escape_label(cache_.cache_dtype) +
           "\",enable_prefix_caching=\"" + (cache_.enable_prefix_caching ? "True" : "False") + "\",engine=\"0\",num_gpu_blocks=\"" +
           std::to_string(cache_.num_gpu_blocks) + "\"} 1.0\n";

    histogram("request_prompt_tokens", "Number of prefill tokens processed.", prompt_tokens_per_request_);
    histogram("request_generation_tokens", "Number of generation tokens processed.", generation_tokens_per_request_);
    histogram("iteration_tokens_total", "Histogram of number of tokens per engine_step.", iteration_tokens_);
    histogram("request_params_n", "Histogram of the n request parameter.", params_n_);
    histogram("request_params_max_tokens", "Histogram of the max_tokens request parameter.", params_max_tokens_);
    histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_);
    histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl_);
    histogram("request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
              request_tpot_);
    histogram("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", e2e_);
    histogram("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", queue_time_);
    histogram("request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", inference_time_);
    histogram("request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", prefill_time_);
    histogram("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", decode_time_);

    // kvscope's own: not a vLLM family, so it keeps kvscope's prefix whatever --metrics-prefix says.
    head("kvscope:engine_steps_total", "counter", "Number of engine steps run.");
    out += "kvscope:engine_steps_total{" + labels + "} " + std::to_string(num_steps_) + "\n";
    return out;
}

}  // namespace kvscope::cli
