#include "model/model_config.h"

#include "model/gguf_file.h"
#include "util/errors.h"
#include "util/json_file.h"
#include "util/mapped_file.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <nlohmann/json.hpp>

namespace kvscope {

using nlohmann::json;

int64_t ModelConfig::num_params() const {
    const int64_t h = hidden_size;
    int64_t attn = h * q_size() * 2 + h * kv_size() * 2 + (attention_bias ? q_size() + 2 * kv_size() : 0) +
                   (qk_norm ? 2 * head_dim : 0);
    int64_t mlp = 3 * h * intermediate_size;
    int64_t per_layer = attn + mlp + (sandwich_norms ? 4 : 2) * h;
    int64_t emb = static_cast<int64_t>(vocab_size) * h;
    return emb * (tie_word_embeddings ? 1 : 2) + per_layer * num_layers + h;
}

void ModelConfig::validate(const std::string& source) const {
    auto need = [&](bool ok, const std::string& what) {
        if (!ok) throw BadInput(source + ": " + what);
    };
    need(architecture == "llama" || architecture == "qwen2" || architecture == "qwen3" || architecture == "phi3" ||
             architecture == "gemma2" || architecture == "gemma3",
         "architecture '" + architecture +
             "' is not supported (supported: llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3)");
    need(sliding_window >= 0, "sliding_window must not be negative");
    need(sliding_layers.empty() || static_cast<int>(sliding_layers.size()) == num_layers,
         "the sliding-window layer pattern names " + std::to_string(sliding_layers.size()) + " layers, the model has " +
             std::to_string(num_layers));
    for (float v : {query_pre_attn_scalar, attn_logit_softcapping, final_logit_softcapping, rope_local_theta})
        need(v >= 0 && std::isfinite(v),
             "query_pre_attn_scalar, the logit soft-capping values and rope_local_base_freq must not be negative");
    if (rope_scaling.type == "longrope")
        need(rope_scaling.short_factor.size() == static_cast<size_t>(head_dim / 2) &&
                 rope_scaling.long_factor.size() == static_cast<size_t>(head_dim / 2),
             "rope_scaling longrope needs short_factor and long_factor of head_dim / 2 = " + std::to_string(head_dim / 2) +
                 " values, got " + std::to_string(rope_scaling.short_factor.size()) + " and " +
                 std::to_string(rope_scaling.long_factor.size()));
    for (const auto* factors : {&rope_scaling.short_factor, &rope_scaling.long_factor})
        for (float f : *factors) need(f > 0 && std::isfinite(f), "rope_scaling factors must be positive");
    // The frequencies divide by these (a factor of 0 or NaN gave NaN logits from GGUF, which had no check).
    if (rope_scaling.type == "linear" || rope_scaling.type == "llama3")
        need(rope_scaling.factor > 0 && std::isfinite(rope_scaling.factor),
             "rope_scaling factor must be positive, got " + std::to_string(rope_scaling.factor));
    if (rope_scaling.type == "llama3")
        need(rope_scaling.low_freq_factor > 0 && rope_scaling.high_freq_factor > rope_scaling.low_freq_factor &&
                 std::isfinite(rope_scaling.high_freq_factor),
             "rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor, got " +
                 std::to_string(rope_scaling.low_freq_factor) + " and " + std::to_string(rope_scaling.high_freq_factor));
    if (rope_scaling.type == "llama3" || rope_scaling.type == "longrope")
        need(rope_scaling.original_max_position_embeddings > 0,
             "rope_scaling original_max_position_embeddings must be positive, got " +
                 std::to_string(rope_scaling.original_max_position_embeddings));
    need(vocab_size > 0, "vocab_size must be positive");
    need(hidden_size > 0, "hidden_size must be positive");
    need(intermediate_size > 0, "intermediate_size must be positive");
    need(num_layers > 0, "num_hidden_layers must be positive");
    need(num_heads > 0, "num_attention_heads must be positive");
    need(num_kv_heads > 0 && num_heads % num_kv_heads == 0,
         "num_key_value_heads (" + std::to_string(num_kv_heads) + ") must divide num_attention_heads (" +
             std::to_string(num_heads) + ")");
    need(head_dim > 0 && head_dim % 2 == 0 && head_dim <= 1024,
         "head_dim " + std::to_string(head_dim) + " must be even and at most 1024");
    // Bounds far past any model's (the largest have 128 layers, hidden 16384, vocabularies of 262144),
    // so that a damaged size is refused here: the products below are ints, and a billion layers or
    // heads would be allocated before a missing tensor is noticed (2^29 + 8 heads of 8 wrapped q_size
    // to 64 and crashed attention).
    auto at_most = [&](int64_t value, int64_t cap, const std::string& what) {
        need(value <= cap, what + " " + std::to_string(value) + " is past " + std::to_string(cap) +
                               ", more than any model has (a damaged file?)");
    };
    at_most(num_layers, 4096, "num_hidden_layers");
    at_most(hidden_size, 1 << 20, "hidden_size");
    at_most(intermediate_size, 1 << 22, "intermediate_size");
    at_most(vocab_size, 1 << 24, "vocab_size");
    at_most(static_cast<int64_t>(num_heads) * head_dim, 1 << 20, "num_attention_heads x head_dim");
    need(max_position_embeddings > 0, "max_position_embeddings must be positive");
    need(rms_norm_eps > 0 && std::isfinite(rms_norm_eps), "rms_norm_eps must be positive");
    need(rope_theta > 0 && std::isfinite(rope_theta), "rope_theta must be a positive finite number (as a float)");
}

float ModelConfig::attention_scale() const {
    // LongRoPE scales cos and sin, so q and k, by the attention factor: q.k by its square.
    const float f = rope_attention_factor();
    return f * f / std::sqrt(query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<float>(head_dim));
}

std::vector<float> ModelConfig::rope_local_inv_freq() const {
    std::vector<float> inv;
    if (rope_local_theta <= 0) return inv;
    for (int i = 0; i < head_dim / 2; ++i)
        inv.push_back(static_cast<float>(1.0 / std::pow(static_cast<double>(rope_local_theta), 2.0 * i / head_dim)));
    return inv;
}

std::vector<float> ModelConfig::rope_inv_freq(int max_model_len) const {
    const int half = head_dim / 2;
    std::vector<float> inv(half);
    for (int i = 0; i < half; ++i)
        inv[i] = static_cast<float>(1.0 / std::pow(static_cast<double>(rope_theta), 2.0 * i / head_dim));
    if (rope_scaling.type == "longrope") {
        const int context = max_model_len > 0 ? max_model_len : max_position_embeddings;
        const auto& factors = context > rope_scaling.original_max_position_embeddings ? rope_scaling.long_factor
                                                                                      : rope_scaling.short_factor;
        for (int i = 0; i < half; ++i) inv[i] /= factors[i];
    } else if (rope_scaling.type == "linear") {
        for (float& f : inv) f /= rope_scaling.factor;
    } else if (rope_scaling.type == "llama3") {
        // Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, a smooth blend between.
        const double pi = 3.14159265358979323846;
        const double old_len = rope_scaling.original_max_position_embeddings;
        const double low_wavelen = old_len / rope_scaling.low_freq_factor;
        const double high_wavelen = old_len / rope_scaling.high_freq_factor;
        for (float& f : inv) {
            const double wavelen = 2 * pi / f;
            if (wavelen < high_wavelen) continue;
            if (wavelen > low_wavelen) {
                f = static_cast<float>(f / rope_scaling.factor);
            } else {
                const double smooth = (old_len / wavelen - rope_scaling.low_freq_factor) /
                                      (rope_scaling.high_freq_factor - rope_scaling.low_freq_factor);
                f = static_cast<float>((1 - smooth) * f / rope_scaling.factor + smooth * f);
            }
        }
    }
    return inv;
}

namespace {

// Without a head size of its own, a model's heads split its hidden size: one that does not divide it is a
// damaged size (the head size would be cut short, and blamed on whatever checks it next).
void need_whole_heads(const std::string& path, const std::string& hidden_key, const std::string& heads_key, const ModelConfig& c) {
    if (c.hidden_size > 0 && c.num_heads > 0 && c.hidden_size % c.num_heads != 0)
        throw BadInput(path + ": " + hidden_key + " " + std::to_string(c.hidden_size) + " is not a multiple of " + heads_key + " " +
                       std::to_string(c.num_heads) + " (and no head size is given)");
}

template <class T>
T get_field(const json& j, const std::string& path, const char* key, T fallback, bool required) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        if (required) throw BadInput(path + ": missing field '" + key + "'");
        return fallback;
    }
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        // nlohmann converts true to 1, 4.9 to 4 and 2^32 + 64 to 64 when asked for an int: a config with
        // such a value would load as a model of other shapes. Numbers only, whole where T is, in T's range.
        const bool whole = it->is_number_integer() || (it->is_number_float() && std::isfinite(it->get<double>()) &&
                                                       it->get<double>() == std::floor(it->get<double>()));
        if (!it->is_number() || (std::is_integral_v<T> && !whole))
            throw BadInput(path + ": field '" + key + "' must be " + (std::is_integral_v<T> ? "a whole number" : "a number") +
                           ", got " + it->dump().substr(0, 40));
        if constexpr (std::is_integral_v<T>) {
            const bool fits = it->is_number_unsigned() ? it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                                       : it->get<double>() >= static_cast<double>(std::numeric_limits<T>::min()) &&
                                                             it->get<double>() <= static_cast<double>(std::numeric_limits<T>::max());
            if (!fits) throw BadInput(path + ": field '" + key + "' = " + it->dump().substr(0, 40) + " is out of range");
        }
    }
    try {
        return it->get<T>();
    } catch (const json::exception&) {
        throw BadInput(path + ": field '" + key + "' has the wrong type (" + it->type_name() + ")");
    }
}

