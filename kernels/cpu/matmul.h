// out[n, N] = x[n, K] @ w[N, K]^T (+ bias), F32 activations, weights in any supported type.
// Two paths: for a few rows (single-stream decode) a fused dequantize-and-dot over each weight row,
// bound by memory bandwidth; for more rows a packed GEMM (weights converted to F32 panels of 32 rows,
// a 12 x 32 register tile), bound by FMA throughput. Parallel over weight rows.
#pragma once

#include "backend.h"
#include "cpu/thread_pool.h"

#include <vector>

namespace kvscope::cpu {

struct MatmulScratch {
    std::vector<std::vector<float>> per_thread;  // packed panels / dequantized rows
};

void matmul(ThreadPool& pool, MatmulScratch& scratch, const float* x, int n, const WeightView& w,
            const float* bias, float* out);

// Row counts up to this use the fused dot path.
constexpr int kMatmulDotMaxRows = 4;

}  // namespace kvscope::cpu
