// The forward pass of a Llama/Qwen2 decoder over one step's varlen batch: every scheduled token of every
// request in one pass (GEMMs over the whole step), K/V written into and read from the paged cache.
// Owns the KV cache memory and the activation buffers, sized once for max_num_batched_tokens, so a
// step allocates nothing. Engine thread only.
#pragma once

#include "backend.h"
#include "model/model.h"
#include "runner/model_input.h"

#include <vector>

namespace kvscope {

class ModelRunner {
public:
    // num_blocks x block_size token slots of cache; steps of at most max_num_tokens tokens and
    // max_num_logits sampled rows.
    ModelRunner(const Model& model, Backend& backend, int num_blocks, int block_size, int max_num_tokens,
                int max_num_logits);
    ~ModelRunner();
    ModelRunner(const ModelRunner&) = delete;
    ModelRunner& operator=(const ModelRunner&) = delete;

    // Runs the model; returns logits [input.logits_indices.size(), vocab] in host memory, valid until the
    // next call.
    const float* execute(const ModelInput& input);

    // Grows the activation buffers for larger steps (live reconfiguration); never shrinks them.
    void ensure_capacity(int max_num_tokens, int max_num_logits);

    // Rebuilds the KV cache for a new geometry (drain-and-rebuild: no request may hold blocks).
    void reset_kv_cache(int num_blocks, int block_size);

    const KvCacheLayout& kv_layout() const { return layout_; }
    size_t kv_cache_bytes() const { return layout_.total_bytes(); }
    size_t activation_bytes() const { return activation_bytes_; }
    Backend& backend() { return backend_; }

private:
    // The model's weights as the backend's ops take them (device copies on a GPU backend).
    struct LayerOnDevice {
        const float *attn_norm = nullptr, *ffn_norm = nullptr, *bq = nullptr, *bk = nullptr, *bv = nullptr;
        WeightView wq, wk, wv, wo, w_gate, w_up, w_down;
    };
    void upload_weights();
    void allocate_activations();
    void free_buffers();
    float* buffer(size_t floats);

    const Model& model_;
    Backend& backend_;
    KvCacheLayout layout_;
    int max_num_tokens_;
    int max_num_logits_;
    void* kv_cache_ = nullptr;
    std::vector<void*> allocations_;
    size_t activation_bytes_ = 0;
    std::vector<LayerOnDevice> layers_;
    WeightView token_embedding_, lm_head_;
    const float* final_norm_ = nullptr;
    std::vector<float> inv_freq_host_;
    float* inv_freq_ = nullptr;
    // Activations. T = max_num_tokens, S = max_num_logits.
    float *x_ = nullptr, *xb_ = nullptr;           // [T, hidden]
    float *q_ = nullptr, *att_ = nullptr;          // [T, q_size]
    float *k_ = nullptr, *v_ = nullptr;            // [T, kv_size]
    float *gate_ = nullptr, *up_ = nullptr;        // [T, intermediate]
    float *xs_ = nullptr;                          // [S, hidden]
    float *logits_ = nullptr;                      // [S, vocab]
    // Step metadata on the device.
    int32_t *d_tokens_ = nullptr, *d_positions_ = nullptr, *d_qsl_ = nullptr, *d_seq_lens_ = nullptr;
    int32_t *d_logits_idx_ = nullptr, *d_block_tables_ = nullptr;
    int64_t* d_slots_ = nullptr;
    size_t block_tables_capacity_ = 0;
    std::vector<float> logits_host_;
};

}  // namespace kvscope
