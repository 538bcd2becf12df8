#include "runner/model_runner.h"

#include "util/errors.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kvscope {

ModelRunner::ModelRunner(const Model& model, Backend& backend, int num_blocks, int block_size, int max_num_tokens,
                         int max_num_logits)
    : model_(model), backend_(backend), max_num_tokens_(max_num_tokens), max_num_logits_(max_num_logits) {
    const ModelConfig& c = model.config;
    inv_freq_host_ = c.rope_inv_freq();
    const auto& factors = model.weights.rope_freq_factors;
    for (size_t i = 0; i < factors.size() && i < inv_freq_host_.size(); ++i) inv_freq_host_[i] /= factors[i];
    max_num_logits_ = std::min(max_num_logits_, max_num_tokens_);
    upload_weights();
    allocate_activations();
    reset_kv_cache(num_blocks, block_size);
}

ModelRunner::~ModelRunner() { free_buffers(); }

void ModelRunner::upload_weights() {
    const ModelWeights& w = model_.weights;
    auto vec = [&](const std::vector<float>& v) { return v.empty() ? nullptr : backend_.upload_vector(v.data(), v.size()); };
    token_embedding_ = backend_.upload_weight(w.token_embedding);
    lm_head_ = w.lm_head.data == w.token_embedding.data ? token_embedding_ : backend_.upload_weight(w.lm_head);
    final_norm_ = vec(w.final_norm);
    for (const LayerWeights& L : w.layers)
        layers_.push_back({vec(L.attn_norm), vec(L.ffn_norm), vec(L.bq), vec(L.bk), vec(L.bv),
                           backend_.upload_weight(L.wq), backend_.upload_weight(L.wk), backend_.upload_weight(L.wv),
                           backend_.upload_weight(L.wo), backend_.upload_weight(L.w_gate), backend_.upload_weight(L.w_up),
                           backend_.upload_weight(L.w_down)});
}

float* ModelRunner::buffer(size_t floats) {
    void* p = backend_.allocate(floats * sizeof(float));
    allocations_.push_back(p);
    activation_bytes_ += floats * sizeof(float);
    return static_cast<float*>(p);
}

void ModelRunner::allocate_activations() {
    const ModelConfig& c = model_.config;
    const size_t T = max_num_tokens_, S = max_num_logits_;
    x_ = buffer(T * c.hidden_size);
    xb_ = buffer(T * c.hidden_size);
    q_ = buffer(T * c.q_size());
    att_ = buffer(T * c.q_size());
    k_ = buffer(T * c.kv_size());
    v_ = buffer(T * c.kv_size());
    gate_ = buffer(T * c.intermediate_size);
    up_ = buffer(T * c.intermediate_size);
    xs_ = buffer(S * c.hidden_size);
    logits_ = buffer(S * static_cast<size_t>(c.vocab_size));
    inv_freq_ = buffer(inv_freq_host_.size());
    backend_.copy_to_device(inv_freq_, inv_freq_host_.data(), inv_freq_host_.size() * sizeof(float));
    auto ints = [&](size_t n) { return reinterpret_cast<int32_t*>(buffer(n)); };
    d_tokens_ = ints(T);
    d_positions_ = ints(T);
    d_qsl_ = ints(T + 1);
    d_seq_lens_ = ints(T);
    d_logits_idx_ = ints(S);
    d_slots_ = reinterpret_cast<int64_t*>(buffer(2 * T));
    logits_host_.resize(S * static_cast<size_t>(c.vocab_size));
}

void ModelRunner::ensure_capacity(int max_num_tokens, int max_num_logits) {
    if (max_num_tokens <= max_num_tokens_ && max_num_logits <= max_num_logits_) return;
    for (void* p : allocations_) backend_.deallocate(p);
    allocations_.clear();
    activation_bytes_ = 0;
    max_num_tokens_ = std::max(max_num_tokens, max_num_tokens_);
    max_num_logits_ = std::max(max_num_logits, max_num_logits_);
    allocate_activations();
}

void ModelRunner::free_buffers() {
    for (void* p : allocations_) backend_.deallocate(p);
    allocations_.clear();
    if (d_block_tables_) backend_.deallocate(d_block_tables_);
    d_block_tables_ = nullptr;
    if (kv_cache_) backend_.deallocate(kv_cache_);
    kv_cache_ = nullptr;
}

void ModelRunner::reset_kv_cache(int num_blocks, int block_size) {
    const ModelConfig& c = model_.config;
    if (kv_cache_) backend_.deallocate(kv_cache_);
    kv_cache_ = nullptr;
    layout_ = KvCacheLayout{c.num_layers, num_blocks, block_size, c.num_kv_heads, c.head_dim, DType::F32};
    kv_cache_ = backend_.allocate(std::max<size_t>(layout_.total_bytes(), 64));
}

