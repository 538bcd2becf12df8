// What one engine step did and the state it left: batch composition, token counts, KV usage, prefix
// cache and memory figures. One value per step, sent to the metrics sink (UI, benchmark, server).
#pragma once

#include <cstdint>
#include <string>

namespace kvscope {

struct MemoryStats {
    int64_t weights_bytes = 0;
    int64_t kv_pool_bytes = 0;
    int64_t activation_bytes = 0;
    int64_t host_rss_bytes = 0;
    int64_t device_total_bytes = 0;  // 0 on the CPU backend
    int64_t device_used_bytes = 0;
};

// The work of a step as the step-time model counts it (engine/sim/step_time_model.h), recorded for every
// step on every backend so that measured step times can calibrate the model (sim/calibration_fit.h).
// Context figures are whole blocks: attention reads a sequence's KV a block at a time.
struct StepWorkSummary {
    int num_tokens = 0;         // query tokens computed: prefill, decode and naive padding rows
    int num_seqs = 0;           // sequences (padding rows count one each)
    int num_sampled = 0;        // rows through the lm head
    double prefill_attention_pairs = 0;  // (query, key) pairs of prefill chunks, causal within the chunk
    double prefill_kv_tokens = 0;        // KV slots prefill chunks read (block-rounded context)
    double decode_kv_tokens = 0;         // KV slots decode rows read (block-rounded context)
};

struct StepStats {
    int64_t step = 0;
    double start_time = 0;  // monotonic seconds since the engine started
    double duration = 0;    // wall seconds of schedule + forward + sampling
    std::string mode;       // paged | naive
    int num_running = 0;
    int num_waiting = 0;
    int num_scheduled_seqs = 0;  // batch size of the step
    int num_prefill_tokens = 0;
    int num_decode_tokens = 0;
    int num_padding_tokens = 0;  // naive mode: rows computed for finished or shorter batch members
    int max_num_seqs = 0;
    int max_num_batched_tokens = 0;
    int block_size = 0;
    int num_blocks = 0;
    int num_used_blocks = 0;
    int num_cached_free_blocks = 0;
    int num_free_blocks = 0;      // includes cached-free
    double kv_usage = 0;          // used / total
    double kv_waste = 0;          // reserved slots holding no token / reserved slots
    int64_t prefix_cache_queries = 0;  // cumulative, tokens
    int64_t prefix_cache_hits = 0;     // cumulative, tokens
    int num_preemptions = 0;           // in this step
    int64_t total_preemptions = 0;
    int num_finished = 0;              // in this step
    StepWorkSummary work;              // what the forward pass computed (zero when nothing was scheduled)
    MemoryStats memory;
    std::string event;                 // e.g. "rebuild: block_size 16 -> 64" (drain-and-rebuild)
};

}  // namespace kvscope
