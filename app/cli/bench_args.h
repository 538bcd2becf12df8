// The bench command's flags and the pieces of it that the local and the remote run share (app/cli/
// cmd_bench.cpp defines them): the options, the workload and driver options built from them, the
// result JSON of a run, and the output files.
#pragma once

#include "bench/bench_driver.h"
#include "bench/workload.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace kvscope::cli {

// The bench flags (the engine knobs come from engine_options); defaults as `vllm bench serve` has them,
// but 100 prompts instead of 1000.
struct BenchArgs {
    std::string dataset = "random", dataset_path;
    int num_prompts = 100, input_len = 1024, output_len = 128, prefix_len = 0;
    bool output_len_given = false;  // sharegpt: force output_len instead of the reply's length
    double range_ratio = 0.0, output_range_ratio = -1.0;  // output: < 0 follows range_ratio
    bool output_range_ratio_given = false;                // the JSON then records it, else range_ratio
    double request_rate = INFINITY, burstiness = 1.0;
    int max_concurrency = 0, num_warmups = 1;
    uint64_t seed = 0;
    float temperature = 0.0f;
    std::string compare, sweep;
    std::vector<double> percentiles = {50, 90, 99};
    GoodputSlo goodput;
    std::string output_json, output_csv, output_requests;
    bool save_timeline = false;
};


// The bench flags, bound to `a` (the engine knobs come from add_engine_options).
void add_bench_options(CLI::App& app, BenchArgs& a);
WorkloadOptions workload_from(const BenchArgs& a, int max_model_len);
BenchOptions options_from(const BenchArgs& a, size_t num_requests);
// The metadata every result has (workload, arrivals, goodput, seed, revision, metric definitions);
// each target adds what it is (endpoint_type, backend, model_id, machine, ...).
nlohmann::json bench_metadata(const BenchArgs& a, const BenchOptions& o);
// One run's section: the vLLM keys, label, mode, engine_config, engine, start_time, kv_usage_over_time.
nlohmann::json run_json(const BenchRun& r, bool timeline);
// --output-json, --output-csv (one row per run; local_engine false for a remote target: no engine columns)
// and --output-requests.
void write_outputs(const BenchArgs& a, const nlohmann::json& result, const std::vector<const BenchRun*>& runs,
                   bool local_engine = true);
// Checks that every output path can be written before minutes of benchmarking.
void check_outputs(const BenchArgs& a);

}  // namespace kvscope::cli