std::vector<int32_t> eos_ids_from(const json& v) {
    std::vector<int32_t> ids;
    if (v.is_number_integer()) ids.push_back(v.get<int32_t>());
    if (v.is_array())
        for (const auto& e : v)
            if (e.is_number_integer()) ids.push_back(e.get<int32_t>());
    return ids;
}

}  // namespace

// HF's longrope default: scale cos and sin by sqrt(1 + ln(s) / ln(original)), s = max / original (1 when s <= 1).
static float longrope_attention_factor(const ModelConfig& c) {
    const double original = c.rope_scaling.original_max_position_embeddings;
    const double s = c.max_position_embeddings / original;
    return s <= 1 ? 1.0f : static_cast<float>(std::sqrt(1 + std::log(s) / std::log(original)));
}

// The Gemma 2 / Gemma 3 text fields of config.json, with HF's defaults where a field is absent (null
// soft-capping means off).
static void read_gemma_hf(const json& j, const std::string& path, ModelConfig& c) {
    const bool g2 = c.architecture == "gemma2";
    c.norm_plus_one = c.sandwich_norms = c.gelu_tanh = c.scale_embeddings = true;
    for (const char* key : {"hidden_activation", "hidden_act"}) {
        const std::string act = get_field<std::string>(j, path, key, "gelu_pytorch_tanh", false);
        if (act != "gelu_pytorch_tanh" && act != "gelu_tanh" && act != "gelu")  // HF runs Gemma's "gelu" as tanh
            throw BadInput(path + ": " + key + " '" + act + "' is not supported for Gemma (gelu_pytorch_tanh)");
    }
    c.query_pre_attn_scalar = get_field<float>(j, path, "query_pre_attn_scalar", static_cast<float>(c.head_dim), false);
    auto softcap = [&](const char* key, float fallback) {
        if (!j.contains(key)) return fallback;
        return get_field<float>(j, path, key, 0.0f, false);  // null: off
    };
    c.attn_logit_softcapping = softcap("attn_logit_softcapping", g2 ? 50.0f : 0.0f);
    c.final_logit_softcapping = softcap("final_logit_softcapping", g2 ? 30.0f : 0.0f);
    c.sliding_window = get_field<int>(j, path, "sliding_window", 4096, false);
    c.sliding_layers.assign(std::max(0, c.num_layers), false);
    if (auto lt = j.find("layer_types"); lt != j.end() && !lt->is_null()) {
        if (!lt->is_array() || static_cast<int>(lt->size()) != c.num_layers)
            throw BadInput(path + ": layer_types must list num_hidden_layers (" + std::to_string(c.num_layers) +
                           ") entries");
        for (int l = 0; l < c.num_layers; ++l) {
            const json& t = (*lt)[l];
            if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
                throw BadInput(path + ": layer_types[" + std::to_string(l) +
                               "] must be \"sliding_attention\" or \"full_attention\"");
            c.sliding_layers[l] = t == "sliding_attention";
        }
    } else {
        // Gemma 2 alternates, local first; Gemma 3 has `pattern - 1` local layers, then a global one.
        const int pattern = g2 ? 2 : get_field<int>(j, path, "sliding_window_pattern", 6, false);
        if (pattern < 1) throw BadInput(path + ": sliding_window_pattern must be positive");
        for (int l = 0; l < c.num_layers; ++l) c.sliding_layers[l] = (l + 1) % pattern != 0;
    }
    if (!g2) c.rope_local_theta = get_field<float>(j, path, "rope_local_base_freq", 10000.0f, false);
}

