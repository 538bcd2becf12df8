// out[n, N] = x[n, K] @ w[N, K]^T for Q8_0 weights (and Q4_0, Q5_0, IQ4_NL ones, whose blocks hold the same
// int8 values once unpacked: single-row decode reads them in place (q8_values.h, AVX2 sets), prefill unpacks
// a tile's rows at a time into Q8_0 blocks: quant.h's unpack_row_q8_0; and Q4_1, Q5_1 where kQ8TileMins
// says so), with int8 dot products (AVX512-VNNI vpdpbusd where
// the set has it, else AVX2's or SSSE3's pmaddubsw): each activation row is quantized to Q8 blocks
// (quantize_activations_q8) and every 32-value block contributes (sum of q_x * q_w) * d_x * d_w, as
// llama.cpp's Q8_0 x Q8_0 dot does. Several times the multiply-adds per instruction of the F32 path, so
// single-stream decode is bound by memory again. Batch invariant like matmul(): an output's arithmetic
// depends only on its own two rows.
#pragma once

#include "backend.h"
#include "cpu/kernel_set.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"

#include <vector>

KVSCOPE_CPU_KERNEL_SET_ONLY("cpu/matmul_q8.h");

namespace KVSCOPE_CPU_NAMESPACE {

// The set's int8 tile: AVX512-VNNI's vpdpbusd where the set has it, else AVX2's or SSSE3's pmaddubsw.
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#define KVSCOPE_Q8_TILE_VNNI 1
#endif
// Whether matmul_q8_0 takes row-major Q4_1 and Q5_1 (quant.h has_block_mins): the AVX2 tile reads their blocks
// in place and adds the mins; sets with another tile multiply them in F32 by the activations the int8 path
// would quantize (matmul.cpp), the same arithmetic up to F32 summation order. Interleaved by 8 (matmul_x8.h,
// every set with AVX2, the AVX-512 one included) they always take matmul_q8_0.
#if defined(__AVX2__) && !defined(KVSCOPE_Q8_TILE_VNNI)
inline constexpr bool kQ8TileMins = true;
#else
inline constexpr bool kQ8TileMins = false;
#endif

// x [n, w.cols]; out [n, w.rows]; xq, x_sums (Q4_1 / Q5_1: d_x * sum(q_x) per activation block, as
// quant.h activation_block_sum_q8_1 rounds it), x_isums (Q4_0 / Q5_0 interleaved by 8: sum(q_x) per block),
// unpacked (one per pool thread): scratch
void matmul_q8_0(ThreadPool& pool, std::vector<BlockQ8Act>& xq, std::vector<float>& x_sums, std::vector<int32_t>& x_isums,
                 std::vector<std::vector<BlockQ8_0>>& unpacked, const float* x, int n, const WeightView& w, float* out);

// Per 256 activation values (8 blocks of 32, one shared d_x), what the K types' dots need beside the
// BlockQ8Acts: per pair of values (one int16 lane of pmaddubsw's products), 32 * (q_x[2i] + q_x[2i + 1])
// (Q6_K stores q + 32 unsigned: its products minus these are those of q; Q3_K's offset of 4 takes an
// eighth), sum(q_x) per 16 values (Q2_K's mins; filled for Q2_K only) and per block (Q4_K / Q5_K mins).
struct alignas(32) ActSumsQ8 {
    int16_t offset32_pairs[8][16];
    int16_t isum16[16];
    int16_t isum[8];
};
// The same for the K types' weights (quant.h matmul_runs_k_int8: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS),
// read straight from their blocks, with activations quantized as llama.cpp does for them
// (quantize_activations_q8_k: one scale per 256): per block of 256 the exact integer sum over its
// sub-blocks of (int32 dot of the stored values with x's int8 values) times the sub-block's integer scale,
// then times d_w * d_x in F32; Q4_K / Q5_K subtract dmin * d_x * sum of m times sum(q_x) per 32 values,
// Q2_K the same per 16; Q6_K and Q3_K take their offsets (32, 4) inside the dots. Batch invariant as
// matmul_q8_0.
// A K-type block of 256 weights decoded (prefill decodes a tile's rows once for every x tile): per group
// of 32 the stored values as bytes (unsigned; IQ4_XS's signed levels) and the integer scale of each int16
// lane of its products (pairs of values), the integer mins per group (Q4_K / Q5_K) or per 16 values
// (Q2_K), and the block's F32 d and dmin.
struct alignas(32) DecodedKBlock {
    uint8_t q[8][32];
    int16_t scale16[8][16];
    int16_t imin16[16];
    int16_t imin[8];
    float d, dmin;
};

// x [n, w.cols]; out [n, w.rows]; xq, sums, decoded (one per pool thread): scratch
void matmul_q8_k(ThreadPool& pool, std::vector<BlockQ8Act>& xq, std::vector<ActSumsQ8>& sums,
                 std::vector<std::vector<DecodedKBlock>>& decoded, const float* x, int n, const WeightView& w, float* out);

}  // namespace KVSCOPE_CPU_NAMESPACE
