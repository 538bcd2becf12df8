// A second, deliberately plain implementation of the decoder forward pass (llama, qwen2, qwen3, phi3
// with LongRoPE) over the
// HF-layout tensors of random_model.h: one sequence, every position, plain loops in double, no paging,
// no batching, no backend. The engine's kernels are checked against it, so it shares no code with them.
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
    auto rmsnorm = [&](std::vector<double>& x, size_t off, int n, const std::vector<float>& w) {
        double ss = 0;
        for (int i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
        const double inv = 1.0 / std::sqrt(ss / n + eps);
        for (int i = 0; i < n; ++i) x[off + i] = x[off + i] * inv * w[i];
    };
    const bool longrope = !s.long_factor.empty();
    const std::vector<float>& factors =
        (context > 0 ? context : s.context) > s.original_context ? s.long_factor : s.short_factor;
    const double mscale = longrope ? s.attention_factor : 1.0;
    auto rope = [&](std::vector<double>& v, int heads, int pos) {
        for (int h = 0; h < heads; ++h)
            for (int i = 0; i < D / 2; ++i) {
                double f = pos / std::pow(static_cast<double>(s.rope_theta), 2.0 * i / D);
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
        for (int i = 0; i < H; ++i) x[p][i] = W("model.embed_tokens.weight")[static_cast<size_t>(tokens[p]) * H + i];
    for (int l = 0; l < s.layers; ++l) {
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
            rope(Q[p], s.heads, p);
            rope(K[p], s.kv_heads, p);
        }
        for (int p = 0; p < T; ++p) {
            std::vector<double> att(q_size);
            for (int h = 0; h < s.heads; ++h) {
                const int kvh = h / (s.heads / s.kv_heads);
                std::vector<double> score(p + 1);
                double m = -1e300;
                for (int j = 0; j <= p; ++j) {
                    double d = 0;
                    for (int i = 0; i < D; ++i) d += Q[p][h * D + i] * K[j][kvh * D + i];
                    score[j] = d / std::sqrt(static_cast<double>(D));
                    m = std::max(m, score[j]);
                }
                double sum = 0;
                for (double& v : score) sum += (v = std::exp(v - m));
                for (int j = 0; j <= p; ++j)
                    for (int i = 0; i < D; ++i) att[h * D + i] += score[j] / sum * V[j][kvh * D + i];
            }
            const std::vector<double> o = linear(W(pre + "self_attn.o_proj.weight"), att, H, nullptr);
            for (int i = 0; i < H; ++i) x[p][i] += o[i];
            std::vector<double> xn = x[p];
            rmsnorm(xn, 0, H, W(pre + "post_attention_layernorm.weight"));
            std::vector<double> g, u;
            if (has(pre + "mlp.gate_up_proj.weight")) {  // Phi-3: gate rows first, then up
                const std::vector<double> gu = linear(W(pre + "mlp.gate_up_proj.weight"), xn, 2 * s.ffn, nullptr);
                g.assign(gu.begin(), gu.begin() + s.ffn);
                u.assign(gu.begin() + s.ffn, gu.end());
            } else {
                g = linear(W(pre + "mlp.gate_proj.weight"), xn, s.ffn, nullptr);
                u = linear(W(pre + "mlp.up_proj.weight"), xn, s.ffn, nullptr);
            }
            for (int i = 0; i < s.ffn; ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
            const std::vector<double> d = linear(W(pre + "mlp.down_proj.weight"), g, H, nullptr);
            for (int i = 0; i < H; ++i) x[p][i] += d[i];
        }
    }
    std::vector<float> logits;
    for (int p = 0; p < T; ++p) {
        std::vector<double> xn = x[p];
        rmsnorm(xn, 0, H, W("model.norm.weight"));
        for (double v : linear(W("lm_head.weight"), xn, s.vocab, nullptr)) logits.push_back(static_cast<float>(v));
    }
    return logits;
}

}  // namespace kvscope::test
