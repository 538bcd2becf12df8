// What `kvscope-cli bench` prints: a progress bar on a terminal (plain lines otherwise), the vLLM-style
// result table plus the engine figures, the --compare naive ratios and the --sweep table. Output only;
// the numbers come from BenchRun values.
#pragma once

#include "bench/bench_runner.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kvscope::cli {

// A progress callback for BenchOptions: a redrawn bar when stderr is a terminal, else a line per 10%.
std::function<void(int, int)> make_progress(const std::string& label);

// simulation: LlmEngine::simulation_label() ("" for a real engine): printed first, and every time
// in the table is then simulated seconds.
void print_result_table(const BenchRun& run, const std::string& simulation = "");
void print_ratios(const nlohmann::json& ratios);
// local_engine: add the engine's mean batch and preemptions (a remote server's steps are not seen).
void print_sweep_table(const std::string& knob, const std::vector<std::string>& values, const std::vector<BenchRun>& runs,
                       bool local_engine);

}  // namespace kvscope::cli
