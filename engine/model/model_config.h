// The architecture hyper-parameters of a decoder-only transformer (Llama family, Qwen2, Qwen3, Phi-3,
// Gemma 2, Gemma 3 text), read from a Hugging Face config.json or GGUF metadata, or taken from a dummy
// preset. Validated on load.
#pragma once

#include "dtype.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

class GgufFile;

struct RopeScaling {
    std::string type;  // "" (none), "linear", "llama3", "longrope"
    float factor = 1.0f;
    float low_freq_factor = 1.0f;
    float high_freq_factor = 4.0f;
    int original_max_position_embeddings = 8192;
    // longrope (Phi-3): per-frequency divisors [head_dim / 2], the long ones for contexts past the
    // original, and the factor cos and sin are scaled by (sqrt(1 + ln(max / original) / ln(original))
    // unless the model gives it).
    std::vector<float> short_factor, long_factor;
    float attention_factor = 1.0f;
};

struct ModelConfig {
    // "llama" (Llama 2/3, TinyLlama, SmolLM, Mistral), "qwen2", "qwen3", "phi3", "gemma2" or "gemma3"
    std::string architecture;
    int vocab_size = 0;
    int hidden_size = 0;
    int intermediate_size = 0;
    int num_layers = 0;
    int num_heads = 0;
    int num_kv_heads = 0;
    int head_dim = 0;
    int max_position_embeddings = 0;
    float rms_norm_eps = 1e-5f;
    float rope_theta = 10000.0f;
    RopeScaling rope_scaling;
    bool rope_neox = true;       // rotate-half pairs (HF, GGUF qwen2) vs interleaved (GGUF llama)
    bool tie_word_embeddings = false;
    bool attention_bias = false; // q/k/v biases (Qwen2)
    bool qk_norm = false;        // RMSNorm of each head's q and k before RoPE, weights [head_dim] (Qwen3)
    bool fused_qkv = false;      // one qkv matrix [q + 2 kv, hidden] and one gate_up [2 inter, hidden] (Phi-3)
    // Gemma 2 / 3. Their RMSNorms multiply by (1 + w): HF files hold w and the HF loader adds the 1
    // (norm_plus_one); llama.cpp's converter stores w + 1, so GGUF norms are used as they are.
    bool norm_plus_one = false;
    bool sandwich_norms = false;  // RMSNorm of the attention and MLP outputs before each residual add
    bool gelu_tanh = false;       // GELU-tanh gate (gelu_pytorch_tanh) instead of SiLU
    bool scale_embeddings = false;  // embeddings times sqrt(hidden_size), in F32 (the activations' type)
    float query_pre_attn_scalar = 0;  // attention scale 1 / sqrt(this); 0 = head_dim
    float attn_logit_softcapping = 0;   // scores -> c * tanh(scores / c) (Gemma 2); 0 = off
    float final_logit_softcapping = 0;  // logits -> c * tanh(logits / c) (Gemma 2); 0 = off
    // Sliding-window (local) attention: a windowed layer's query at position p sees keys (p - window, p].
    int sliding_window = 0;            // 0 = none
    std::vector<bool> sliding_layers;  // [num_layers]: which layers are windowed (empty: none)
    // RoPE base of the windowed layers (Gemma 3's rope_local_base_freq, never scaled); 0 = the global
    // layers' inv_freq everywhere.
    float rope_local_theta = 0;
    int32_t bos_token_id = -1;
    std::vector<int32_t> eos_token_ids;
    DType weight_dtype = DType::F32;  // the layer weights' stored type (display; --kv-cache-dtype auto follows it)

    int q_size() const { return num_heads * head_dim; }
    // The sliding window of layer l (0 = global attention).
    int layer_window(int l) const {
        return sliding_window > 0 && l < static_cast<int>(sliding_layers.size()) && sliding_layers[l] ? sliding_window : 0;
    }
    // Every layer is windowed (Mistral 7B v0.1): blocks behind the window are read by no layer, so the KV
    // manager may free them. False for mixed models (Gemma) and models without a window.
    bool all_layers_windowed() const {
        if (sliding_window <= 0 || static_cast<int>(sliding_layers.size()) != num_layers) return false;
        for (bool w : sliding_layers)
            if (!w) return false;
        return true;
    }
    float attention_scale() const;
    int kv_size() const { return num_kv_heads * head_dim; }
    // K and V bytes one token holds in the cache over all layers, for a cache of kv_dtype (F32/F16/BF16).
    int64_t kv_bytes_per_token(DType kv_dtype = DType::F32) const {
        return 2LL * num_layers * num_kv_heads * head_dim * dtype_block_bytes(kv_dtype);
    }
    int64_t num_params() const;

    // Throws BadInput naming `source` and the field when a value is missing or inconsistent.
    void validate(const std::string& source) const;
    // inv_freq[i] = 1 / theta^(2i/head_dim), with llama3, linear or longrope scaling applied; longrope
    // takes its long factors when the model runs past its original context (max_model_len, 0 = the
    // model's own), as llama.cpp decides by n_ctx.                                     [head_dim / 2]
    std::vector<float> rope_inv_freq(int max_model_len = 0) const;
    // inv_freq of the windowed layers when they have a RoPE base of their own (rope_local_theta > 0),
    // unscaled; empty otherwise.                                                        [head_dim / 2]
    std::vector<float> rope_local_inv_freq() const;
    // What RoPE's cos and sin are multiplied by (1 but for longrope): q.k grows by its square.
    float rope_attention_factor() const { return rope_scaling.type == "longrope" ? rope_scaling.attention_factor : 1.0f; }
};

ModelConfig config_from_hf_json(const std::string& config_json_path);
ModelConfig config_from_gguf(const GgufFile& gguf);
// Presets of dummy:PRESET (real shapes of known models). Throws BadInput for an unknown name.
ModelConfig dummy_preset_config(const std::string& preset);
std::vector<std::string> dummy_preset_names();

}  // namespace kvscope
