// --sweep KNOB=V1,V2,...: the knobs a benchmark can sweep in one process (max-num-seqs, block-size,
// max-num-batched-tokens, policy, ...) and how each value maps onto an EngineConfig, applied between
// runs with LlmEngine::reconfigure() instead of vLLM's server restart.
#pragma once

#include "engine_config.h"

#include <string>
#include <vector>

namespace kvscope {

struct SweepSpec {
    std::string knob;                 // flag name without dashes: "max-num-seqs"
    std::vector<std::string> values;  // as given
};

// Throws BadInput naming --sweep and the problem (unknown knob, empty or malformed list).
SweepSpec parse_sweep(const std::string& text);
// `base` with knob = value; throws BadInput for a malformed or invalid value.
EngineConfig apply_knob(EngineConfig base, const std::string& knob, const std::string& value);
// The knobs apply_knob() knows.
std::vector<std::string> sweep_knobs();

}  // namespace kvscope
