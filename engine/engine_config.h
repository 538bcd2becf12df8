// The engine's configuration: the scheduler's knobs plus what shapes the KV pool (block_size, the KV
// byte budget) and the batching mode. Changing the pool's shape at run time is a drain-and-rebuild.
#pragma once

#include "sched/scheduler_config.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace kvscope {

// paged: paged KV cache + continuous batching. naive: the seed article's baseline, static batches that
// each reserve max_model_len contiguous slots per request.
enum class BatchingMode { PAGED, NAIVE };
std::string_view to_string(BatchingMode mode);  // "paged" | "naive"
// Throws BadInput naming the value.
BatchingMode parse_batching_mode(std::string_view name);

// cpu, cuda, or auto (CUDA when its library loads and a device is present, else the CPU); sim: a
// simulated GPU (sim/gpu_specs.h): the real engine with a predicted step time and no weights.
enum class BackendKind { CPU, CUDA, AUTO, SIM };
std::string_view to_string(BackendKind kind);  // "cpu" | "cuda" | "auto" (make_backend()'s names) | "sim"
// Throws BadInput naming the value. "sim:GPU" is parse_backend's.
BackendKind parse_backend_kind(std::string_view name);

struct EngineConfig {
    SchedulerConfig scheduler;
    int block_size = 16;          // power of two, 1..256
    int64_t kv_cache_memory = 0;  // bytes for the KV pool; 0 = default (see resolve())
    int num_blocks = 0;           // explicit block count (tests); overrides kv_cache_memory
    // On a backend with device memory (CUDA): the fraction of it for weights, activations and the KV pool
    // (vLLM's meaning); the pool takes what the weights and a profiled activation peak leave. Unused on
    // the CPU, and when kv_cache_memory or num_blocks is given.
    double gpu_memory_utilization = 0.9;
    BatchingMode mode = BatchingMode::PAGED;
    std::string kv_cache_dtype = "auto";  // auto | float32 | float16 | bfloat16 (kv/kv_cache_dtype.h)
    int num_threads = 0;          // CPU threads; 0 = all cores
    BackendKind backend = BackendKind::CPU;
    std::string sim_gpu;          // backend SIM: the GPU (gpu_specs.h name, e.g. "h100-sxm")
    int tensor_parallel_size = 1; // backend SIM: GPUs the model is sharded over (vLLM's name)
    std::string sim_calibration;  // backend SIM: a calibration file for the step-time model ("" = defaults)
    double sim_pace = 0;          // backend SIM: simulated seconds per wall second (0 = as fast as possible)
    uint64_t seed = 0;            // seeds requests without their own seed
    bool enforce_eager = false;   // run every step op by op: no CUDA graphs for decode steps (vLLM's name)
    bool check_invariants = false;  // check scheduler and pool invariants after every step (tests)
    // Where every layer of the model is windowed (Mistral 7B v0.1), free the blocks a running request has
    // left behind its sliding window (vLLM does); off keeps them until the request ends (tests compare).
    bool free_outside_window = true;

    // Throws BadInput naming the knob and value.
    void validate() const;
};

// Sets backend (and sim_gpu for "sim:GPU") from a --backend value; throws BadInput naming the value
// (for an unknown GPU, with the list of known ones).
void parse_backend(std::string_view name, EngineConfig& config);
// "sim:h100-sxm" for a simulated backend, else to_string(config.backend).
std::string backend_name(const EngineConfig& config);

// max_model_len when none is given: the model's context, at most 8192 (a longer one is asked for).
int default_max_model_len(int max_position_embeddings);

// The default KV budget, for the CLI and the GUI alike: what max_num_seqs requests at max_model_len
// need, but at most 65,536 tokens (4096 blocks of 16: a block map that shows single blocks) and at most
// 1 GiB. kv_bytes_per_token is the cache's own type (a 16-bit cache holds as many tokens in half the bytes).
int64_t default_kv_cache_memory(int64_t kv_bytes_per_token, int max_num_seqs, int max_model_len);

}  // namespace kvscope
