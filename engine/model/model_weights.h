// The weights of a model, as views into memory-mapped files (GGUF, safetensors) or into owned buffers
// (dummy models, converted small tensors). Norm weights and biases are kept as F32 vectors (norms as the
// factor they multiply by: Gemma's HF 1 + w already added); matrices stay in their stored type. Loaders check every tensor's presence, shape and type against the config.
#pragma once

#include "backend.h"
#include "model/model_config.h"

#include <map>
#include <memory>
#include <vector>

namespace kvscope {

class GgufFile;
class SafetensorsModel;

struct LayerWeights {
    std::vector<float> attn_norm;  // [hidden]
    WeightView wq, wk, wv, wo;     // [q_size, hidden], [kv_size, hidden] x2, [hidden, q_size]
    std::vector<float> bq, bk, bv; // [q_size], [kv_size] x2; empty without attention bias
    std::vector<float> q_norm, k_norm;  // [head_dim] each; empty without qk_norm
    std::vector<float> post_attn_norm;  // [hidden]; empty without sandwich norms (Gemma)
    std::vector<float> ffn_norm;   // [hidden]
    std::vector<float> post_ffn_norm;   // [hidden]; empty without sandwich norms
    WeightView w_gate, w_up, w_down;  // [inter, hidden] x2, [hidden, inter]
};

struct ModelWeights {
    WeightView token_embedding;    // [vocab, hidden]
    WeightView lm_head;            // [vocab, hidden]; the embedding when tied
    std::vector<float> final_norm; // [hidden]
    std::vector<LayerWeights> layers;
    std::vector<float> rope_freq_factors;  // GGUF rope_freqs.weight (Llama 3.1): inv_freq[i] /= factor[i]
    std::map<DType, int64_t> bytes_by_dtype;
    int64_t weight_bytes() const;
    // Keeps the mapped files and owned buffers alive as long as the views.
    std::vector<std::shared_ptr<const void>> storage;
};

ModelWeights load_weights_gguf(std::shared_ptr<const GgufFile> gguf, const ModelConfig& config);
ModelWeights load_weights_safetensors(std::shared_ptr<const SafetensorsModel> st, const ModelConfig& config,
                                      const std::string& source);
// Seeded random weights with the config's shapes (normal-like, std 0.02; norms 1.0), stored as `dtype`; a
// matrix whose rows are not whole blocks of a K type takes the type llama-quantize falls back to (Q4_K:
// Q5_0, Q5_K: Q5_1, Q6_K: Q8_0, Q2_K / Q3_K: Q4_0, IQ4_XS: IQ4_NL), as in a file it quantized.
ModelWeights make_dummy_weights(const ModelConfig& config, DType dtype, uint64_t seed);

}  // namespace kvscope
