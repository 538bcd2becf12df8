// out[n, N] = x[n, K] @ w[N, K]^T for Q8_0 weights (and Q4_0, Q5_0, IQ4_NL ones, whose rows are unpacked a
// tile at a time into Q8_0 blocks of the same values: quant.h's unpack_row_q8_0), with int8 dot products (AVX512-VNNI vpdpbusd where
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

// x [n, w.cols]; out [n, w.rows]; xq, unpacked (one per pool thread): scratch
void matmul_q8_0(ThreadPool& pool, std::vector<BlockQ8Act>& xq, std::vector<std::vector<BlockQ8_0>>& unpacked,
                 const float* x, int n, const WeightView& w, float* out);

}  // namespace KVSCOPE_CPU_NAMESPACE
