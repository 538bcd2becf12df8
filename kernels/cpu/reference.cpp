#include "cpu/reference.h"

#include "cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvscope::cpu {

void matmul_ref(const float* x, int n, const WeightView& w, const float* bias, float* out, bool q8_1_sums) {
    const int64_t N = w.rows, K = w.cols;
    const float* const x_in = x;
    const size_t row_bytes = dtype_row_bytes(w.dtype, K);
    std::vector<float> row(K);
    std::vector<float> xq;
    if (matmul_quantizes_activations(w.dtype)) {
        // The int8 path multiplies quantized activations: the reference uses the same activations,
        // dequantized, so it checks the kernel's arithmetic (activation quantization is checked apart).
        xq.resize(static_cast<size_t>(n) * K);
        for (int t = 0; t < n; ++t)
            dequantized_activations(w.dtype, x + static_cast<size_t>(t) * K, xq.data() + static_cast<size_t>(t) * K, K);
        x = xq.data();
    } else if (matmul_rounds_activations(w.dtype)) {
        xq.resize(static_cast<size_t>(n) * K);
        round_activations_for(w.dtype, x, xq.data(), static_cast<int64_t>(xq.size()));
        x = xq.data();
    }
    std::vector<double> min_rounding;  // Q4_1 / Q5_1: what llama.cpp's F16 Q8_1 sums change, per activation block
    if (has_block_mins(w.dtype) && q8_1_sums) {
        min_rounding.resize(static_cast<size_t>(n) * (K / 32));
        for (int t = 0; t < n; ++t) q8_1_sum_rounding(x_in + t * K, K, min_rounding.data() + t * (K / 32));
    }
    for (int64_t r = 0; r < N; ++r) {
        const uint8_t* stored = static_cast<const uint8_t*>(w.data) + r * row_bytes;
        dequantize_row(w.dtype, stored, row.data(), K);
        for (int t = 0; t < n; ++t) {
            const float* xt = x + t * K;
            double sum = bias ? bias[r] : 0.0;
            for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(xt[k]) * row[k];
            for (int64_t b = 0; !min_rounding.empty() && b < K / 32; ++b)
                sum += block_min(w.dtype, stored, b) * min_rounding[t * (K / 32) + b];
            out[t * N + r] = static_cast<float>(sum);
        }
    }
}

void rms_norm_ref(const float* x, const float* weight, int n, int dim, float eps, float* out) {
    for (int t = 0; t < n; ++t) {
        const float* xt = x + static_cast<int64_t>(t) * dim;
        double sum_sq = 0;
        for (int i = 0; i < dim; ++i) sum_sq += static_cast<double>(xt[i]) * xt[i];
        const double inv_rms = 1.0 / std::sqrt(sum_sq / dim + eps);
        for (int i = 0; i < dim; ++i)
            out[static_cast<int64_t>(t) * dim + i] = static_cast<float>(xt[i] * inv_rms * weight[i]);
    }
}

namespace {
// Rotates the pairs of one head by the angles of one position.
void rotate_head(float* head, int32_t position, const RopeParams& p) {
    const int half = p.rotary_dim / 2;
    for (int i = 0; i < half; ++i) {
        const int a = p.neox ? i : 2 * i;
        const int b = p.neox ? i + half : 2 * i + 1;
        const float angle = static_cast<float>(position) * p.inv_freq[i];
        const double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
        const double x0 = head[a], x1 = head[b];
        head[a] = static_cast<float>(x0 * c - x1 * s);
        head[b] = static_cast<float>(x0 * s + x1 * c);
    }
}
}  // namespace

void rope_ref(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads,
              const RopeParams& p) {
    const int64_t D = p.head_dim;
    for (int t = 0; t < n; ++t) {
        for (int h = 0; h < num_heads; ++h) rotate_head(q + (static_cast<int64_t>(t) * num_heads + h) * D, positions[t], p);
        for (int h = 0; h < num_kv_heads; ++h)
            rotate_head(k + (static_cast<int64_t>(t) * num_kv_heads + h) * D, positions[t], p);
    }
}

void silu_mul_ref(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) {
        const double g = gate[i];
        out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
    }
}

void gelu_tanh_mul_ref(const float* gate, const float* up, int64_t n, float* out) {
    const double c = std::sqrt(2.0 / 3.14159265358979323846);
    for (int64_t i = 0; i < n; ++i) {
        const double x = gate[i];
        out[i] = static_cast<float>(0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x))) * up[i]);
    }
}

void softcap_ref(float* x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(cap * std::tanh(static_cast<double>(x[i]) / cap));
}

