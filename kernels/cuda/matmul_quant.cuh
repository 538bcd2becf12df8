// Matmul against block-quantized weights (every ggml type of dtype.h): out[n, N] = x[n, K] @ w[N, K]^T
// (+ bias), the weights decoded on the fly (cuda/dequantize.cuh, the CPU's floats) with F32 accumulation.
// One kernel for every row count, decode and prefill alike: a warp owns one weight row and up to 8 x
// rows, its lanes take k = lane, lane + 32, ... in that order and a fixed butterfly sums them, so a row's
// result is the same bits whatever else is in the batch (batch invariance; a dequantize + cuBLAS path for
// prefill would round differently from the decode kernel, and cuBLAS's choice of kernel follows n).
// For Q8_0, Q4_0, Q5_0 and IQ4_NL the activations are first quantized per 32 values exactly as the CPU's
// int8 path quantizes them (cpu/quant.h quantize_activations_q8; cpu/reference.cpp's matmul_ref does the
// same), so both backends compute the same product.
#pragma once

#include "backend.h"

#include <cuda_runtime.h>

namespace kvscope::cuda {

// Bytes of scratch matmul_quant needs: the quantized-and-decoded activations [n, K] F32 for the types
// whose activations are quantized, else 0.
size_t matmul_quant_scratch_bytes(int n, const WeightView& w);

// x [n, w.cols] F32; w [w.rows, w.cols] in a block-quantized w.dtype (row-major, whole blocks per row);
// bias [w.rows] F32 or null; out [n, w.rows] F32; scratch >= matmul_quant_scratch_bytes(n, w).
void matmul_quant(const float* x, int n, const WeightView& w, const float* bias, float* out, void* scratch,
                  cudaStream_t stream);

}  // namespace kvscope::cuda
