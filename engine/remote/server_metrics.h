// The server-side series of a remote run: what a serving engine's /metrics page says, read into one
// set of series whatever the engine: requests running and waiting, KV-cache usage (0..1), preemptions
// (since the first scrape), prefix-cache hit rate (over the last interval), prompt and generation
// tokens per second. The families mapped: kvscope (`kvscope:`) and vLLM (`vllm:`, same names), SGLang
// (`sglang:`), TGI (`tgi_`) and llama-server (`llamacpp:`). A series the engine does not report stays
// empty (null) and is named in `unreported`. Pure functions and values; the scraping thread is
// MetricsScraper.
#pragma once

#include "remote/prometheus_text.h"
#include "remote/server_engine.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

// The engine whose metric families the page holds (UNKNOWN when none is known).
ServerEngine engine_of_metrics(const std::vector<PromSample>& samples);

// One scrape, read into the raw inputs of the series (nullopt: not on the page). Families with several
// label sets (data-parallel engines, several models) are summed; KV usage is their mean.
struct ServerReading {
    std::optional<double> num_requests_running, num_requests_waiting, kv_cache_usage;
    std::optional<double> num_preemptions_total, prefix_cache_queries_total, prefix_cache_hits_total;
    std::optional<double> prefix_cache_hit_rate;  // an engine's own gauge (SGLang), when it has no counters
    std::optional<double> prompt_tokens_total, generation_tokens_total;
    std::optional<double> prompt_tokens_per_s, generation_tokens_per_s;  // an engine's own gauges
};
ServerReading read_server_metrics(ServerEngine engine, const std::vector<PromSample>& samples);

// One point of the series.
struct ServerSample {
    double time = 0;  // seconds on the benchmark target's clock
    std::optional<double> num_requests_running, num_requests_waiting, kv_cache_usage, num_preemptions,
        prefix_cache_hit_rate, prompt_tokens_per_s, generation_tokens_per_s;
};
// The point at `time` from this reading, the previous one (rates from counter differences; the
// engine's gauge where it has no counter) and the first (preemptions since the first scrape).
ServerSample server_sample(double time, const ServerReading& now, const ServerReading* previous, double previous_time,
                           const ServerReading& first);

// The column names of a sample, in the order server_series_to_json writes them.
const std::vector<std::string>& server_series_columns();

struct ServerSeries {
    ServerEngine engine = ServerEngine::UNKNOWN;
    double interval_s = 1;
    int num_scrapes = 0, num_failed_scrapes = 0;
    std::string last_error;    // why the latest failed scrape failed ("HTTP 501: ..."); the URL is the caller's
    bool last_failed = false;  // the latest scrape failed (the server stopped answering, or has no /metrics)
    std::vector<ServerSample> samples;
};
// {"engine", "interval_s", "scrapes", "failed_scrapes", "last_error", "columns", "samples" ([[t - start,
// values or null...]]), "unreported" (columns never reported)}.
nlohmann::json server_series_to_json(const ServerSeries& series, double start_time);

}  // namespace kvscope
