#include "remote/server_metrics.h"

#include <array>

namespace kvscope {

ServerEngine engine_of_metrics(const std::vector<PromSample>& samples) {
    for (const PromSample& s : samples) {
        const std::string_view n = s.name;
        if (n.starts_with("kvscope:")) return ServerEngine::KVSCOPE;
        if (n.starts_with("vllm:")) return ServerEngine::VLLM;
        if (n.starts_with("sglang:")) return ServerEngine::SGLANG;
        if (n.starts_with("tgi_")) return ServerEngine::TGI;
        if (n.starts_with("llamacpp:")) return ServerEngine::LLAMACPP;
    }
    return ServerEngine::UNKNOWN;
}

namespace {

std::optional<double> sum_of(const std::vector<PromSample>& samples, std::string_view name) {
    std::optional<double> total;
    for (const PromSample& s : samples)
        if (s.name == name) total = total.value_or(0) + s.value;
    return total;
}

std::optional<double> mean_of(const std::vector<PromSample>& samples, std::string_view name) {
    double total = 0;
    int n = 0;
    for (const PromSample& s : samples)
        if (s.name == name) total += s.value, ++n;
    return n ? std::optional(total / n) : std::nullopt;
}

// The first of several names (an engine renamed a family between versions) that the page has.
template <class Fn>
std::optional<double> first_of(Fn&& read, std::initializer_list<std::string> names) {
    for (const std::string& n : names)
        if (auto v = read(n)) return v;
    return std::nullopt;
}

}  // namespace

ServerReading read_server_metrics(ServerEngine engine, const std::vector<PromSample>& s) {
    ServerReading r;
    auto sum = [&](const std::string& n) { return sum_of(s, n); };
    auto mean = [&](const std::string& n) { return mean_of(s, n); };
    switch (engine) {
        case ServerEngine::KVSCOPE:
        case ServerEngine::VLLM: {
            // kvscope writes vLLM's families under its own prefix (docs/DESIGN.md section 3).
            const std::string p = engine == ServerEngine::KVSCOPE ? "kvscope:" : "vllm:";
            r.num_requests_running = sum(p + "num_requests_running");
            r.num_requests_waiting = sum(p + "num_requests_waiting");
            r.kv_cache_usage = first_of(mean, {p + "kv_cache_usage_perc", p + "gpu_cache_usage_perc"});  // V0: gpu_
            r.num_preemptions_total = sum(p + "num_preemptions_total");
            r.prefix_cache_queries_total =
                first_of(sum, {p + "prefix_cache_queries_total", p + "gpu_prefix_cache_queries_total"});
            r.prefix_cache_hits_total = first_of(sum, {p + "prefix_cache_hits_total", p + "gpu_prefix_cache_hits_total"});
            r.prefix_cache_hit_rate = mean(p + "gpu_prefix_cache_hit_rate");  // V0's gauge
            r.prompt_tokens_total = sum(p + "prompt_tokens_total");
            r.generation_tokens_total = sum(p + "generation_tokens_total");
            break;
        }
        case ServerEngine::SGLANG:
            // SGLang's token_usage is the share of its KV pool (token slots) in use. Preemptions are
            // "retractions": the counter sglang:num_retracted_requests_total where the version has it
            // (python/sglang/srt/metrics/collector.py; older versions export only the gauge
            // sglang:num_retracted_reqs, retractions of the last logged step, which no series can
            // be made from). No prefix-cache counters: cache_hit_rate is its own gauge.
            r.num_requests_running = sum("sglang:num_running_reqs");
            r.num_preemptions_total = sum("sglang:num_retracted_requests_total");
            r.num_requests_waiting = sum("sglang:num_queue_reqs");
            r.kv_cache_usage = mean("sglang:token_usage");
            r.prefix_cache_hit_rate = mean("sglang:cache_hit_rate");
            r.prompt_tokens_total = sum("sglang:prompt_tokens_total");
            r.generation_tokens_total = sum("sglang:generation_tokens_total");
            r.generation_tokens_per_s = sum("sglang:gen_throughput");
            break;
        case ServerEngine::TGI:
            // TGI exposes no KV-cache, preemption or prefix-cache figures; token counts come from the
            // sums of its per-request length histograms.
            r.num_requests_running = sum("tgi_batch_current_size");
            r.num_requests_waiting = sum("tgi_queue_size");
            r.prompt_tokens_total = sum("tgi_request_input_length_sum");
            r.generation_tokens_total = sum("tgi_request_generated_tokens_sum");
            break;
        case ServerEngine::LLAMACPP:
            // llama-server (--metrics): slots processing and deferred requests; kv_cache_usage_ratio
            // only in the versions that still have it; no preemption counter (a slot is never
            // preempted). Versions with llamacpp:prompt_tokens_cached_total (prompt tokens reused from
            // a slot's cache) give the prefix-cache series: its prompt_tokens_total counts only the
            // tokens it processed, so the queries are both together.
            r.num_requests_running = sum("llamacpp:requests_processing");
            r.num_requests_waiting = sum("llamacpp:requests_deferred");
            r.kv_cache_usage = mean("llamacpp:kv_cache_usage_ratio");
            r.prompt_tokens_total = sum("llamacpp:prompt_tokens_total");
            r.generation_tokens_total = sum("llamacpp:tokens_predicted_total");
            r.prompt_tokens_per_s = sum("llamacpp:prompt_tokens_seconds");
            r.generation_tokens_per_s = sum("llamacpp:predicted_tokens_seconds");
            if (const auto cached = sum("llamacpp:prompt_tokens_cached_total")) {
                r.prefix_cache_hits_total = cached;
                r.prefix_cache_queries_total = *cached + r.prompt_tokens_total.value_or(0);
            }
            break;
        case ServerEngine::UNKNOWN: break;
    }
    return r;
}

namespace {

std::optional<double> rate(const std::optional<double>& now, const std::optional<double>& before, double dt) {
    if (!now || !before || dt <= 0) return std::nullopt;
    return std::max(0.0, *now - *before) / dt;  // a counter reset (server restart) reads as 0
}

}  // namespace

ServerSample server_sample(double time, const ServerReading& now, const ServerReading* prev, double prev_time,
                           const ServerReading& first) {
    ServerSample s;
    s.time = time;
    s.num_requests_running = now.num_requests_running;
    s.num_requests_waiting = now.num_requests_waiting;
    s.kv_cache_usage = now.kv_cache_usage;
    if (now.num_preemptions_total && first.num_preemptions_total)
        s.num_preemptions = std::max(0.0, *now.num_preemptions_total - *first.num_preemptions_total);
    const double dt = prev ? time - prev_time : 0;
    if (prev && now.prefix_cache_queries_total && prev->prefix_cache_queries_total && now.prefix_cache_hits_total &&
        prev->prefix_cache_hits_total) {
        const double q = *now.prefix_cache_queries_total - *prev->prefix_cache_queries_total;
        const double h = *now.prefix_cache_hits_total - *prev->prefix_cache_hits_total;
        s.prefix_cache_hit_rate = q > 0 ? h / q : 0.0;  // no queries in the interval: nothing hit
    } else {
        s.prefix_cache_hit_rate = now.prefix_cache_hit_rate;
    }
    s.prompt_tokens_per_s = prev ? rate(now.prompt_tokens_total, prev->prompt_tokens_total, dt) : std::nullopt;
    if (!now.prompt_tokens_total) s.prompt_tokens_per_s = now.prompt_tokens_per_s;
    s.generation_tokens_per_s = prev ? rate(now.generation_tokens_total, prev->generation_tokens_total, dt) : std::nullopt;
    if (!now.generation_tokens_total) s.generation_tokens_per_s = now.generation_tokens_per_s;
    return s;
}

const std::vector<std::string>& server_series_columns() {
    static const std::vector<std::string> columns = {
        "time_s", "num_requests_running", "num_requests_waiting", "kv_cache_usage", "num_preemptions",
        "prefix_cache_hit_rate", "prompt_tokens_per_s", "generation_tokens_per_s"};
    return columns;
}

nlohmann::json server_series_to_json(const ServerSeries& series, double start_time) {
    using nlohmann::json;
    auto value = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    json rows = json::array();
    std::array<bool, 7> seen{};
    for (const ServerSample& s : series.samples) {
        const std::array<const std::optional<double>*, 7> v = {
            &s.num_requests_running, &s.num_requests_waiting, &s.kv_cache_usage, &s.num_preemptions,
            &s.prefix_cache_hit_rate, &s.prompt_tokens_per_s, &s.generation_tokens_per_s};
        json row = json::array({s.time - start_time});
        for (size_t i = 0; i < v.size(); ++i) {
            row.push_back(value(*v[i]));
            seen[i] = seen[i] || v[i]->has_value();
        }
        rows.push_back(std::move(row));
    }
    json unreported = json::array();
    for (size_t i = 0; i < seen.size(); ++i)
        if (!seen[i]) unreported.push_back(server_series_columns()[i + 1]);
    return {{"engine", std::string(to_string(series.engine))}, {"interval_s", series.interval_s},
            {"scrapes", series.num_scrapes}, {"failed_scrapes", series.num_failed_scrapes},
            {"last_error", series.last_error}, {"columns", server_series_columns()}, {"samples", std::move(rows)},
            {"unreported", std::move(unreported)}};
}

}  // namespace kvscope
