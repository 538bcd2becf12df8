// out[n, N] = x[n, K] @ w[N, K]^T for Q8_0 weights, with int8 dot products (AVX512-VNNI vpdpbusd where
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

//                                                x [n, w.cols]; out [n, w.rows]; xq: scratch
void matmul_q8_0(ThreadPool& pool, std::vector<BlockQ8Act>& xq, const float* x, int n, const WeightView& w,
                 float* out);

}  // namespace KVSCOPE_CPU_NAMESPACE