ModelConfig config_from_hf_json(const std::string& path) {
    const json j = read_json_file(path);
    if (!j.is_object()) throw BadInput(path + ": not a JSON object");
    ModelConfig c;
    const std::string model_type = get_field<std::string>(j, path, "model_type", "", true);
    if (model_type == "llama" || model_type == "mistral")
        c.architecture = "llama";
    else if (model_type == "qwen2" || model_type == "qwen3" || model_type == "phi3" || model_type == "gemma2")
        c.architecture = model_type;
    else if (model_type == "gemma3_text")  // Gemma3ForCausalLM; "gemma3" is the multimodal wrapper
        c.architecture = "gemma3";
    else
        throw BadInput(path + ": model_type '" + model_type +
                       "' is not supported (supported: llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text)");
    const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
    c.fused_qkv = c.architecture == "phi3";
    c.vocab_size = get_field<int>(j, path, "vocab_size", 0, true);
    c.hidden_size = get_field<int>(j, path, "hidden_size", 0, true);
    c.intermediate_size = get_field<int>(j, path, "intermediate_size", 0, true);
    c.num_layers = get_field<int>(j, path, "num_hidden_layers", 0, true);
    c.num_heads = get_field<int>(j, path, "num_attention_heads", 0, true);
    c.num_kv_heads = get_field<int>(j, path, "num_key_value_heads", c.num_heads, false);
    if (!j.contains("head_dim") || j["head_dim"].is_null()) need_whole_heads(path, "hidden_size", "num_attention_heads", c);
    c.head_dim = get_field<int>(j, path, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0, false);
    c.max_position_embeddings = get_field<int>(j, path, "max_position_embeddings", 2048, false);
    c.rms_norm_eps = get_field<float>(j, path, "rms_norm_eps", 1e-6f, false);
    c.rope_theta = get_field<float>(j, path, "rope_theta", 10000.0f, false);
    c.tie_word_embeddings = get_field<bool>(j, path, "tie_word_embeddings", gemma, false);  // Gemma ties by default
    c.attention_bias = c.architecture == "qwen2" || get_field<bool>(j, path, "attention_bias", false, false);
    c.qk_norm = c.architecture == "qwen3" || c.architecture == "gemma3";
    if (gemma) {
        read_gemma_hf(j, path, c);
    } else {
        // The other families gate with SiLU and have no MLP biases: a config saying otherwise describes a
        // model this forward pass would compute wrongly (it ran SiLU for "gelu" without a word).
        for (const char* key : {"hidden_act", "hidden_activation"}) {
            const std::string act = get_field<std::string>(j, path, key, "silu", false);
            if (act != "silu" && act != "swish")
                throw BadInput(path + ": " + key + " '" + act.substr(0, 40) + "' is not supported for " + model_type + " (silu)");
        }
        if (get_field<bool>(j, path, "mlp_bias", false, false))
            throw BadInput(path + ": mlp_bias is not supported (MLP projections without biases)");
    }
    if (model_type == "mistral") {
        // Mistral's sliding_window (4096 in 7B v0.1, null from v0.2 on) windows every layer, as vLLM and
        // HF's MistralAttention apply it. (llama.cpp ignores it: its llama architecture reads no window
        // and its converter writes none, so GGUF llama files stay global here too.)
        c.sliding_window = get_field<int>(j, path, "sliding_window", 0, false);
        if (c.sliding_window < 0) throw BadInput(path + ": sliding_window must not be negative");
        c.sliding_layers.assign(c.sliding_window > 0 ? std::max(0, c.num_layers) : 0, true);
    }
    c.rope_neox = true;  // HF checkpoints rotate halves (their converters permute q/k rows for that)
    c.bos_token_id = get_field<int>(j, path, "bos_token_id", -1, false);
    if (j.contains("eos_token_id")) c.eos_token_ids = eos_ids_from(j["eos_token_id"]);
    const std::string dtype = get_field<std::string>(j, path, "torch_dtype", "float32", false);
    c.weight_dtype = dtype == "bfloat16" ? DType::BF16 : dtype == "float16" ? DType::F16 : DType::F32;
    if (auto rs = j.find("rope_scaling"); rs != j.end() && rs->is_object()) {
        std::string type = get_field<std::string>(*rs, path, "rope_type", "", false);
        if (type.empty()) type = get_field<std::string>(*rs, path, "type", "", false);
        if (type == "default") type = "";
        if (type == "su") type = "longrope";  // Phi-3's first configs
        if (!type.empty() && type != "linear" && type != "llama3" && type != "longrope")
            throw BadInput(path + ": rope_scaling type '" + type + "' is not supported (supported: linear, llama3, longrope)");
        c.rope_scaling.type = type;
        c.rope_scaling.factor = get_field<float>(*rs, path, "factor", 1.0f, !type.empty() && type != "longrope");
        c.rope_scaling.low_freq_factor = get_field<float>(*rs, path, "low_freq_factor", 1.0f, false);
        c.rope_scaling.high_freq_factor = get_field<float>(*rs, path, "high_freq_factor", 4.0f, false);
        c.rope_scaling.original_max_position_embeddings =
            get_field<int>(*rs, path, "original_max_position_embeddings", 8192, false);
        if (!(c.rope_scaling.factor > 0)) throw BadInput(path + ": rope_scaling.factor must be positive");
        if (type == "longrope") {
            // Phi-3 keeps original_max_position_embeddings beside rope_scaling; the factors are lists.
            c.rope_scaling.original_max_position_embeddings =
                get_field<int>(j, path, "original_max_position_embeddings", c.max_position_embeddings, false);
            for (auto [key, out] : {std::pair{"short_factor", &c.rope_scaling.short_factor},
                                    std::pair{"long_factor", &c.rope_scaling.long_factor}}) {
                auto f = rs->find(key);
                if (f == rs->end() || !f->is_array()) throw BadInput(path + ": rope_scaling." + key + " must be a list of numbers");
                for (const auto& v : *f) {
                    if (!v.is_number()) throw BadInput(path + ": rope_scaling." + key + " must be a list of numbers");
                    out->push_back(v.get<float>());
                }
            }
            c.rope_scaling.attention_factor =
                get_field<float>(*rs, path, "attention_factor", longrope_attention_factor(c), false);
        }
    }
    c.validate(path);
    return c;
}

