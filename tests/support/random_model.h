// Seeded random models written in the real formats at test time (model weights are never committed):
// a Hugging Face directory (config.json, model.safetensors, tokenizer files copied from the shared
// stories260K model) and a GGUF file with the same weights, q/k rows permuted into GGUF's interleaved
// RoPE layout exactly as llama.cpp's converter does for llama (not for qwen2), and Gemma's norms stored
// as w + 1 in GGUF (llama.cpp's converter) but as w in the HF files.
#pragma once

#include "test_support.h"

#include "cpu/quant.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/safetensors_writer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace kvscope::test {

struct RandomModelShape {
    std::string arch = "llama";  // llama | qwen2 | qwen3 | phi3 (fused qkv and gate_up) | gemma2 | gemma3
    int hidden = 256, ffn = 512, layers = 2, heads = 4, kv_heads = 2, head_dim = 64, vocab = 512;
    int context = 1024;
    float rope_theta = 10000.0f;
    // LongRoPE (phi3) when set: [head_dim / 2] divisors each, the original context, the cos/sin factor.
    std::vector<float> short_factor, long_factor;
    int original_context = 0;
    float attention_factor = 1.0f;
    // Gemma (gemma_shape): windowed layers l with (l + 1) % sliding_pattern != 0 see the last
    // sliding_window positions; soft-capping (0 = off); Gemma 3's local RoPE base and its global layers'
    // linear RoPE factor (0 = none).
    int sliding_window = 0, sliding_pattern = 0;
    float attn_softcap = 0, final_softcap = 0;
    float rope_local_theta = 0, rope_linear_factor = 0;
    bool gemma() const { return arch == "gemma2" || arch == "gemma3"; }
    bool sliding(int layer) const { return sliding_window > 0 && (layer + 1) % sliding_pattern != 0; }
    // Standard deviations of the entries of the layers' matrices, of the embedding and of the lm_head (0:
    // as the layers'). output_std sets the spread of the logits (about output_std * sqrt(hidden)); the
    // ratio of what the layers add (weight_std) to the embedding (embedding_std) how much the layers
    // move the residual stream.
    float weight_std = 0.05f, embedding_std = 0.0f, output_std = 0.0f;
    bool tie_embeddings = false;  // no lm_head / output.weight: the embedding is the output matrix
};

// A small Gemma 2 or 3 whose every feature shows in 48 tokens: windows of 16 (local layers first, then a
// global one), soft-caps near the scores' and logits' size (Gemma 2), a local RoPE base and a scaled
// global one (Gemma 3). Tied embeddings, as Gemma's.
inline RandomModelShape gemma_shape(const std::string& arch) {
    RandomModelShape s;
    s.arch = arch;
    s.tie_embeddings = true;
    s.sliding_window = 16;
    if (arch == "gemma2") {
        s.sliding_pattern = 2;  // Gemma 2's alternation: 0 local, 1 global
        s.attn_softcap = 0.5f;
        s.final_softcap = 1.0f;
    } else {
        s.layers = 3;
        s.sliding_pattern = 3;  // 0 and 1 local, 2 global (Gemma 3 has 5 local per global)
        s.rope_theta = 1000000.0f;
        s.rope_local_theta = 10000.0f;
        s.rope_linear_factor = 4.0f;
    }
    return s;
}

struct RandomTensor {
    std::string hf_name, gguf_name;
    std::vector<int64_t> shape;  // row-major [rows, cols] or [n]
    std::vector<float> values;
    bool is_q = false, is_k = false;
    bool is_norm = false;
};

