// ModelExecutor: what the engine needs from whatever runs a step's forward pass and sampling. The
// ModelRunner runs the real model on a Backend; the SimModelRunner (sim/sim_model_runner.h) predicts
// the step's time on a simulated accelerator and draws tokens from a seeded generator. The engine,
// scheduler and KV cache manager are the same for both. Engine thread only.
#pragma once

#include "kv/kv_cache_manager.h"
#include "kv_cache_layout.h"
#include "runner/sampler_output.h"
#include "sched/request.h"
#include "sched/scheduler_output.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

class ModelExecutor {
public:
    virtual ~ModelExecutor() = default;

    // A request's sampling state, from its admission (seed: its draws) to its end.
    virtual void add_request(const Request& r, uint64_t seed) = 0;
    virtual void remove_request(const std::string& request_id) = 0;

    // One engine step: a token for every scheduled request that samples, in the scheduler's order, with
    // its log-probabilities where the request asked and the executor has logits (a simulation has none).
    virtual SamplerOutput execute(const SchedulerOutput& out, const KvCacheManager& kv) = 0;

    // vLLM's profile run: brings activations to their peak before the KV pool is sized from what is left.
    virtual void profile_run() = 0;
    // One forward of `token` at position 0 (in the pool's first block, which no request holds yet): throws
    // BadInput when its logits are not all finite, for a model whose weights hold NaN or Inf (a damaged
    // file generated token 0 for ever, with rc 0). Executors without logits (a simulation) do nothing.
    virtual void check_logits_finite(int32_t /*token*/) {}
    // Grows the step buffers for larger steps (live reconfiguration); never shrinks them.
    virtual void ensure_capacity(int max_num_tokens, int max_num_logits) = 0;
    // Rebuilds the KV cache for a new geometry (drain-and-rebuild: no request may hold blocks).
    virtual void reset_kv_cache(int num_blocks, int block_size, DType kv_dtype) = 0;
    // CUDA graphs for decode steps where the backend has them; max_model_len bounds every context.
    virtual void set_cuda_graphs(bool enabled, int max_model_len) = 0;

    virtual const KvCacheLayout& kv_layout() const = 0;
    virtual size_t kv_cache_bytes() const = 0;
    virtual size_t activation_bytes() const = 0;
};

}  // namespace kvscope