// Gemma 2 / 3 as llama.cpp reads them (src/models/gemma2.cpp, gemma3.cpp): its defaults where a key is
// absent, the attention scale it derives from the model size (no key holds query_pre_attn_scalar), the
// norms as stored (the converter already added Gemma's 1).
static void read_gemma_gguf(const GgufFile& g, ModelConfig& c) {
    const bool g2 = c.architecture == "gemma2";
    const std::string p = c.architecture + ".";
    c.sandwich_norms = c.gelu_tanh = c.scale_embeddings = true;
    c.qk_norm = !g2;
    // The 27B models scale by hidden / heads (gemma_pytorch's config), the others by head_dim.
    const bool is_27b = c.num_layers == (g2 ? 46 : 62);
    c.query_pre_attn_scalar = is_27b ? static_cast<float>(c.hidden_size / c.num_heads) : static_cast<float>(c.head_dim);
    c.attn_logit_softcapping = g2 ? static_cast<float>(g.get_float_or(p + "attn_logit_softcapping", 50.0)) : 0.0f;
    c.final_logit_softcapping = static_cast<float>(g.get_float_or(p + "final_logit_softcapping", g2 ? 30.0 : 0.0));
    c.sliding_window = g.get_i32_or(p + "attention.sliding_window", g2 ? 4096 : 0);
    if (c.sliding_window <= 0) return;  // Gemma 3 without a window: every layer global
    c.sliding_layers.assign(std::max(0, c.num_layers), false);
    const GgufValue* pattern = g.find(p + "attention.sliding_window_pattern");
    if (pattern && pattern->type == GgufType::ARRAY) {  // one bool per layer, true = windowed
        if (static_cast<int>(pattern->numbers.size()) != c.num_layers)
            throw BadInput(g.path() + ": " + p + "attention.sliding_window_pattern lists " +
                           std::to_string(pattern->numbers.size()) + " layers, the model has " + std::to_string(c.num_layers));
        for (int l = 0; l < c.num_layers; ++l) c.sliding_layers[l] = pattern->numbers[l] != 0;
    } else {
        // llama.cpp's set_swa_pattern(n): layer l is windowed when l % n < n - 1.
        const int64_t n = pattern ? pattern->i : (g2 ? 2 : 6);
        if (n < 1) throw BadInput(g.path() + ": " + p + "attention.sliding_window_pattern must be positive");
        for (int l = 0; l < c.num_layers; ++l) c.sliding_layers[l] = l % n < n - 1;
    }
    if (!g2) c.rope_local_theta = static_cast<float>(g.get_float_or(p + "rope.freq_base_swa", 10000.0));
}

