// What a simulated run says about itself in every export (bench JSON, info, generate's summary, the
// server's /metrics): that it is simulated, the GPU, the model, the step-time model's version and
// where its constants came from. Engine thread (reads the engine).
#pragma once

#include <nlohmann/json.hpp>

namespace kvscope {

class LlmEngine;

// {"simulated": true, "label", "gpu", "gpu_name", "tensor_parallel_size", "model", "step_time_model",
//  "constants", "constants_source", "num_blocks", "device_memory_bytes", "weight_bytes"};
// null for an engine on a real backend.
nlohmann::json simulation_to_json(const LlmEngine& engine);

}  // namespace kvscope
