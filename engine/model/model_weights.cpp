#include "model/model_weights.h"

#include "cpu/quant.h"
#include "model/gguf_file.h"
#include "model/safetensors_file.h"
#include "util/errors.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <thread>

namespace kvscope {

int64_t ModelWeights::weight_bytes() const {
    int64_t total = 0;
    for (const auto& [dt, bytes] : bytes_by_dtype) total += bytes;
    return total;
}

namespace {

// A tensor as the loaders see it, whatever the file format: row-major shape, outermost first.
struct TensorRef {
    const void* data = nullptr;
    std::optional<DType> dtype;
    std::string type_name;
    std::vector<int64_t> shape;
};

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

// "IQ2_XS x27, IQ3_S x3": the types of a file's tensors (ts: GgufTensorInfo or SafetensorsTensor) that
// kvscope does not read, with their counts, most first; "" when every tensor is readable. A refusal names
// them all: the first tensor refused may hold a fallback type, not the one the file was made for.
template <class Tensor>
std::string unsupported_types(const std::vector<Tensor>& ts, std::function<std::string(const Tensor&)> type_name) {
    std::map<std::string, int> count;
    for (const Tensor& t : ts)
        if (!t.dtype) ++count[type_name(t)];
    std::vector<std::pair<std::string, int>> sorted(count.begin(), count.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string out;
    for (const auto& [name, n] : sorted) out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    return out;
}

// Turns named tensors into checked WeightViews and F32 vectors.
class WeightBinder {
public:
    // unsupported: unsupported_types of the file.
    WeightBinder(std::string source, std::function<std::optional<TensorRef>(const std::string&)> lookup,
                 ModelWeights& out, std::string unsupported)
        : source_(std::move(source)), lookup_(std::move(lookup)), out_(out), unsupported_(std::move(unsupported)) {}

    std::optional<TensorRef> find(const std::string& name) const { return lookup_(name); }

    TensorRef require(const std::string& name, const std::vector<int64_t>& shape) const {
        std::optional<TensorRef> t = lookup_(name);
        if (!t) throw BadInput(source_ + ": missing tensor '" + name + "'");
        if (!t->dtype)
            throw BadInput(source_ + ": tensor '" + name + "' has type " + t->type_name +
                           ", which kvscope does not support (the file's tensors of types it does not read: " + unsupported_ +
                           "; supported: " + dtype_name_list() + ")");
        if (t->shape != shape)
            throw BadInput(source_ + ": tensor '" + name + "' has shape " + shape_str(t->shape) + ", expected " +
                           shape_str(shape));
        return *t;
    }

    WeightView matrix(const std::string& name, int64_t rows, int64_t cols) const {
        TensorRef t = require(name, {rows, cols});
        if (cols % dtype_block_elems(*t.dtype) != 0)
            throw BadInput(source_ + ": tensor '" + name + "' rows of " + std::to_string(cols) +
                           " values are not a whole number of " + std::string(dtype_name(*t.dtype)) + " blocks");
        out_.bytes_by_dtype[*t.dtype] += dtype_row_bytes(*t.dtype, cols) * rows;
        return {t.data, *t.dtype, rows, cols};
    }

    std::vector<float> vector(const std::string& name, int64_t n) const {
        TensorRef t = require(name, {n});
        if (n % dtype_block_elems(*t.dtype) != 0)
            throw BadInput(source_ + ": tensor '" + name + "' is not a whole number of blocks");
        std::vector<float> v(n);
        cpu::dequantize_row(*t.dtype, t.data, v.data(), n);
        out_.bytes_by_dtype[*t.dtype] += dtype_row_bytes(*t.dtype, n);
        for (float x : v)
            if (!std::isfinite(x)) throw BadInput(source_ + ": tensor '" + name + "' holds a non-finite value");
        return v;
    }

private:
    std::string source_;
    std::function<std::optional<TensorRef>(const std::string&)> lookup_;
    ModelWeights& out_;
    std::string unsupported_;
};

struct TensorNames {
    std::string embedding, lm_head, final_norm, rope_freqs;
    std::function<std::string(int layer, const char* what)> layer;
};

void bind_all(const WeightBinder& b, const TensorNames& names, const ModelConfig& c, ModelWeights& w) {
    const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), f = c.intermediate_size;
    // The factor a norm multiplies by: Gemma's HF files hold w of (1 + w), added here in F32 as HF does.
    auto norm = [&](const std::string& name, int64_t n) {
        std::vector<float> v = b.vector(name, n);
        if (c.norm_plus_one)
            for (float& x : v) x += 1.0f;
        return v;
    };
    w.token_embedding = b.matrix(names.embedding, c.vocab_size, h);
    w.lm_head = c.tie_word_embeddings ? w.token_embedding : b.matrix(names.lm_head, c.vocab_size, h);
    w.final_norm = norm(names.final_norm, h);
    w.layers.resize(c.num_layers);
    for (int l = 0; l < c.num_layers; ++l) {
        LayerWeights& L = w.layers[l];
        auto n = [&](const char* what) { return names.layer(l, what); };
        L.attn_norm = norm(n("attn_norm"), h);
        if (c.fused_qkv) {  // Phi-3: views of the fused matrices' row ranges, no copy
            const WeightView qkv = b.matrix(n("qkv"), q + 2 * kv, h);
            L.wq = row_range(qkv, 0, q);
            L.wk = row_range(qkv, q, kv);
            L.wv = row_range(qkv, q + kv, kv);
        } else {
            L.wq = b.matrix(n("q"), q, h);
            L.wk = b.matrix(n("k"), kv, h);
            L.wv = b.matrix(n("v"), kv, h);
        }
        L.wo = b.matrix(n("o"), h, q);
        if (c.attention_bias) {
            L.bq = b.vector(n("q_bias"), q);
            L.bk = b.vector(n("k_bias"), kv);
            L.bv = b.vector(n("v_bias"), kv);
        }
        if (c.qk_norm) {
            L.q_norm = norm(n("q_norm"), c.head_dim);
            L.k_norm = norm(n("k_norm"), c.head_dim);
        }
        if (c.sandwich_norms) {
            L.post_attn_norm = norm(n("post_attn_norm"), h);
            L.post_ffn_norm = norm(n("post_ffn_norm"), h);
        }
        L.ffn_norm = norm(n("ffn_norm"), h);
        if (c.fused_qkv) {  // gate first, then up (HF's chunk(2), llama.cpp's swiglu split)
            const WeightView gate_up = b.matrix(n("gate_up"), 2 * f, h);
            L.w_gate = row_range(gate_up, 0, f);
            L.w_up = row_range(gate_up, f, f);
        } else {
            L.w_gate = b.matrix(n("gate"), f, h);
            L.w_up = b.matrix(n("up"), f, h);
        }
        L.w_down = b.matrix(n("down"), h, f);
    }
    if (!names.rope_freqs.empty() && b.find(names.rope_freqs))
        w.rope_freq_factors = b.vector(names.rope_freqs, c.head_dim / 2);
}

}  // namespace

namespace {
// A tensor of a layer past the declared count (blk.5.* with block_count 5) means the config and the weights
// disagree: running the declared layers would silently drop the rest (llama.cpp refuses such files).
template <class Tensors>
void check_layers_declared(const Tensors& tensors, const std::string& prefix, const ModelConfig& c, const std::string& source) {
    for (const auto& t : tensors) {
        if (t.name.rfind(prefix, 0) != 0) continue;
        const char* digits = t.name.c_str() + prefix.size();
        char* end = nullptr;
        const long layer = std::strtol(digits, &end, 10);
        if (end != digits && *end == '.' && layer >= c.num_layers)
            throw BadInput(source + ": tensor '" + t.name + "' belongs to layer " + std::to_string(layer) +
                           ", but the model declares " + std::to_string(c.num_layers) + " layers");
    }
}
}  // namespace

ModelWeights load_weights_gguf(std::shared_ptr<const GgufFile> gguf, const ModelConfig& config) {
    check_layers_declared(gguf->tensors(), "blk.", config, gguf->path());
    ModelWeights w;
    w.storage.push_back(gguf);
    WeightBinder binder(
        gguf->path(),
        [g = gguf.get()](const std::string& name) -> std::optional<TensorRef> {
            const GgufTensorInfo* t = g->find_tensor(name);
            if (!t) return std::nullopt;
            TensorRef r{t->data, t->dtype, std::string(ggml_type_name(t->ggml_type)), {}};
            r.shape.assign(t->dims.rbegin(), t->dims.rend());  // ggml lists the contiguous dim first
            return r;
        },
        w,
        unsupported_types<GgufTensorInfo>(gguf->tensors(),
                                          [](const GgufTensorInfo& t) { return std::string(ggml_type_name(t.ggml_type)); }));
    TensorNames names{"token_embd.weight", "output.weight", "output_norm.weight", "rope_freqs.weight",
                      [](int l, const char* what) {
                          static const std::map<std::string, std::string> m = {
                              {"attn_norm", "attn_norm.weight"}, {"q", "attn_q.weight"}, {"k", "attn_k.weight"},
                              {"v", "attn_v.weight"}, {"o", "attn_output.weight"}, {"q_bias", "attn_q.bias"},
                              {"k_bias", "attn_k.bias"}, {"v_bias", "attn_v.bias"}, {"ffn_norm", "ffn_norm.weight"},
                              {"q_norm", "attn_q_norm.weight"}, {"k_norm", "attn_k_norm.weight"},
                              {"qkv", "attn_qkv.weight"}, {"gate_up", "ffn_up.weight"},
                              {"post_attn_norm", "post_attention_norm.weight"}, {"post_ffn_norm", "post_ffw_norm.weight"},
                              {"gate", "ffn_gate.weight"}, {"up", "ffn_up.weight"}, {"down", "ffn_down.weight"}};
                          return "blk." + std::to_string(l) + "." + m.at(what);
                      }};
    bind_all(binder, names, config, w);
    return w;
}

ModelWeights load_weights_safetensors(std::shared_ptr<const SafetensorsModel> st, const ModelConfig& config,
                                      const std::string& source) {
    check_layers_declared(st->tensors(), "model.layers.", config, source);
    ModelWeights w;
    w.storage.push_back(st);
    WeightBinder binder(
        source,
        [s = st.get()](const std::string& name) -> std::optional<TensorRef> {
            const SafetensorsTensor* t = s->find(name);
            if (!t) return std::nullopt;
            return TensorRef{t->data, t->dtype, t->dtype_name, t->shape};
        },
        w, unsupported_types<SafetensorsTensor>(st->tensors(), [](const SafetensorsTensor& t) { return t.dtype_name; }));
    // Gemma's post_attention_layernorm normalises the attention output; its MLP input norm is
    // pre_feedforward_layernorm (Llama's post_attention_layernorm).
    const bool sandwich = config.sandwich_norms;
    TensorNames names{"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight", "",
                      [sandwich](int l, const char* what) {
                          static const std::map<std::string, std::string> gemma = {
                              {"post_attn_norm", "post_attention_layernorm.weight"},
                              {"ffn_norm", "pre_feedforward_layernorm.weight"},
                              {"post_ffn_norm", "post_feedforward_layernorm.weight"}};
                          if (auto it = gemma.find(what); sandwich && it != gemma.end())
                              return "model.layers." + std::to_string(l) + "." + it->second;
                          static const std::map<std::string, std::string> m = {
                              {"attn_norm", "input_layernorm.weight"}, {"q", "self_attn.q_proj.weight"},
                              {"k", "self_attn.k_proj.weight"}, {"v", "self_attn.v_proj.weight"},
                              {"o", "self_attn.o_proj.weight"}, {"q_bias", "self_attn.q_proj.bias"},
                              {"k_bias", "self_attn.k_proj.bias"}, {"v_bias", "self_attn.v_proj.bias"},
                              {"q_norm", "self_attn.q_norm.weight"}, {"k_norm", "self_attn.k_norm.weight"},
                              {"qkv", "self_attn.qkv_proj.weight"}, {"gate_up", "mlp.gate_up_proj.weight"},
                              {"ffn_norm", "post_attention_layernorm.weight"}, {"gate", "mlp.gate_proj.weight"},
                              {"up", "mlp.up_proj.weight"}, {"down", "mlp.down_proj.weight"}};
                          return "model.layers." + std::to_string(l) + "." + m.at(what);
                      }};
    // Some tied checkpoints still carry lm_head.weight; some untied ones omit it (then it is tied).
    ModelConfig c = config;
    if (!c.tie_word_embeddings && !st->find("lm_head.weight")) c.tie_word_embeddings = true;
    bind_all(binder, names, c, w);
    return w;
}

namespace {

// splitmix64: a tiny, good, seekable generator, so threads can fill disjoint ranges reproducibly.
inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Uniform in [-a, a] with a = std * sqrt(3): the same std as the normal init, much cheaper to draw.
void fill_random(float* out, int64_t n, uint64_t stream, float stddev) {
    const float a = stddev * 1.7320508f;
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t r = splitmix64(stream ^ (static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ull));
        out[i] = (static_cast<float>(r >> 40) / 16777216.0f * 2.0f - 1.0f) * a;
    }
}

// The type llama-quantize writes for a tensor whose rows are not whole 256-value blocks of the K type asked
// for (its "falling back to" warning; ngxson/llama.cpp 3f545be on bench-135m, whose rows are 576 long):
// a dummy:PRESET:TYPE model holds what a file quantized to TYPE from that model would.
DType row_fallback(DType t) {
    switch (t) {
    case DType::Q2_K:
    case DType::Q3_K: return DType::Q4_0;
    case DType::Q4_K: return DType::Q5_0;
    case DType::Q5_K: return DType::Q5_1;
    case DType::Q6_K: return DType::Q8_0;
    case DType::IQ4_XS: return DType::IQ4_NL;
    default: return t;
    }
}

}  // namespace