ModelConfig config_from_gguf(const GgufFile& g) {
    // One shard of a split file (llama-gguf-split) holds a part of the tensors, and only the first the
    // metadata: said so, rather than a missing tensor or key.
    if (const int32_t shards = g.get_i32_or("split.count", 1); shards > 1)
        throw BadInput(g.path() + ": shard " + std::to_string(g.get_i32_or("split.no", 0) + 1) + " of " + std::to_string(shards) +
                       " of a split GGUF; kvscope reads one file: merge the shards first (llama-gguf-split --merge FIRST OUT)");
    ModelConfig c;
    const std::string arch = g.get_string("general.architecture");
    if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "phi3" && arch != "gemma2" && arch != "gemma3")
        throw BadInput(g.path() + ": general.architecture '" + arch +
                       "' is not supported (supported: llama, qwen2, qwen3, phi3, gemma2, gemma3)");
    c.architecture = arch;
    const std::string p = arch + ".";
    c.hidden_size = g.get_i32(p + "embedding_length");
    c.intermediate_size = g.get_i32(p + "feed_forward_length");
    c.num_layers = g.get_i32(p + "block_count");
    c.num_heads = g.get_i32(p + "attention.head_count");
    c.num_kv_heads = g.get_i32_or(p + "attention.head_count_kv", c.num_heads);
    if (!g.find(p + "attention.key_length")) need_whole_heads(g.path(), p + "embedding_length", p + "attention.head_count", c);
    c.head_dim = g.get_i32_or(p + "attention.key_length", c.num_heads ? c.hidden_size / c.num_heads : 0);
    c.max_position_embeddings = g.get_i32_or(p + "context_length", 2048);
    const bool gemma = arch == "gemma2" || arch == "gemma3";
    c.rms_norm_eps = static_cast<float>(g.get_float_or(p + "attention.layer_norm_rms_epsilon", gemma ? 1e-6 : 1e-5));
    c.rope_theta = static_cast<float>(g.get_float_or(p + "rope.freq_base", 10000.0));
    const std::string scaling = g.get_string_or(p + "rope.scaling.type", "");
    if (scaling == "linear") {
        c.rope_scaling.type = "linear";
        c.rope_scaling.factor = static_cast<float>(g.get_float_or(p + "rope.scaling.factor", 1.0));
    } else if (!scaling.empty() && scaling != "none") {
        throw BadInput(g.path() + ": rope.scaling.type '" + scaling + "' is not supported");
    }
    // llama.cpp writes Llama 3.1 scaling as per-frequency factors (tensor rope_freqs.weight), read by the
    // weight loader; the interleaved q/k rows of GGUF llama files pair dims (2i, 2i+1).
    c.rope_neox = arch != "llama";
    c.attention_bias = arch == "qwen2";
    c.qk_norm = arch == "qwen3";
    c.fused_qkv = arch == "phi3";
    if (gemma) read_gemma_gguf(g, c);
    // llama.cpp's Phi-3 files hold LongRoPE's factors as tensors, the original context and the cos/sin
    // factor as keys.
    const GgufTensorInfo* long_factors = g.find_tensor("rope_factors_long.weight");
    const GgufTensorInfo* short_factors = g.find_tensor("rope_factors_short.weight");
    if (long_factors && short_factors) {
        c.rope_scaling.type = "longrope";
        for (auto [t, out] : {std::pair{long_factors, &c.rope_scaling.long_factor},
                              std::pair{short_factors, &c.rope_scaling.short_factor}}) {
            if (t->dtype != DType::F32 || t->dims.size() != 1)
                throw BadInput(g.path() + ": tensor '" + t->name + "' must be a 1-D F32 tensor");
            out->resize(static_cast<size_t>(t->dims[0]));
            std::memcpy(out->data(), t->data, out->size() * sizeof(float));  // GGUF aligns data to 32 bytes
        }
        c.rope_scaling.original_max_position_embeddings =
            g.get_i32_or(p + "rope.scaling.original_context_length", c.max_position_embeddings);
        c.rope_scaling.attention_factor =
            static_cast<float>(g.get_float_or(p + "rope.scaling.attn_factor", longrope_attention_factor(c)));
    }
    const GgufTensorInfo* out = g.find_tensor("output.weight");
    c.tie_word_embeddings = out == nullptr;
    if (const GgufValue* toks = g.find("tokenizer.ggml.tokens"))
        c.vocab_size = static_cast<int>(toks->strings.size());
    c.vocab_size = g.get_i32_or(p + "vocab_size", c.vocab_size);
    if (const GgufTensorInfo* emb = g.find_tensor("token_embd.weight"); emb && emb->dims.size() == 2)
        c.vocab_size = static_cast<int>(emb->dims[1]);
    c.bos_token_id = g.get_i32_or("tokenizer.ggml.bos_token_id", -1);
    if (int64_t eos = g.get_i32_or("tokenizer.ggml.eos_token_id", -1); eos >= 0)
        c.eos_token_ids.push_back(static_cast<int32_t>(eos));
    if (int64_t eot = g.get_i32_or("tokenizer.ggml.eot_token_id", -1); eot >= 0 && eot != g.get_i32_or("tokenizer.ggml.eos_token_id", -1))
        c.eos_token_ids.push_back(static_cast<int32_t>(eot));
    c.validate(g.path());
    // RoPE turns the whole head here; a file that turns part of it (partial rotary) is another model. After
    // validate(), so that a damaged size is named as itself rather than as this.
    if (const int32_t rot = g.get_i32_or(p + "rope.dimension_count", c.head_dim); rot != c.head_dim)
        throw BadInput(g.path() + ": " + p + "rope.dimension_count " + std::to_string(rot) + " is not supported (RoPE over the whole head_dim " +
                       std::to_string(c.head_dim) + ")");
    return c;
}

