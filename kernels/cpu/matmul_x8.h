// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and Q8_0 weights repacked once at load for
// the int8 dots of AVX2 sets: 8 rows interleaved (llama.cpp's CPU repack does the same for Q4_K and Q4_0 on AVX2,
// block_q4_Kx8 and block_q4_0x8), so that one vector holds 4 values of each of 8 rows and each output row is
// one int32 lane.
//
// The row-major kernel (matmul_q8.cpp) spends per group of 32 values a byte shuffle to broadcast the
// group's scale and an int32 multiply-add per 4 values, and per block a horizontal layout of 8 lanes that
// all end up in one output. Here a group's chunks of 4 values are summed in int16 (pmaddubsw pairs of at
// most 2 * 15 * 127 for Q4_K, 8 of them below 2^15; 2 * 31 * 127 for Q5_K, 4 of them: exact), then scaled
// once by the 8 rows' scales (one pmaddwd), and the per-block work (scales, mins, d) is shared by 8 rows:
// for Q4_K about 35 vector operations per 256 weights instead of 60, which is what bound decode
// (compute-bound at 65% of the read bandwidth).
//
// Prefill decodes each block once for 4 activation rows (the kernels take R rows beside G weight groups;
// decode is G = 2 streams of one row), and the leftover rows of a chunk run one at a time. The decoding
// (nibble splits, fifth bits, levels) is then shared, the products and sums are not: an activation row
// costs 0.65-0.8x what it did alone (cycles per 8 weight rows x 256 in L1: Q4_K 98.6 -> 72, Q6_K 150 ->
// 100, Q8_0 140 -> 110).
//
// On AVX-512 VNNI sets, single-row calls of Q8_0 and Q4_K take vpdpbusd on 64 bytes (two chunks of the 8 rows)
// where the AVX2 kernel spends pmaddubsw, the sign trick or a nibble split, and pmaddwd on 32. The int32 sums
// are the same exact integers and the floats are added by the same steps, so they give the AVX2 kernels'
// results bit for bit. One Zen 5 thread, weights in L2 / L3: Q8_0 55-62 -> 68-80 GB/s, Q4_K 45-48 -> 58-62.
// Streamed from memory it alone changed nothing measurable there: per core, Q4_K computes faster than one
// core reads (about 41 GB/s); what bound the stream on that CPU was how many streams a thread read
// (matmul_x8.cpp, decode_groups).
//
// Batch invariance: every output is the same steps whatever n is and whichever rows share a call (their
// integers are exact, their floats added in the same order): per block, the exact int32 sum of its 8
// groups' (scale * dot) converted to F32 (exact below 2^24, which takes blocks of near-extreme values to
// pass), times d_w * d_x, accumulated by FMA in block order; then the mins' exact int32 sum, times dmin_w *
// d_x, subtracted the same way.
#pragma once

#include "backend.h"
#include "cpu/kernel_set.h"
#include "cpu/matmul_q8.h"
#include "cpu/thread_pool.h"

#include <cstddef>

KVSCOPE_CPU_KERNEL_SET_ONLY("cpu/matmul_x8.h");

namespace KVSCOPE_CPU_NAMESPACE {

// Whether this set repacks w (row-major Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL or
// Q8_0 with a multiple of 8 rows; AVX2 sets only).
bool x8_packable(const WeightView& w);

// Packs w (x8_packable) into dst (dtype_row_bytes(w.dtype, cols) * rows bytes: the same size) and
// returns the view of it (WeightLayout::rows_x8).
WeightView pack_x8(ThreadPool& pool, const WeightView& w, void* dst);

// out[n, N] = x @ w^T for w packed by pack_x8 (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS), x quantized by
// quantize_activations_q8_k into xq [n, K / 32] with its sums xs [n, K / 256] (matmul_q8_k does both; for
// Q6_K, Q3_K and Q2_K isum16 too: their offsets of 32 and 4, Q2_K's mins). Q6_K's blocks are laid out in the
// order the kernel reads them, three of each four values whole: in a first layout (ql and qh as stored, read
// group by group) decode streamed 2048 x 2048 at 25 GB/s on 2 threads, in this one 37-38 (the row-major
// kernel 32).
// Q3_K's likewise, its scales first: with them after the values (read first, then the values from the
// block's start) it streamed at 15-16 GB/s, below the row-major kernel's 17-18; scales first, 27-28.
void matmul_x8_k(ThreadPool& pool, const BlockQ8Act* xq, const ActSumsQ8* xs, int n, const WeightView& w, float* out);

// The same for the types of 32-value blocks packed here (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q8_0): x quantized by
// quantize_activations_q8 into xq [n, K / 32], x_isums [n, K / 32] the sum of each activation block's q_x
// (Q4_0 and Q5_0's offsets), x_sums [n, K / 32] d_x times it (Q4_1 and Q5_1's mins; matmul_q8_0 makes them). Per block the exact int32 sum of value * q_x per row
// (Q4_0: the nibbles' products in int16, 8 pmaddubsw pairs of at most 2 * 15 * 127, minus 8 * sum(q_x); Q5_0
// the same with the fifth bits ored in, two int16 sums of 4, minus 16 * sum(q_x); IQ4_NL: its signed levels by
// pmaddubsw's sign trick; Q8_0: its stored values the same way), times d_w * d_x, accumulated by FMA in block
// order. Q4_0 takes about 45 vector operations per 256 weights where the row-major decode tile spent 110 (its
// decode was compute-bound at 23 GB/s on 2 threads). One thread in L2, GB/s, row-major -> interleaved: Q8_0
// 22 -> 39 (one cvt, multiply and FMA per 8 rows and block instead of per row), Q5_0 9.6 -> 27 (its fifth
// bits stored transposed, so a shift and a mask place each chunk's).
void matmul_x8_b32(ThreadPool& pool, const BlockQ8Act* xq, const int32_t* x_isums, const float* x_sums, int n,
                   const WeightView& w, float* out);

}  // namespace KVSCOPE_CPU_NAMESPACE
