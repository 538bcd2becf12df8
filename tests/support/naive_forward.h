// A second, deliberately plain implementation of the decoder forward pass (llama, qwen2, qwen3, phi3
// with LongRoPE, gemma2 and gemma3 as HF's modeling_gemma2/3 compute them) over the HF-layout tensors of
// random_model.h: one sequence, every position, plain loops in double, no paging, no batching, no backend.
// The engine's kernels are checked against it, so it shares no code with them.
#pragma once

#include "random_model.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace kvscope::test {

// Logits [tokens.size(), vocab] of the HF-layout model `tensors` of shape s (rotate-half RoPE). With
// LongRoPE, `context` (the max_model_len it runs at) picks the long or the short factors.
inline std::vector<float> naive_logits(const RandomModelShape& s, const std::vector<RandomTensor>& tensors,
                                       const std::vector<int32_t>& tokens, double eps = 1e-5, int context = 0) {
    std::map<std::string, const std::vector<float>*> t;
    for (const auto& x : tensors) t[x.hf_name] = &x.values;
    auto W = [&](const std::string& name) -> const std::vector<float>& { return *t.at(name); };
    auto has = [&](const std::string& name) { return t.count(name) > 0; };
    const int T = static_cast<int>(tokens.size()), H = s.hidden, D = s.head_dim;
    const int q_size = s.heads * D, kv_size = s.kv_heads * D;
    // y[r] = sum_c w[r, c] x[c] (+ b[r])
    auto linear = [](const std::vector<float>& w, const std::vector<double>& x, int rows, const std::vector<float>* b) {
        const size_t cols = x.size();
        std::vector<double> y(rows);
        for (int r = 0; r < rows; ++r) {
            double acc = b ? (*b)[r] : 0.0;
            for (size_t c = 0; c < cols; ++c) acc += static_cast<double>(w[r * cols + c]) * x[c];
            y[r] = acc;
        }
        return y;
    };
    const bool gemma = s.gemma();
    auto rmsnorm = [&](std::vector<double>& x, size_t off, int n, const std::vector<float>& w) {
        double ss = 0;
        for (int i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int i = 0; i < n; ++i) x[off + i] = x[off + i] * inv * (gemma ? 1.0 + w[i] : w[i]);  // Gemma: (1 + w)
    };
    auto softcap = [](double v, double cap) { return cap > 0 ? cap * std::tanh(v / cap) : v; };
    const bool longrope = !s.long_factor.empty();
    const std::vector<float>& factors =
        (context > 0 ? context : s.context) > s.original_context ? s.long_factor : s.short_factor;
    const double mscale = longrope ? s.attention_factor : 1.0;
    // Gemma 3: windowed layers rotate with their own base, unscaled; global ones with a linear factor.
    auto rope = [&](std::vector<double>& v, int heads, int pos, bool local) {
        const double theta = local && s.rope_local_theta > 0 ? s.rope_local_theta : s.rope_theta;
        const double divisor = !local && s.rope_linear_factor > 0 ? s.rope_linear_factor : 1.0;
        for (int h = 0; h < heads; ++h)
            for (int i = 0; i < D / 2; ++i) {
                double f = pos / std::pow(theta, 2.0 * i / D) / divisor;
                if (longrope) f /= factors[i];
                double& a = v[h * D + i];
                double& b = v[h * D + i + D / 2];
                const double a0 = a, b0 = b, c = std::cos(f) * mscale, sn = std::sin(f) * mscale;
                a = a0 * c - b0 * sn;
                b = b0 * c + a0 * sn;
            }
    };
    std::vector<std::vector<double>> x(T, std::vector<double>(H));
    for (int p = 0; p < T; ++p)
        for (int i = 0; i < H; ++i)
            x[p][i] = W("model.embed_tokens.weight")[static_cast<size_t>(tokens[p]) * H + i] * (gemma ? std::sqrt(H) : 1.0);
    for (int l = 0; l < s.layers; ++l) {
        const int window = s.sliding(l) ? s.sliding_window : 0;
        const std::string pre = "model.layers." + std::to_string(l) + ".";
        auto bias = [&](const char* n) { return has(pre + n) ? &W(pre + n) : nullptr; };
        std::vector<std::vector<double>> K(T), V(T), Q(T);
        for (int p = 0; p < T; ++p) {
            std::vector<double> xn = x[p];
            rmsnorm(xn, 0, H, W(pre + "input_layernorm.weight"));
            if (has(pre + "self_attn.qkv_proj.weight")) {  // Phi-3: q, k, v stacked
                const std::vector<double> qkv = linear(W(pre + "self_attn.qkv_proj.weight"), xn, q_size + 2 * kv_size, nullptr);
                Q[p].assign(qkv.begin(), qkv.begin() + q_size);
                K[p].assign(qkv.begin() + q_size, qkv.begin() + q_size + kv_size);
                V[p].assign(qkv.begin() + q_size + kv_size, qkv.end());
            } else {
                Q[p] = linear(W(pre + "self_attn.q_proj.weight"), xn, q_size, bias("self_attn.q_proj.bias"));
                K[p] = linear(W(pre + "self_attn.k_proj.weight"), xn, kv_size, bias("self_attn.k_proj.bias"));
                V[p] = linear(W(pre + "self_attn.v_proj.weight"), xn, kv_size, bias("self_attn.v_proj.bias"));
            }
            if (has(pre + "self_attn.q_norm.weight")) {
                for (int h = 0; h < s.heads; ++h) rmsnorm(Q[p], h * D, D, W(pre + "self_attn.q_norm.weight"));
                for (int h = 0; h < s.kv_heads; ++h) rmsnorm(K[p], h * D, D, W(pre + "self_attn.k_norm.weight"));
            }
            rope(Q[p], s.heads, p, window > 0);
            rope(K[p], s.kv_heads, p, window > 0);
        }
        for (int p = 0; p < T; ++p) {
            std::vector<double> att(q_size);
            for (int h = 0; h < s.heads; ++h) {
                const int kvh = h / (s.heads / s.kv_heads);
                // Keys (p - window, p] on a windowed layer, 0..p otherwise. Gemma: query_pre_attn_scalar =
                // head_dim here (random_model.h), soft-capped scores.
                const int j0 = window > 0 ? std::max(0, p - window + 1) : 0;
                std::vector<double> score(p + 1, 0.0);
                double m = -1e300;
                for (int j = j0; j <= p; ++j) {
                    double d = 0;
                    for (int i = 0; i < D; ++i) d += Q[p][h * D + i] * K[j][kvh * D + i];
                    score[j] = softcap(d / std::sqrt(static_cast<double>(D)), s.attn_softcap);
                    m = std::max(m, score[j]);
                }
                double sum = 0;
                for (int j = j0; j <= p; ++j) sum += (score[j] = std::exp(score[j] - m));
                for (int j = j0; j <= p; ++j)
                    for (int i = 0; i < D; ++i) att[h * D + i] += score[j] / sum * V[j][kvh * D + i];
            }
            std::vector<double> o = linear(W(pre + "self_attn.o_proj.weight"), att, H, nullptr);
            if (gemma) rmsnorm(o, 0, H, W(pre + "post_attention_layernorm.weight"));  // Gemma's sandwich
            for (int i = 0; i < H; ++i) x[p][i] += o[i];
            std::vector<double> xn = x[p];
            rmsnorm(xn, 0, H, W(pre + (gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight")));
            std::vector<double> g, u;
            if (has(pre + "mlp.gate_up_proj.weight")) {  // Phi-3: gate rows first, then up
                const std::vector<double> gu = linear(W(pre + "mlp.gate_up_proj.weight"), xn, 2 * s.ffn, nullptr);
                g.assign(gu.begin(), gu.begin() + s.ffn);
                u.assign(gu.begin() + s.ffn, gu.end());
            } else {
                g = linear(W(pre + "mlp.gate_proj.weight"), xn, s.ffn, nullptr);
                u = linear(W(pre + "mlp.up_proj.weight"), xn, s.ffn, nullptr);
            }
            const double pi = 3.14159265358979323846;
            for (int i = 0; i < s.ffn; ++i)
                g[i] = gemma ? 0.5 * g[i] * (1 + std::tanh(std::sqrt(2 / pi) * (g[i] + 0.044715 * g[i] * g[i] * g[i]))) * u[i]
                             : g[i] / (1 + std::exp(-g[i])) * u[i];
            std::vector<double> d = linear(W(pre + "mlp.down_proj.weight"), g, H, nullptr);
            if (gemma) rmsnorm(d, 0, H, W(pre + "post_feedforward_layernorm.weight"));
            for (int i = 0; i < H; ++i) x[p][i] += d[i];
        }
    }
    std::vector<float> logits;
    for (int p = 0; p < T; ++p) {
        std::vector<double> xn = x[p];
        rmsnorm(xn, 0, H, W("model.norm.weight"));
        const std::string head = has("lm_head.weight") ? "lm_head.weight" : "model.embed_tokens.weight";  // tied
        for (double v : linear(W(head), xn, s.vocab, nullptr)) logits.push_back(static_cast<float>(softcap(v, s.final_softcap)));
    }
    return logits;
}

}  // namespace kvscope::test