ModelWeights make_dummy_weights(const ModelConfig& c, DType requested, uint64_t seed) {
    ModelWeights w;
    uint64_t stream = splitmix64(seed);
    auto matrix = [&](int64_t rows, int64_t cols) {
        const DType dtype = cols % dtype_block_elems(requested) == 0 ? requested : row_fallback(requested);
        if (cols % dtype_block_elems(dtype) != 0)
            throw BadInput("dummy model: " + std::to_string(cols) + " columns are not whole " +
                           std::string(dtype_name(dtype)) + " blocks");
        const size_t row_bytes = dtype_row_bytes(dtype, cols);
        auto buf = std::shared_ptr<uint8_t[]>(new uint8_t[row_bytes * rows]);
        const uint64_t s = (stream = splitmix64(stream));
        const unsigned nt = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < nt; ++t)
            threads.emplace_back([&, t] {
                std::vector<float> row(cols);
                for (int64_t r = t; r < rows; r += nt) {
                    fill_random(row.data(), cols, s ^ splitmix64(static_cast<uint64_t>(r)), 0.02f);
                    cpu::quantize_row(dtype, row.data(), buf.get() + r * row_bytes, cols);
                }
            });
        for (auto& th : threads) th.join();
        w.storage.push_back(buf);
        w.bytes_by_dtype[dtype] += row_bytes * rows;
        return WeightView{buf.get(), dtype, rows, cols};
    };
    auto ones = [&](int64_t n) {
        w.bytes_by_dtype[DType::F32] += n * 4;
        return std::vector<float>(n, 1.0f);
    };
    auto small = [&](int64_t n) {
        std::vector<float> v(n);
        fill_random(v.data(), n, (stream = splitmix64(stream)), 0.02f);
        w.bytes_by_dtype[DType::F32] += n * 4;
        return v;
    };
    const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), f = c.intermediate_size;
    w.token_embedding = matrix(c.vocab_size, h);
    w.lm_head = c.tie_word_embeddings ? w.token_embedding : matrix(c.vocab_size, h);
    w.final_norm = ones(h);
    w.layers.resize(c.num_layers);
    for (auto& L : w.layers) {
        L.attn_norm = ones(h);
        if (c.fused_qkv) {  // one buffer each, as the files hold them
            const WeightView qkv = matrix(q + 2 * kv, h);
            L.wq = row_range(qkv, 0, q);
            L.wk = row_range(qkv, q, kv);
            L.wv = row_range(qkv, q + kv, kv);
        } else {
            L.wq = matrix(q, h);
            L.wk = matrix(kv, h);
            L.wv = matrix(kv, h);
        }
        L.wo = matrix(h, q);
        if (c.attention_bias) {
            L.bq = small(q);
            L.bk = small(kv);
            L.bv = small(kv);
        }
        if (c.qk_norm) {
            L.q_norm = ones(c.head_dim);
            L.k_norm = ones(c.head_dim);
        }
        if (c.sandwich_norms) {
            L.post_attn_norm = ones(h);
            L.post_ffn_norm = ones(h);
        }
        L.ffn_norm = ones(h);
        if (c.fused_qkv) {
            const WeightView gate_up = matrix(2 * f, h);
            L.w_gate = row_range(gate_up, 0, f);
            L.w_up = row_range(gate_up, f, f);
        } else {
            L.w_gate = matrix(f, h);
            L.w_up = matrix(f, h);
        }
        L.w_down = matrix(h, f);
    }
    return w;
}

}  // namespace kvscope
