// Slow, obviously correct reference versions of every Backend op, against which the fast CPU kernels
// (and later the CUDA ones) are tested: one thread, no SIMD, double accumulation, written to be read
// (llm.c's dev/cuda idea). Attention reads K/V from plain dense per-sequence arrays, not the paged cache,
// so it shares no addressing code with the kernels it checks. Never used on the inference path.
#pragma once

#include "backend.h"

#include <cstdint>

namespace kvscope::cpu {

// out = x @ w^T (+ bias). Each weight row is dequantized with dequantize_row, then dotted in double, so a
// fast kernel on the same stored weights differs from this only in its arithmetic. For the int8-path types
// (matmul_quantizes_activations: Q8_0, Q4_0, Q5_0, IQ4_NL; Q4_K, Q5_K, Q6_K) the activations are first
// quantized as the int8 kernels do (quantize_activations_for); for F16 and BF16 they are rounded to that
// type (round_activations_for). Q4_1 and Q5_1 take the Q8_0 activations, and their mins meet each block's
// d_x * sum(q_x) as the CPU's int8 path has it: rounded to F16 from the unrounded scale, as llama.cpp's Q8_1
// (activation_block_sum_q8_1), or with q8_1_sums false as is (the CUDA backend's F32 sums).
//                                         x [n, w.cols]; out [n, w.rows]; bias [w.rows] or null
void matmul_ref(const float* x, int n, const WeightView& w, const float* bias, float* out, bool q8_1_sums = true);

// out = x / sqrt(mean(x^2) + eps) * weight, per row.        x, out [n, dim]; weight [dim]
void rms_norm_ref(const float* x, const float* weight, int n, int dim, float eps, float* out);

// In-place rotary embedding of the first rotary_dim dims of every head (the rest pass through).
// neox: pairs (i, i + rotary_dim/2); interleaved: pairs (2i, 2i+1). The angle position * inv_freq[i] is
// rounded to float, as HF computes it (float32 inv_freq @ positions); cos, sin and the rotation are double.
//                                         q [n, num_heads, head_dim]; k [n, num_kv_heads, head_dim]
void rope_ref(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads,
              const RopeParams& p);

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up.    gate, up, out [n]
void silu_mul_ref(const float* gate, const float* up, int64_t n, float* out);

// out = gelu_tanh(gate) * up = gate / 2 * (1 + tanh(sqrt(2 / pi) * (gate + 0.044715 gate^3))) * up, in
// double.                                                   gate, up, out [n]
void gelu_tanh_mul_ref(const float* gate, const float* up, int64_t n, float* out);

// x = cap * tanh(x / cap), in double.                       x [n]
void softcap_ref(float* x, int64_t n, float cap);

// x += y.                                                   x, y [n]
void add_ref(float* x, const float* y, int64_t n);

// out[t, :] = table[ids[t], :] as F32.                      ids [n]; out [n, table.cols]
void embedding_ref(const WeightView& table, const int32_t* ids, int n, float* out);

// out[i] = index of the largest value of row i, the lowest such index on ties.   logits [n, vocab]; out [n]
void argmax_ref(const float* logits, int n, int vocab, int32_t* out);

// out[i, :] = x[rows[i], :].                                x [*, dim]; rows [n]; out [n, dim]
void gather_rows_ref(const float* x, const int32_t* rows, int n, int dim, float* out);

// Causal softmax attention of one sequence over dense K/V, with grouped-query heads: query head h reads
// kv head h / (num_heads / num_kv_heads). The sequence holds seq_len tokens; its num_queries query tokens
// are the last ones, so query i sits at position seq_len - num_queries + i and attends to 0..that position,
// or with params.sliding_window = W > 0 to (position - W)..position exclusive of the first; scores are
// scaled, then soft-capped when params.logit_softcap > 0.
//   q, out [num_queries, num_heads, head_dim]; k, v [seq_len, num_kv_heads, head_dim]
void attention_ref(const float* q, int num_queries, const float* k, const float* v, int seq_len, int num_heads,
                   int num_kv_heads, int head_dim, const AttentionParams& params, float* out);

// Test setup only: writes tokens [first, first + count) of a sequence's dense K/V into the paged cache at
// the slots its block table gives (position p -> block block_table[p / block_size], offset p % block_size).
// Computes every address from KvCacheLayout::offset, independently of the backends' write_kv, and rounds
// each value to layout.kv_dtype (F32, F16 or BF16) with dtype.h's scalar conversions.
//   k, v [>= first + count, num_kv_heads, head_dim]; block_table [>= ceil((first + count) / block_size)]
void scatter_kv_ref(const float* k, const float* v, int first, int count, const int32_t* block_table,
                    const KvCacheLayout& layout, void* kv_cache, int layer);

}  // namespace kvscope::cpu
