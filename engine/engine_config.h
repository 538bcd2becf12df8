// The engine's configuration: the scheduler's knobs plus what shapes the KV pool (block_size, the KV
// byte budget) and the batching mode. Changing the pool's shape at run time is a drain-and-rebuild.
#pragma once

#include "sched/scheduler_config.h"

#include <cstdint>
#include <string>

namespace kvscope {

struct EngineConfig {
    SchedulerConfig scheduler;
    int block_size = 16;          // power of two, 1..256
    int64_t kv_cache_memory = 0;  // bytes for the KV pool; 0 = default (see resolve())
    int num_blocks = 0;           // explicit block count (tests); overrides kv_cache_memory
    std::string mode = "paged";   // paged | naive
    std::string kv_cache_dtype = "auto";  // auto | float32 | float16 | bfloat16 (kv/kv_cache_dtype.h)
    int num_threads = 0;          // CPU threads; 0 = all cores
    std::string backend = "cpu";  // cpu | cuda | auto (CUDA when built and a device is present)
    uint64_t seed = 0;            // seeds requests without their own seed
    bool enforce_eager = false;   // run every step op by op: no CUDA graphs for decode steps (vLLM's name)
    bool check_invariants = false;  // check scheduler and pool invariants after every step (tests)

    // Throws BadInput naming the knob and value.
    void validate() const;
};

// The default KV budget: 1 GiB, but no more than max_num_seqs requests at max_model_len need.
int64_t default_kv_cache_memory(int64_t kv_bytes_per_token, int max_num_seqs, int max_model_len);

}  // namespace kvscope
