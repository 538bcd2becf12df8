// The small GGUF files of the cross-checks against llama.cpp (tests/data/llamacpp_refs/): which
// architecture and weight types each holds, and how kvscope-make-xcheck-models writes them. The files are
// committed, with llama.cpp's greedy tokens and top-5 log-probabilities on them beside; this table is
// the one list that the generator writes and test_llamacpp_xcheck reads.
#pragma once

#include "random_model.h"

#include <string>
#include <vector>

namespace kvscope::test {

// Each file types its matrices by role: the embedding; q and k (or the fused qkv); v and o; gate and
// up (or the fused gate_up); down. The lm_head is F16 in all. Several types per file keep the whole set
// at a few MB; every type is the type of at least one matmul, so each type's matmul path (prefill and
// decode) and the embedding lookup of some types are compared.
struct XcheckModel {
    std::string name;  // file stem: NAME.gguf, NAME.json
    std::string arch;
    DType embedding, attn_qk, attn_vo, ffn_in, ffn_down;
    // An HF-directory twin: every matrix F16, so a safetensors file holds exactly the GGUF file's values;
    // the test writes the directory from the same seed and compares it with the same llama.cpp figures.
    // The twins are smaller (hidden 128; tied embeddings except Gemma 3's) to keep the committed data small.
    bool hf_twin = false;
};

// The seed of every file's weights (the committed files were written with it).
inline constexpr uint64_t kXcheckSeed = 18;

inline const std::vector<XcheckModel>& xcheck_models() {
    static const std::vector<XcheckModel> models = {
        // Every type on llama.
        {"llama-bf16-f16-q8_0-q4_0", "llama", DType::Q4_0, DType::BF16, DType::F16, DType::Q8_0, DType::Q4_0},
        {"llama-q4_1-q5_0-q5_1", "llama", DType::Q5_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q4_1},
        {"llama-q2_k-q3_k-q4_k", "llama", DType::Q2_K, DType::Q3_K, DType::Q2_K, DType::Q4_K, DType::Q3_K},
        {"llama-q5_k-q6_k-iq4_nl-iq4_xs", "llama", DType::Q6_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS},
        // Every other architecture on F16, Q8_0 and a K-quant.
        {"qwen2-q8_0-f16-q4_k", "qwen2", DType::Q8_0, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q4_K},
        {"qwen3-q8_0-f16-q4_k", "qwen3", DType::Q8_0, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q4_K},
        {"phi3-q8_0-f16-q4_k", "phi3", DType::Q8_0, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q4_K},
        // Gemma 2's embedding is its lm_head (llama.cpp knows no other): F16, as the others' lm_head. Its
        // layers carry most of the residual stream (see xcheck_shape) and renormalize every sublayer's
        // output, so llama.cpp's 8-bit rounding of activations shows in full: the 8-bit types sit where
        // the inputs are normalized (q/k: Q8_0, gate/up: Q4_K), not before v, o and down (1.2e-2 from
        // exact this way, about 3e-2 with the others' roles).
        {"gemma2-f16-q8_0-q4_k", "gemma2", DType::F16, DType::Q8_0, DType::F16, DType::Q4_K, DType::F16},
        {"gemma3-q8_0-f16-q4_k", "gemma3", DType::Q8_0, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q4_K},
        // The HF-directory twins.
        {"llama-f16-hf", "llama", DType::F16, DType::F16, DType::F16, DType::F16, DType::F16, true},
        {"qwen3-f16-hf", "qwen3", DType::F16, DType::F16, DType::F16, DType::F16, DType::F16, true},
        {"phi3-f16-hf", "phi3", DType::F16, DType::F16, DType::F16, DType::F16, DType::F16, true},
        {"gemma2-f16-hf", "gemma2", DType::F16, DType::F16, DType::F16, DType::F16, DType::F16, true},
        {"gemma3-f16-hf", "gemma3", DType::F16, DType::F16, DType::F16, DType::F16, DType::F16, true},
    };
    return models;
}

// One layer (two for Gemma) of the real layout, with every row length a multiple of 256 (the K-quants' block) and the
// stories260K vocabulary (512 tokens, so llama.cpp loads the tokenizer).
// The scales are chosen for a comparison of two engines that round activations differently: llama.cpp
// quantizes a matmul's input to 8 bits (Q8_0 per 32, Q8_K per 256 for the K-quants, F16 / BF16 for those
// weights), kvscope keeps F32 except on its int8 paths, and random weights do not average such rounding
// away (about 1% of each matmul's output). With the layers adding about a fifth of the residual stream
// (embedding entries of 4, layer matrices of 0.05) and an F16 lm_head of 0.125 (logits of spread about
// 2, top-1 log-probabilities near -1.5), llama.cpp's logprobs stay within about 8e-3 of the exact ones
// (kvscope with every matrix dequantized to F32); with 0.15 everywhere and a tied quantized lm_head they
// were up to 0.4 away. A wrong dequantizer still moves them far past 2e-2 (see README.md there).
inline RandomModelShape xcheck_shape(const XcheckModel& m) {
    const std::string& arch = m.arch;
    RandomModelShape s;
    s.arch = arch;
    s.hidden = 256, s.ffn = 256, s.layers = 1, s.heads = 4, s.kv_heads = 2, s.head_dim = 64, s.vocab = 512;
    s.context = 1024;
    s.embedding_std = 4.0f, s.weight_std = 0.05f, s.output_std = 0.125f;
    // Tied random embeddings predict the current token: its own logit is about sqrt(hidden) standard
    // deviations of the others times the embedding's share of the residual stream. So a tied model here
    // either lets the layers carry most of the stream (the all-F16 twins, whose rounding is small) or, as
    // Gemma 2 must be tied in llama.cpp, has its final soft-cap bound that logit.
    if (s.gemma()) {
        // Two layers, windowed then global (Gemma 2's alternation; Gemma 3's files name the period, 2, in
        // attention.sliding_window_pattern, which llama.cpp reads), and a window of 8 that the 24
        // positions run well past. Gemma multiplies the embedding by sqrt(hidden) and renormalizes each
        // sublayer's output (about 1 each), so the embedding's scale alone sets the layers' share. Two
        // heads and one KV head keep the pair of files near 2 MB.
        s.layers = 2, s.sliding_window = 8, s.sliding_pattern = 2, s.heads = 2, s.kv_heads = 1;
        if (arch == "gemma2") {
            // Tied: logits of spread about 1.3 and the current token's near 11, soft-capped to 4; scores
            // of spread about 0.6 capped at 1.
            s.tie_embeddings = true;
            s.embedding_std = s.output_std = 0.08f;
            s.attn_softcap = 1.0f;
            s.final_softcap = 4.0f;
        } else {  // the layers add about an eighth; Gemma 3's global base and linear factor, its local base
            s.embedding_std = 1.0f, s.output_std = 0.1f;
            s.rope_theta = 1000000.0f;
            s.rope_local_theta = 10000.0f;
            s.rope_linear_factor = 4.0f;
        }
    }
    if (m.hf_twin) {
        // Every matrix F16, so llama.cpp rounds activations to F16 only (about 5e-4): the layers may carry
        // most of the residual stream, and the small ones (hidden 128, tied where that is safe) keep the
        // committed data small.
        s.hidden = 128, s.ffn = 128, s.heads = 2, s.kv_heads = 1;
        if (!s.gemma()) {  // embedding a tenth of the stream: the current token's logit about 1 sd up
            s.tie_embeddings = true;
            s.embedding_std = s.output_std = 0.15f;
            s.weight_std = 0.1f;
        } else if (arch == "gemma2") {  // scores of spread about 0.3 here
            s.embedding_std = s.output_std = 0.11f;
            s.attn_softcap = 0.5f;
        } else {  // untied: the embedding about 4 of the stream's 4.5, the logits' spread about 2
            s.embedding_std = 0.35f, s.output_std = 0.18f;
        }
    }
    if (arch == "phi3") {  // LongRoPE, run past the original context: the long factors
        s.original_context = 256;
        for (int i = 0; i < s.head_dim / 2; ++i) {
            s.short_factor.push_back(1.0f + 0.05f * i);
            s.long_factor.push_back(1.0f + 0.5f * i);
        }
        s.attention_factor = std::sqrt(1.0f + std::log(float(s.context) / s.original_context) / std::log(256.0f));
    }
    return s;
}

inline DType xcheck_matrix_type(const XcheckModel& m, const std::string& gguf_name) {
    auto has = [&](const char* role) { return gguf_name.find(role) != std::string::npos; };
    if (gguf_name == "token_embd.weight") return m.embedding;
    if (gguf_name == "output.weight") return DType::F16;  // F16 inputs in llama.cpp: no 8-bit rounding
    if (has(".attn_q.") || has(".attn_k.") || has(".attn_qkv.")) return m.attn_qk;
    if (has(".attn_v.") || has(".attn_output.")) return m.attn_vo;
    if (has(".ffn_down.")) return m.ffn_down;
    return m.ffn_in;
}

inline void write_xcheck_model(const XcheckModel& m, const std::string& path, uint64_t seed = kXcheckSeed) {
    // A name without the architecture in it: llama.cpp patches the vocabulary of a model named "phi3" and
    // expects Phi-3's own special tokens there, which the stories260K vocabulary does not have.
    auto rename = [](GgufWriter& w) { w.set_string("general.name", "kvscope-xcheck"); };
    write_random_gguf(path, xcheck_shape(m), seed, DType::F32, rename, "",
                      [&](const std::string& name) { return xcheck_matrix_type(m, name); });
}

// The HF directory (config.json, F16 model.safetensors, tokenizer files) of a twin: the same seed, so the
// same values as its GGUF file, in HF's layout (rotate-half q/k rows, Gemma's norms as w).
inline void write_xcheck_hf(const XcheckModel& m, const std::string& dir, uint64_t seed = kXcheckSeed) {
    write_random_hf(dir, xcheck_shape(m), seed, DType::F16);
}

}  // namespace kvscope::test
