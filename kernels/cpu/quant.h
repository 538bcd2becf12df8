// Conversions between stored weight types and F32 rows: dequantize (every type, used by the matmul
// packing and the embedding) and quantize (every type; used to make test and dummy models: plain
// round-to-nearest quantizers, not ggml's scale searches). The layouts are dtype.h's.
// Compiled with -ffp-contract=off (kernels/CMakeLists.txt): every kernel set's copy and the shared one
// turn a block into bit-identical floats, FMA hardware or not (the embedding and the references rely on it).
#pragma once

#include "cpu/kernel_set.h"
#include "dtype.h"

#include <cstdint>
#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace KVSCOPE_CPU_NAMESPACE {

// dst[0..n) = row as F32. src points at the row start; n is a multiple of the type's block size.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Writes dtype_row_bytes(type, n) bytes to dst.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// Weight types whose blocks are 32 int8 values times one F16 scale once unpacked (Q8_0 as stored; Q4_0,
// Q5_0 and IQ4_NL: q - 8, q - 16 and the IQ4_NL level are int8): the matmul runs them through the int8
// dot products of matmul_q8.h, so their activations are quantized (as llama.cpp's dots do).
constexpr bool unpacks_to_q8_0(DType t) {
    return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q5_0 || t == DType::IQ4_NL;
}
// The K types run int8 dot products too, straight from their blocks (matmul_q8.h's matmul_q8_k): their
// values are small integers (IQ4_XS: its 16 int8 levels) times per-sub-block integer scales (minus a min),
// and the sub-blocks line up with the activations' blocks of 32. Dequantizing them to F32 and multiplying
// in F32 left single-row decode compute-bound at a fraction of the memory bandwidth (Q2_K and Q3_K files
// decoded at 40% of llama.cpp's speed that way).
constexpr bool matmul_runs_k_int8(DType t) {
    return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ||
           t == DType::IQ4_XS;
}
// Q4_1 and Q5_1: d * q + m per value, q unsigned (4 or 5 bits). Their q are int8 values times d as above,
// and the min adds m * d_x * sum(q_x) per activation block, so they run the same int8 dots with the mins
// beside (as llama.cpp's Q8_1 activations carry d_x * sum(q_x) for them). A decode of a Q4_1 file ran at
// 80 t/s on F32 dots, llama.cpp's at 184 (bench-135m, 2 threads).
constexpr bool has_block_mins(DType t) { return t == DType::Q4_1 || t == DType::Q5_1; }
constexpr bool matmul_quantizes_activations(DType t) {
    return unpacks_to_q8_0(t) || has_block_mins(t) || matmul_runs_k_int8(t);
}

// dst[0 .. n / 32) = the blocks of a row of an unpacks_to_q8_0 type as Q8_0 blocks with the same values (exactly
// what dequantize_row gives, as d * q). n a multiple of 32.
void unpack_row_q8_0(DType type, const void* src, BlockQ8_0* dst, int64_t n);


// An activation row quantized for the int8 dot products of Q8_0 weights (as llama.cpp does): per 32
// values a scale d = max|x| / 127 rounded to F16 (llama.cpp's Q8_0 block holds it so; kept here as F32) and
// q = x * (127 / max|x|) rounded to nearest even, in [-127, 127].
struct BlockQ8Act {
    float d;
    int8_t qs[32];
};
// dst[0 .. n / 32) from src[0 .. n); n a multiple of 32.
void quantize_activations_q8(const float* src, BlockQ8Act* dst, int64_t n);
// sum(q) of one block: Q4_0 / Q5_0's offsets and Q4_1 / Q5_1's mins multiply it.
inline int32_t block_sum(const BlockQ8Act& q) {
    int32_t sum = 0;
    for (int8_t v : q.qs) sum += v;
    return sum;
}
// What Q4_1 / Q5_1's mins multiply for the block q that quantize_activations_q8 made from x[0 .. 32): d * sum(q)
// as llama.cpp's Q8_1 block carries it, from the scale before its F16 rounding and itself rounded to F16
// (with d_x * sum(q) unrounded, the Q4_1 / Q5_1 test file sat 3e-3 from llama.cpp's log-probabilities).
float activation_block_sum_q8_1(const float* x, const BlockQ8Act& q);
// For the paths that multiply Q4_1 / Q5_1 in F32 by dequantized_activations (whose mins meet d_x * sum(q) as
// is): c[b] = activation_block_sum_q8_1 - d_x * sum(q) per 32-block of the activation row x[0 .. K), and the
// min m of 32-block b of one weight row. Adding sum_b m_b * c[b] to such a product gives the int8 path's.
void q8_1_sum_rounding(const float* x, int64_t K, double* c);
float block_min(DType t, const void* row, int64_t b);

// The activations of the K types' int8 dots (matmul_runs_k_int8), as llama.cpp quantizes them for those
// weights (its Q8_K): one scale per 256 values, d = m / -127 for the value m of largest magnitude, q = x / d
// rounded to nearest even; written as 8 BlockQ8Act per 256 values that share d. Rounding the activations
// as llama.cpp does keeps greedy outputs on the same side of its near-ties. n a multiple of 256.
void quantize_activations_q8_k(const float* src, BlockQ8Act* dst, int64_t n);

// The activation quantizer the int8 path uses for weights of type t (a matmul_quantizes_activations type).
inline void quantize_activations_for(DType t, const float* src, BlockQ8Act* dst, int64_t n) {
    if (matmul_runs_k_int8(t))
        quantize_activations_q8_k(src, dst, n);
    else
        quantize_activations_q8(src, dst, n);
}
// dst[0 .. n) = src[0 .. n) as quantize_activations_for(t) rounds it, back in F32 (d * q): what the int8
// path of t multiplies, for the references and the paths that multiply it in F32. n a multiple of 256 for
// the K types, of 32 otherwise.
void dequantized_activations(DType t, const float* src, float* dst, int64_t n);

// F16 and BF16 weights multiply activations rounded to the weight's type, as the CUDA backend (cuBLAS
// takes both operands in one type) and llama.cpp do: the F16 twins of test_llamacpp_xcheck came 2.4x
// nearer llama.cpp (2.47e-3 to 1.04e-3 in top-5 log-probabilities), enough that no greedy token flips
// where llama.cpp's top-2 gap exceeds 1e-3. The products stay exact in F32; only the inputs round.
constexpr bool matmul_rounds_activations(DType t) { return t == DType::F16 || t == DType::BF16; }
// dst[0 .. n) = src rounded to t (a matmul_rounds_activations type) and back to F32; dst may be src.
inline void round_activations_for(DType t, const float* src, float* dst, int64_t n) {
    if (t == DType::F16) {
        int64_t i = 0;
#if defined(__F16C__)
        // The hardware's round-to-nearest-even gives f32_to_f16's bits. The scalar loop alone cost a fifth of
        // an F16 pp512 (kvscope-model-bench, bench-135m-f16: 482 -> 603 t/s with this, alternating runs).
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
#endif
        for (; i < n; ++i) dst[i] = f16_to_f32(f32_to_f16(src[i]));
        return;
    }
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(f32_to_bf16(src[i]));
}

}  // namespace KVSCOPE_CPU_NAMESPACE
