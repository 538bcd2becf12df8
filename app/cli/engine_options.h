// The engine knobs that generate, bench, serve and info share (docs/DESIGN.md section 4): one function
// adds them to a command's CLI::App, one builds the EngineConfig from what was parsed.
#pragma once

#include "engine_config.h"
#include "model/model.h"

#include <CLI/CLI.hpp>

#include <string>

namespace kvscope::cli {

// What the engine flags parse into. The knobs are bound in place in `config`, so their defaults are
// EngineConfig's (vLLM's where it has one), except max_model_len, which depends on the model.
struct EngineOptions {
    std::string model;      // --model: a Hugging Face directory, a .gguf file or dummy:PRESET
    EngineConfig config;    // every other knob; config.scheduler.max_model_len is set by engine_config_from
    int max_model_len = 0;  // 0 = not given: the model's context, at most 8192
    std::string mode = "paged";   // --mode, parsed into config.mode by engine_config_from
    std::string policy = "fcfs";  // --policy, likewise
    std::string backend = "cpu";  // --backend, likewise (sim:GPU sets config.sim_gpu too)
};

// The --help group of the engine knobs (a remote bench refuses those the server owns by it).
inline constexpr const char* kEngineOptionsGroup = "Engine options";

// Adds --model (required) and the engine knobs, under "Engine options" in --help, bound to `options`.
void add_engine_options(CLI::App& app, EngineOptions& options);

// The validated engine config for `model`; throws BadInput naming the knob and value.
EngineConfig engine_config_from(const EngineOptions& options, const ModelConfig& model);

// Loads --model: without weights for a simulated backend (the shapes are all it needs).
std::unique_ptr<Model> load_model_for(const EngineOptions& options);

}  // namespace kvscope::cli