std::vector<std::string> dummy_preset_names() {
    return {"tiny",        "smollm-135m", "llama-1b",    "qwen2-0.5b",  "qwen3-0.6b",  "phi3-mini",   "gemma2-2b",
            "gemma3-1b",   "llama-3-8b",  "llama-3-70b", "qwen2.5-7b",  "qwen2.5-32b", "qwen2.5-72b", "mistral-7b",
            "mistral-7b-v0.1"};
}

ModelConfig dummy_preset_config(const std::string& preset) {
    ModelConfig c;
    c.architecture = "llama";
    c.tie_word_embeddings = true;
    c.rope_neox = true;
    if (preset == "tiny") {  // ~3.5 M parameters: quick to run everywhere
        c.vocab_size = 512; c.hidden_size = 256; c.intermediate_size = 768; c.num_layers = 4;
        c.num_heads = 8; c.num_kv_heads = 4; c.head_dim = 32; c.max_position_embeddings = 2048;
        c.weight_dtype = DType::F32;
    } else if (preset == "smollm-135m") {  // SmolLM2-135M
        c.vocab_size = 49152; c.hidden_size = 576; c.intermediate_size = 1536; c.num_layers = 30;
        c.num_heads = 9; c.num_kv_heads = 3; c.head_dim = 64; c.max_position_embeddings = 8192;
        c.rope_theta = 100000.0f; c.weight_dtype = DType::F32;
    } else if (preset == "llama-1b") {  // Llama-3.2-1B
        c.vocab_size = 128256; c.hidden_size = 2048; c.intermediate_size = 8192; c.num_layers = 16;
        c.num_heads = 32; c.num_kv_heads = 8; c.head_dim = 64; c.max_position_embeddings = 131072;
        c.rope_theta = 500000.0f; c.rope_scaling.type = "llama3"; c.rope_scaling.factor = 32.0f;
        c.weight_dtype = DType::BF16;
    } else if (preset == "qwen2-0.5b") {  // Qwen2-0.5B
        c.architecture = "qwen2"; c.attention_bias = true;
        c.vocab_size = 151936; c.hidden_size = 896; c.intermediate_size = 4864; c.num_layers = 24;
        c.num_heads = 14; c.num_kv_heads = 2; c.head_dim = 64; c.max_position_embeddings = 32768;
        c.rope_theta = 1000000.0f; c.rms_norm_eps = 1e-6f; c.weight_dtype = DType::BF16;
    } else if (preset == "qwen3-0.6b") {  // Qwen3-0.6B: head_dim 128 makes q 2048 wide in a 1024-wide model
        c.architecture = "qwen3"; c.qk_norm = true;
        c.vocab_size = 151936; c.hidden_size = 1024; c.intermediate_size = 3072; c.num_layers = 28;
        c.num_heads = 16; c.num_kv_heads = 8; c.head_dim = 128; c.max_position_embeddings = 40960;
        c.rope_theta = 1000000.0f; c.rms_norm_eps = 1e-6f; c.weight_dtype = DType::BF16;
    } else if (preset == "phi3-mini") {  // Phi-3-mini-4k-instruct: fused qkv and gate_up, no GQA
        c.architecture = "phi3"; c.fused_qkv = true; c.tie_word_embeddings = false;
        c.vocab_size = 32064; c.hidden_size = 3072; c.intermediate_size = 8192; c.num_layers = 32;
        c.num_heads = 32; c.num_kv_heads = 32; c.head_dim = 96; c.max_position_embeddings = 4096;
        c.rope_theta = 10000.0f; c.weight_dtype = DType::BF16;
    } else if (preset == "gemma2-2b" || preset == "gemma3-1b") {
        // gemma-2-2b and gemma-3-1b-it config.json: head_dim 256, sandwich norms, GELU-tanh, scaled
        // embeddings; Gemma 2 alternates local (4096) and global layers and soft-caps scores (50) and
        // logits (30); Gemma 3 has five local layers (512, RoPE base 10^4) per global one (10^6) and q/k norms.
        const bool g2 = preset == "gemma2-2b";
        c.architecture = g2 ? "gemma2" : "gemma3";
        c.sandwich_norms = c.gelu_tanh = c.scale_embeddings = true;
        c.qk_norm = !g2;
        c.vocab_size = g2 ? 256000 : 262144; c.hidden_size = g2 ? 2304 : 1152; c.intermediate_size = g2 ? 9216 : 6912;
        c.num_layers = 26; c.num_heads = g2 ? 8 : 4; c.num_kv_heads = g2 ? 4 : 1; c.head_dim = 256;
        c.max_position_embeddings = g2 ? 8192 : 32768; c.rms_norm_eps = 1e-6f; c.weight_dtype = DType::BF16;
        c.query_pre_attn_scalar = 256;
        c.rope_theta = g2 ? 10000.0f : 1000000.0f;
        c.rope_local_theta = g2 ? 0.0f : 10000.0f;
        c.attn_logit_softcapping = g2 ? 50.0f : 0.0f;
        c.final_logit_softcapping = g2 ? 30.0f : 0.0f;
        c.sliding_window = g2 ? 4096 : 512;
        for (int l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back(g2 ? l % 2 == 0 : (l + 1) % 6 != 0);
    } else if (preset == "llama-3-8b" || preset == "llama-3-70b") {
        // Meta-Llama-3-8B / -70B config.json (the 3.1 models share the shapes; their context is longer).
        const bool big = preset == "llama-3-70b";
        c.tie_word_embeddings = false;
        c.vocab_size = 128256; c.hidden_size = big ? 8192 : 4096; c.intermediate_size = big ? 28672 : 14336;
        c.num_layers = big ? 80 : 32; c.num_heads = big ? 64 : 32; c.num_kv_heads = 8; c.head_dim = 128;
        c.max_position_embeddings = 8192; c.rope_theta = 500000.0f; c.weight_dtype = DType::BF16;
    } else if (preset == "qwen2.5-7b" || preset == "qwen2.5-32b" || preset == "qwen2.5-72b") {
        // Qwen2.5-7B / -32B / -72B config.json.
        c.architecture = "qwen2"; c.attention_bias = true; c.tie_word_embeddings = false;
        c.vocab_size = 152064; c.head_dim = 128; c.max_position_embeddings = 32768;
        c.rope_theta = 1000000.0f; c.rms_norm_eps = 1e-6f; c.weight_dtype = DType::BF16;
        if (preset == "qwen2.5-7b") {
            c.hidden_size = 3584; c.intermediate_size = 18944; c.num_layers = 28; c.num_heads = 28; c.num_kv_heads = 4;
        } else if (preset == "qwen2.5-32b") {
            c.hidden_size = 5120; c.intermediate_size = 27648; c.num_layers = 64; c.num_heads = 40; c.num_kv_heads = 8;
        } else {
            c.hidden_size = 8192; c.intermediate_size = 29568; c.num_layers = 80; c.num_heads = 64; c.num_kv_heads = 8;
        }
    } else if (preset == "mistral-7b" || preset == "mistral-7b-v0.1") {
        // Mistral-7B-v0.3 config.json (no sliding window); Mistral-7B-v0.1: vocab 32000, RoPE base 10^4,
        // and a window of 4096 on every layer.
        const bool v01 = preset == "mistral-7b-v0.1";
        c.tie_word_embeddings = false;
        c.vocab_size = v01 ? 32000 : 32768; c.hidden_size = 4096; c.intermediate_size = 14336; c.num_layers = 32;
        c.num_heads = 32; c.num_kv_heads = 8; c.head_dim = 128; c.max_position_embeddings = 32768;
        c.rope_theta = v01 ? 10000.0f : 1000000.0f; c.weight_dtype = DType::BF16;
        if (v01) {
            c.sliding_window = 4096;
            c.sliding_layers.assign(c.num_layers, true);
        }
    } else {
        std::string names;
        for (const auto& n : dummy_preset_names()) names += (names.empty() ? "" : ", ") + n;
        throw BadInput("dummy:" + preset + ": unknown preset (known: " + names + ")");
    }
    c.bos_token_id = 256;  // the byte-level tokenizer of dummy models: 256 bytes, then <s>, </s>
    c.eos_token_ids = {257};
    return c;
}

}  // namespace kvscope
