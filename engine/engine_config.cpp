#include "engine_config.h"

#include "kv/kv_cache_dtype.h"
#include "sim/gpu_specs.h"
#include "util/errors.h"

#include <algorithm>

namespace kvscope {

std::string_view to_string(BatchingMode mode) { return mode == BatchingMode::NAIVE ? "naive" : "paged"; }

std::string_view to_string(BackendKind kind) {
    switch (kind) {
    case BackendKind::CUDA: return "cuda";
    case BackendKind::AUTO: return "auto";
    case BackendKind::SIM: return "sim";
    default: return "cpu";
    }
}

BackendKind parse_backend_kind(std::string_view name) {
    if (name == "cpu") return BackendKind::CPU;
    if (name == "cuda") return BackendKind::CUDA;
    if (name == "auto") return BackendKind::AUTO;
    throw BadInput("backend must be cpu, cuda, auto or sim:GPU (GPU: " + gpu_spec_names() + "), got '" +
                   std::string(name.substr(0, 64)) + "'");
}

void parse_backend(std::string_view name, EngineConfig& c) {
    if (name.rfind("sim:", 0) == 0 || name == "sim") {
        const std::string gpu(name.size() > 4 ? name.substr(4) : std::string_view{});
        if (gpu.empty()) throw BadInput("backend sim needs a GPU: sim:GPU with GPU one of " + gpu_spec_names());
        (void)find_gpu_spec(gpu);  // BadInput with the list
        c.backend = BackendKind::SIM;
        c.sim_gpu = gpu;
        return;
    }
    c.backend = parse_backend_kind(name);
    c.sim_gpu.clear();
}

std::string backend_name(const EngineConfig& c) {
    return c.backend == BackendKind::SIM ? "sim:" + c.sim_gpu : std::string(to_string(c.backend));
}

BatchingMode parse_batching_mode(std::string_view name) {
    if (name == "paged") return BatchingMode::PAGED;
    if (name == "naive") return BatchingMode::NAIVE;
    throw BadInput("mode must be paged or naive, got '" + std::string(name.substr(0, 64)) + "'");
}

void EngineConfig::validate() const {
    scheduler.validate();
    auto bad = [](const std::string& what) { throw BadInput("invalid engine setting: " + what); };
    if (block_size < 1 || block_size > 256 || (block_size & (block_size - 1)) != 0)
        bad("block_size must be a power of two from 1 to 256, got " + std::to_string(block_size));
    if (kv_cache_memory < 0) bad("kv_cache_memory must be >= 0, got " + std::to_string(kv_cache_memory));
    if (!(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1))
        bad("gpu_memory_utilization must be in (0, 1], got " + std::to_string(gpu_memory_utilization));
    if (num_blocks < 0) bad("num_blocks must be >= 0, got " + std::to_string(num_blocks));
    if (!is_kv_cache_dtype_name(kv_cache_dtype))
        bad("kv_cache_dtype must be auto, float32, float16 or bfloat16, got '" + kv_cache_dtype + "'");
    if (backend == BackendKind::SIM) (void)find_gpu_spec(sim_gpu);
    if (tensor_parallel_size < 1 || tensor_parallel_size > 64)
        bad("tensor_parallel_size must be in 1..64, got " + std::to_string(tensor_parallel_size));
    if (tensor_parallel_size > 1 && backend != BackendKind::SIM)
        bad("tensor_parallel_size > 1 needs a simulated backend (--backend sim:GPU): kvscope runs one device");
    if (!sim_calibration.empty() && backend != BackendKind::SIM)
        bad("a sim calibration (--sim-calibration) sets a simulated GPU's step time: it needs --backend sim:GPU");
    if (!(sim_pace >= 0)) bad("sim pace must be >= 0, got " + std::to_string(sim_pace));
    if (num_threads < 0 || num_threads > 256) bad("threads must be in 0..256, got " + std::to_string(num_threads));
}

int default_max_model_len(int max_position_embeddings) { return std::min(max_position_embeddings, 8192); }

int64_t default_kv_cache_memory(int64_t kv_bytes_per_token, int max_num_seqs, int max_model_len) {
    const int64_t one_gib = int64_t{1} << 30, max_tokens = int64_t{4096} * 16;
    const int64_t tokens = std::min(max_tokens, int64_t{max_num_seqs} * max_model_len);
    return std::min(one_gib, kv_bytes_per_token * tokens);
}

}  // namespace kvscope