const float* ModelRunner::execute(const ModelInput& in) {
    const ModelConfig& c = model_.config;
    const int T = in.num_tokens(), S = static_cast<int>(in.logits_indices.size());
    if (T == 0) return logits_host_.data();
    if (T > max_num_tokens_ || S > max_num_logits_)
        throw std::logic_error("ModelRunner: step of " + std::to_string(T) + " tokens / " + std::to_string(S) +
                               " logits exceeds the buffers (" + std::to_string(max_num_tokens_) + " / " +
                               std::to_string(max_num_logits_) + ")");

    // Step metadata to the device.
    backend_.copy_to_device(d_tokens_, in.token_ids.data(), T * sizeof(int32_t));
    backend_.copy_to_device(d_positions_, in.positions.data(), T * sizeof(int32_t));
    backend_.copy_to_device(d_slots_, in.slot_mapping.data(), T * sizeof(int64_t));
    backend_.copy_to_device(d_qsl_, in.query_start_loc.data(), in.query_start_loc.size() * sizeof(int32_t));
    backend_.copy_to_device(d_seq_lens_, in.seq_lens.data(), in.seq_lens.size() * sizeof(int32_t));
    if (S) backend_.copy_to_device(d_logits_idx_, in.logits_indices.data(), S * sizeof(int32_t));
    if (in.block_tables.size() > block_tables_capacity_) {
        if (d_block_tables_) backend_.deallocate(d_block_tables_);
        block_tables_capacity_ = std::max(in.block_tables.size(), block_tables_capacity_ * 2);
        d_block_tables_ = static_cast<int32_t*>(backend_.allocate(block_tables_capacity_ * sizeof(int32_t)));
    }
    backend_.copy_to_device(d_block_tables_, in.block_tables.data(), in.block_tables.size() * sizeof(int32_t));

    AttentionMetadata meta;
    meta.num_tokens = T;
    meta.num_seqs = in.num_seqs();
    meta.query_start_loc = d_qsl_;
    meta.seq_lens = d_seq_lens_;
    meta.block_tables = d_block_tables_;
    meta.max_blocks_per_seq = in.max_blocks_per_seq;
    meta.slot_mapping = d_slots_;
    meta.max_seq_len = *std::max_element(in.seq_lens.begin(), in.seq_lens.end());

    const RopeParams rope{inv_freq_, c.head_dim, c.head_dim, c.rope_neox};
    const int h = c.hidden_size;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

    backend_.embedding(token_embedding_, d_tokens_, T, x_);
    for (int l = 0; l < c.num_layers; ++l) {
        const LayerOnDevice& L = layers_[l];
        backend_.rms_norm(x_, L.attn_norm, T, h, c.rms_norm_eps, xb_);
        backend_.matmul(xb_, T, L.wq, L.bq, q_);
        backend_.matmul(xb_, T, L.wk, L.bk, k_);
        backend_.matmul(xb_, T, L.wv, L.bv, v_);
        backend_.rope(q_, k_, d_positions_, T, c.num_heads, c.num_kv_heads, rope);
        backend_.write_kv(k_, v_, d_slots_, T, layout_, kv_cache_, l);
        backend_.paged_attention(q_, meta, layout_, kv_cache_, l, c.num_heads, scale, att_);
        backend_.matmul(att_, T, L.wo, nullptr, xb_);
        backend_.add(x_, xb_, static_cast<int64_t>(T) * h);
        backend_.rms_norm(x_, L.ffn_norm, T, h, c.rms_norm_eps, xb_);
        backend_.matmul(xb_, T, L.w_gate, nullptr, gate_);
        backend_.matmul(xb_, T, L.w_up, nullptr, up_);
        backend_.silu_mul(gate_, up_, static_cast<int64_t>(T) * c.intermediate_size, gate_);
        backend_.matmul(gate_, T, L.w_down, nullptr, xb_);
        backend_.add(x_, xb_, static_cast<int64_t>(T) * h);
    }
    if (S == 0) return logits_host_.data();
    // Only the rows that sample need the final norm and the (large) vocabulary projection.
    backend_.gather_rows(x_, d_logits_idx_, S, h, xs_);
    backend_.rms_norm(xs_, final_norm_, S, h, c.rms_norm_eps, xb_);
    backend_.matmul(xb_, S, lm_head_, nullptr, logits_);
    backend_.copy_to_host(logits_host_.data(), logits_, static_cast<size_t>(S) * c.vocab_size * sizeof(float));
    return logits_host_.data();
}

}  // namespace kvscope