inline std::vector<RandomTensor> random_tensors(const RandomModelShape& s, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    // One distribution, scaled, so that the default draws stay as they were.
    float matrix_scale = s.weight_std / 0.05f;
    std::vector<RandomTensor> out;
    auto add = [&](std::string hf, std::string gguf, std::vector<int64_t> shape, bool norm) {
        RandomTensor t{std::move(hf), std::move(gguf), shape, {}};
        t.is_norm = norm;
        int64_t n = 1;
        for (auto d : shape) n *= d;
        t.values.resize(n);
        // Norm weights near 1 (Gemma's multiply by 1 + w: w near 0), biases small whatever the matrices' scale.
        for (auto& v : t.values)
            v = norm ? (s.gemma() ? 0.0f : 1.0f) + normal(rng) : shape.size() == 1 ? normal(rng) : matrix_scale * normal(rng);
        out.push_back(std::move(t));
        return &out.back();
    };
    const int q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
    const float layer_scale = matrix_scale;
    matrix_scale = (s.embedding_std > 0 ? s.embedding_std : s.weight_std) / 0.05f;
    add("model.embed_tokens.weight", "token_embd.weight", {s.vocab, s.hidden}, false);
    matrix_scale = layer_scale;
    for (int l = 0; l < s.layers; ++l) {
        const std::string h = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
        add(h + "input_layernorm.weight", g + "attn_norm.weight", {s.hidden}, true);
        if (s.arch == "phi3") {
            add(h + "self_attn.qkv_proj.weight", g + "attn_qkv.weight", {q + 2 * kv, s.hidden}, false);
        } else {
            add(h + "self_attn.q_proj.weight", g + "attn_q.weight", {q, s.hidden}, false)->is_q = true;
            add(h + "self_attn.k_proj.weight", g + "attn_k.weight", {kv, s.hidden}, false)->is_k = true;
            add(h + "self_attn.v_proj.weight", g + "attn_v.weight", {kv, s.hidden}, false);
        }
        if (s.arch == "qwen2") {
            add(h + "self_attn.q_proj.bias", g + "attn_q.bias", {q}, false)->is_q = true;
            add(h + "self_attn.k_proj.bias", g + "attn_k.bias", {kv}, false)->is_k = true;
            add(h + "self_attn.v_proj.bias", g + "attn_v.bias", {kv}, false);
        }
        if (s.arch == "qwen3" || s.arch == "gemma3") {
            add(h + "self_attn.q_norm.weight", g + "attn_q_norm.weight", {s.head_dim}, true);
            add(h + "self_attn.k_norm.weight", g + "attn_k_norm.weight", {s.head_dim}, true);
        }
        add(h + "self_attn.o_proj.weight", g + "attn_output.weight", {s.hidden, q}, false);
        if (s.gemma()) {
            add(h + "post_attention_layernorm.weight", g + "post_attention_norm.weight", {s.hidden}, true);
            add(h + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight", {s.hidden}, true);
            add(h + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight", {s.hidden}, true);
        } else {
            add(h + "post_attention_layernorm.weight", g + "ffn_norm.weight", {s.hidden}, true);
        }
        if (s.arch == "phi3") {
            add(h + "mlp.gate_up_proj.weight", g + "ffn_up.weight", {2 * s.ffn, s.hidden}, false);
        } else {
            add(h + "mlp.gate_proj.weight", g + "ffn_gate.weight", {s.ffn, s.hidden}, false);
            add(h + "mlp.up_proj.weight", g + "ffn_up.weight", {s.ffn, s.hidden}, false);
        }
        add(h + "mlp.down_proj.weight", g + "ffn_down.weight", {s.hidden, s.ffn}, false);
    }
    add("model.norm.weight", "output_norm.weight", {s.hidden}, true);
    matrix_scale = (s.output_std > 0 ? s.output_std : s.weight_std) / 0.05f;
    if (!s.tie_embeddings) add("lm_head.weight", "output.weight", {s.vocab, s.hidden}, false);
    return out;
}

// llama.cpp's convert permute(): HF rotate-half rows -> interleaved rows, per head.
inline std::vector<float> permute_rows(const std::vector<float>& w, int64_t rows, int64_t cols, int n_head) {
    const int64_t head = rows / n_head, half = head / 2;
    std::vector<float> out(w.size());
    for (int h = 0; h < n_head; ++h)
        for (int64_t i = 0; i < half; ++i)
            for (int j = 0; j < 2; ++j) {
                const int64_t src = h * head + j * half + i, dst = h * head + 2 * i + j;
                std::copy_n(w.begin() + src * cols, cols, out.begin() + dst * cols);
            }
    return out;
}

inline std::vector<uint8_t> encode(const std::vector<float>& v, int64_t cols, DType t) {
    const int64_t rows = static_cast<int64_t>(v.size()) / cols;
    std::vector<uint8_t> bytes(dtype_row_bytes(t, cols) * rows);
    for (int64_t r = 0; r < rows; ++r)
        cpu::quantize_row(t, v.data() + r * cols, bytes.data() + r * dtype_row_bytes(t, cols), cols);
    return bytes;
}

inline void write_random_hf(const std::string& dir, const RandomModelShape& s, uint64_t seed, DType dtype = DType::F32) {
    std::filesystem::create_directories(dir);
    const char* cls = s.arch == "qwen2"    ? "Qwen2ForCausalLM"
                      : s.arch == "qwen3"  ? "Qwen3ForCausalLM"
                      : s.arch == "phi3"   ? "Phi3ForCausalLM"
                      : s.arch == "gemma2" ? "Gemma2ForCausalLM"
                      : s.arch == "gemma3" ? "Gemma3ForCausalLM"
                                           : "LlamaForCausalLM";
    nlohmann::json c = {{"architectures", {cls}},
                        {"model_type", s.arch == "gemma3" ? "gemma3_text" : s.arch}, {"hidden_size", s.hidden},
                        {"intermediate_size", s.ffn},
                        {"num_hidden_layers", s.layers}, {"num_attention_heads", s.heads},
                        {"num_key_value_heads", s.kv_heads}, {"head_dim", s.head_dim}, {"vocab_size", s.vocab},
                        {"max_position_embeddings", s.context}, {"rms_norm_eps", 1e-5}, {"rope_theta", s.rope_theta},
                        {"tie_word_embeddings", s.tie_embeddings}, {"bos_token_id", 1}, {"eos_token_id", 2},
                        {"torch_dtype", dtype == DType::BF16 ? "bfloat16" : dtype == DType::F16 ? "float16" : "float32"}};
    if (!s.long_factor.empty()) {
        c["original_max_position_embeddings"] = s.original_context;
        c["rope_scaling"] = {{"type", "longrope"}, {"short_factor", s.short_factor}, {"long_factor", s.long_factor}};
    }
    if (s.gemma()) {  // as Google's config.json files hold them; Gemma 3's windows as layer_types
        c["hidden_activation"] = "gelu_pytorch_tanh";
        c["query_pre_attn_scalar"] = s.head_dim;
        c["sliding_window"] = s.sliding_window;
        c["attn_logit_softcapping"] = s.attn_softcap > 0 ? nlohmann::json(s.attn_softcap) : nlohmann::json();
        c["final_logit_softcapping"] = s.final_softcap > 0 ? nlohmann::json(s.final_softcap) : nlohmann::json();
        if (s.arch == "gemma3") {
            c["rope_local_base_freq"] = s.rope_local_theta;
            c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", s.rope_linear_factor}};
            nlohmann::json types = nlohmann::json::array();
            for (int l = 0; l < s.layers; ++l) types.push_back(s.sliding(l) ? "sliding_attention" : "full_attention");
            c["layer_types"] = types;
        }
    }
    std::ofstream(dir + "/config.json") << c.dump(2);
    const std::string name = dtype == DType::BF16 ? "BF16" : dtype == DType::F16 ? "F16" : "F32";
    std::vector<std::tuple<std::string, std::string, std::vector<int64_t>, std::vector<uint8_t>>> tensors;
    for (const auto& t : random_tensors(s, seed)) {
        const bool vec = t.shape.size() == 1;  // norms and biases stay F32, as in most checkpoints
        tensors.emplace_back(t.hf_name, vec ? "F32" : name, t.shape,
                             encode(t.values, t.shape.back(), vec ? DType::F32 : dtype));
    }
    write_safetensors(dir + "/model.safetensors", tensors);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
        std::filesystem::copy_file(models_dir() + "/stories260K-hf/" + f, dir + "/" + f,
                                   std::filesystem::copy_options::overwrite_existing);
}

// The default random llama shape as a Mistral checkpoint: model_type "mistral" and its sliding_window,
// which windows every layer (a null one is Mistral v0.2+'s global attention).
inline void write_random_mistral(const std::string& dir, const nlohmann::json& sliding_window, uint64_t seed = 21) {
    write_random_hf(dir, RandomModelShape{}, seed);
    nlohmann::json c;
    std::ifstream(dir + "/config.json") >> c;
    c["model_type"] = "mistral";
    c["architectures"] = {"MistralForCausalLM"};
    c["sliding_window"] = sliding_window;
    std::ofstream(dir + "/config.json") << c.dump(2);
}

inline uint32_t ggml_type_of(DType t) { return ggml_type_from_dtype(t); }

// matrix_dtype, when given, picks each matrix's type by its GGUF name (mixed files, as llama-quantize's
// _M presets write them); otherwise every matrix is `dtype`.
inline void write_random_gguf(const std::string& path, const RandomModelShape& s, uint64_t seed, DType dtype = DType::F32,
                              const std::function<void(GgufWriter&)>& tweak = {}, const std::string& skip_tensor = "",
                              const std::function<DType(const std::string&)>& matrix_dtype = {}) {
    GgufWriter w;
    const std::string a = s.arch;
    w.set_string("general.architecture", a);
    w.set_string("general.name", "random-" + a);
    w.set_u32(a + ".context_length", s.context);
    w.set_u32(a + ".embedding_length", s.hidden);
    w.set_u32(a + ".block_count", s.layers);
    w.set_u32(a + ".feed_forward_length", s.ffn);
    w.set_u32(a + ".attention.head_count", s.heads);
    w.set_u32(a + ".attention.head_count_kv", s.kv_heads);
    w.set_u32(a + ".rope.dimension_count", s.head_dim);
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_f32(a + ".rope.freq_base", s.rope_theta);
    // The tokenizer of the shared stories260K GGUF (512 tokens).
    const GgufFile ref = GgufFile::open(models_dir() + "/stories260K-f32.gguf");
    w.set_string("tokenizer.ggml.model", ref.get_string("tokenizer.ggml.model"));
    w.set_string_array("tokenizer.ggml.tokens", ref.find("tokenizer.ggml.tokens")->strings);
    std::vector<float> scores;
    for (double d : ref.find("tokenizer.ggml.scores")->numbers) scores.push_back(static_cast<float>(d));
    w.set_f32_array("tokenizer.ggml.scores", scores);
    std::vector<int32_t> types;
    for (double d : ref.find("tokenizer.ggml.token_type")->numbers) types.push_back(static_cast<int32_t>(d));
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    for (const auto& t : random_tensors(s, seed)) {
        if (t.gguf_name == skip_tensor) continue;
        std::vector<float> v = t.values;
        const bool matrix = t.shape.size() == 2;
        // GGUF llama files hold q/k in the interleaved layout (biases are permuted the same way).
        if (a == "llama" && (t.is_q || t.is_k)) {
            const int n_head = t.is_q ? s.heads : s.kv_heads;
            v = permute_rows(v, t.shape[0], matrix ? t.shape[1] : 1, n_head);
        }
        if (s.gemma() && t.is_norm)  // llama.cpp's converter stores Gemma's 1 + w
            for (float& x : v) x += 1.0f;
        const DType dt = !matrix ? DType::F32 : matrix_dtype ? matrix_dtype(t.gguf_name) : dtype;
        std::vector<int64_t> dims(t.shape.rbegin(), t.shape.rend());
        w.add_tensor(t.gguf_name, dims, ggml_type_of(dt), encode(v, t.shape.back(), dt));
    }
    if (s.gemma()) {  // the keys llama.cpp's converter writes (query_pre_attn_scalar has none)
        w.set_u32(a + ".attention.key_length", s.head_dim);
        w.set_u32(a + ".attention.value_length", s.head_dim);
        w.set_u32(a + ".attention.sliding_window", s.sliding_window);
        if (s.attn_softcap > 0) w.set_f32(a + ".attn_logit_softcapping", s.attn_softcap);
        if (s.final_softcap > 0) w.set_f32(a + ".final_logit_softcapping", s.final_softcap);
        if (s.arch == "gemma3") {
            w.set_u32(a + ".attention.sliding_window_pattern", s.sliding_pattern);
            w.set_f32(a + ".rope.freq_base_swa", s.rope_local_theta);
            w.set_string(a + ".rope.scaling.type", "linear");
            w.set_f32(a + ".rope.scaling.factor", s.rope_linear_factor);
        }
    }
    if (!s.long_factor.empty()) {  // as llama.cpp's converter writes Phi-3's LongRoPE
        w.set_u32(a + ".rope.scaling.original_context_length", s.original_context);
        w.set_f32(a + ".rope.scaling.attn_factor", s.attention_factor);
        const std::vector<int64_t> dims{static_cast<int64_t>(s.long_factor.size())};
        w.add_tensor("rope_factors_long.weight", dims, ggml_type_of(DType::F32), encode(s.long_factor, dims[0], DType::F32));
        w.add_tensor("rope_factors_short.weight", dims, ggml_type_of(DType::F32), encode(s.short_factor, dims[0], DType::F32));
    }
    if (tweak) tweak(w);
    w.write(path);
}

}  // namespace kvscope::test
