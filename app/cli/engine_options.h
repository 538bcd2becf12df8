// The engine knobs that generate, bench and serve share (DESIGN.md section 4), and how they map onto
// EngineConfig.
#pragma once

#include "args.h"
#include "engine_config.h"
#include "model/model.h"

#include <set>
#include <string>

namespace kvscope::cli {

// Flags taking a value / switches, to merge into a subcommand's own.
std::set<std::string> engine_value_flags();
std::set<std::string> engine_switch_flags();

// Builds the engine config for `model` from the flags (defaults as in vLLM where it has one).
EngineConfig engine_config_from(const Args& args, const ModelConfig& model);

}  // namespace kvscope::cli