void add_ref(float* x, const float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] + y[i];
}

void embedding_ref(const WeightView& table, const int32_t* ids, int n, float* out) {
    const size_t row_bytes = dtype_row_bytes(table.dtype, table.cols);
    for (int t = 0; t < n; ++t)
        dequantize_row(table.dtype, static_cast<const uint8_t*>(table.data) + static_cast<size_t>(ids[t]) * row_bytes,
                       out + static_cast<size_t>(t) * table.cols, table.cols);
}

void argmax_ref(const float* logits, int n, int vocab, int32_t* out) {
    for (int r = 0; r < n; ++r) {
        const float* row = logits + static_cast<size_t>(r) * vocab;
        int32_t best = 0;
        for (int i = 1; i < vocab; ++i)
            if (row[i] > row[best]) best = i;  // strictly greater: the first of equal maxima wins
        out[r] = best;
    }
}

void gather_rows_ref(const float* x, const int32_t* rows, int n, int dim, float* out) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < dim; ++j) out[static_cast<size_t>(i) * dim + j] = x[static_cast<size_t>(rows[i]) * dim + j];
}

void attention_ref(const float* q, int num_queries, const float* k, const float* v, int seq_len, int num_heads,
                   int num_kv_heads, int head_dim, const AttentionParams& params, float* out) {
    const int group = num_heads / num_kv_heads;
    const double cap = params.logit_softcap;
    std::vector<double> scores(seq_len);
    for (int i = 0; i < num_queries; ++i) {
        const int position = seq_len - num_queries + i;
        // The keys this query sees: all of 0..position, or the last sliding_window of them.
        const int first = params.sliding_window > 0 ? std::max(0, position - params.sliding_window + 1) : 0;
        for (int h = 0; h < num_heads; ++h) {
            const int kv_head = h / group;
            const float* qh = q + (static_cast<size_t>(i) * num_heads + h) * head_dim;
            // scores[j] = scale * q . k_j over the visible positions, then a max-subtracted softmax.
            double max_score = -INFINITY;
            for (int j = first; j <= position; ++j) {
                const float* kj = k + (static_cast<size_t>(j) * num_kv_heads + kv_head) * head_dim;
                double dot = 0;
                for (int d = 0; d < head_dim; ++d) dot += static_cast<double>(qh[d]) * kj[d];
                scores[j] = dot * params.scale;
                if (cap > 0) scores[j] = cap * std::tanh(scores[j] / cap);
                max_score = std::max(max_score, scores[j]);
            }
            double sum = 0;
            for (int j = first; j <= position; ++j) {
                scores[j] = std::exp(scores[j] - max_score);
                sum += scores[j];
            }
            float* oh = out + (static_cast<size_t>(i) * num_heads + h) * head_dim;
            for (int d = 0; d < head_dim; ++d) {
                double acc = 0;
                for (int j = first; j <= position; ++j)
                    acc += scores[j] * v[(static_cast<size_t>(j) * num_kv_heads + kv_head) * head_dim + d];
                oh[d] = static_cast<float>(acc / sum);
            }
        }
    }
}

void scatter_kv_ref(const float* k, const float* v, int first, int count, const int32_t* block_table,
                    const KvCacheLayout& layout, void* kv_cache, int layer) {
    const int H = layout.num_kv_heads, D = layout.head_dim, B = layout.block_size;
    // Element e of the cache holds x, rounded to the cache's type.
    auto put = [&](size_t e, float x) {
        switch (layout.kv_dtype) {
        case DType::F32: static_cast<float*>(kv_cache)[e] = x; break;
        case DType::F16: static_cast<uint16_t*>(kv_cache)[e] = f32_to_f16(x); break;
        case DType::BF16: static_cast<uint16_t*>(kv_cache)[e] = f32_to_bf16(x); break;
        default: throw std::invalid_argument("scatter_kv_ref: no KV cache of " + std::string(dtype_name(layout.kv_dtype)));
        }
    };
    for (int p = first; p < first + count; ++p) {
        const int block = block_table[p / B], in_block = p % B;
        for (int h = 0; h < H; ++h) {
            const float* kp = k + (static_cast<size_t>(p) * H + h) * D;
            const float* vp = v + (static_cast<size_t>(p) * H + h) * D;
            const size_t k_slot = layout.offset(layer, 0, block, h, in_block);
            const size_t v_slot = layout.offset(layer, 1, block, h, in_block);
            for (int d = 0; d < D; ++d) {
                put(k_slot + d, kp[d]);
                put(v_slot + d, vp[d]);
            }
        }
    }
}

}  // namespace kvscope::cpu
