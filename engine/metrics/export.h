// Benchmark exports: the result JSON (vLLM `bench serve` keys plus engine config, model, backend,
// machine, git revision, seed and date), one CSV row per run, per-request JSONL with raw event
// timestamps, the per-step timeline, and a reader that loads a result JSON back (the GUI compares
// sessions from these files). No engine state: callers pass values.
#pragma once

#include "engine_config.h"
#include "metrics/request_metrics.h"
#include "metrics/step_recorder.h"
#include "metrics/step_stats.h"
#include "metrics/summary.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace kvscope {

// The git revision the engine was built from (KVSCOPE_GIT_REVISION), "unknown" outside a checkout.
std::string git_revision();
std::string kvscope_version();
// {"cpu_model", "hardware_threads", "threads", "gpu"}: CPU model from /proc/cpuinfo; gpu "none" on CPU.
nlohmann::json machine_info(int threads, const std::string& gpu = "none");
// vLLM's date format: 20250131-142501 (local time).
std::string result_date();
nlohmann::json engine_config_to_json(const EngineConfig& c);
// What every exported figure means (written into every export and shown in the GUI's help).
nlohmann::json metric_definitions();
// A CSV field: quoted (with doubled quotes) when it holds a comma, a quote or a newline.
std::string csv_quote(const std::string& s);

// One run as written in a result file: label, mode, engine_config, the vLLM keys and "engine" figures.
struct ResultRun {
    std::string label;
    nlohmann::json engine_config;
    BenchmarkSummary summary;
    EngineAggregates engine;
    // false for a remote target: its mode is "remote" and it has no engine_config or engine figures
    // (the JSON and the CSV then leave those keys and columns out rather than write local defaults).
    bool local_engine = true;
};
nlohmann::json run_to_json(const ResultRun& run);

// A result file read back: metadata, the runs (one; naive + paged; or sweep rows) and the ratios.
struct ResultFile {
    nlohmann::json raw;
    std::string date, model_id, backend, git_revision;
    uint64_t seed = 0;
    std::vector<ResultRun> runs;
    nlohmann::json ratios;  // speedup_* and ratio_* keys; empty unless --compare naive
};
// Throws BadInput naming the file when it is unreadable or not a kvscope/vLLM result.
ResultFile read_result_file(const std::string& path);

// One flat CSV row per run (header from the first row); values quoted where needed.
std::vector<std::pair<std::string, std::string>> csv_row(const ResultRun& run);
void write_csv(const std::string& path, const std::vector<ResultRun>& runs);

// A request's derived latencies in ms: ttft_ms, tpot_ms, e2el_ms, queue_time_ms, each null where the request
// has no such figure (no first token, fewer than two tokens, not finished, a remote engine's queue). Every
// per-request record (bench, generate, the GUI's session) writes them through this one function.
nlohmann::json request_latencies_ms(const RequestMetrics& m);
// One JSON object per request: raw engine-clock timestamps (seconds) and the derived latencies (ms).
nlohmann::json request_to_json(const RequestMetrics& m, double submit_time, const std::string& error);
void write_requests_jsonl(std::ostream& out, const std::vector<RequestMetrics>& requests,
                          const std::vector<double>& submit_times, const std::vector<std::string>& errors,
                          const std::string& run_label);

void write_json(const std::string& path, const nlohmann::json& j);
// Opens `path` for writing (truncating); throws BadInput naming it when it cannot.
std::ofstream open_output(const std::string& path);
// Closes what open_output opened; throws BadInput naming `path` when a write failed (a full disk).
void close_output(std::ofstream& out, const std::string& path);

}  // namespace kvscope
