// GEMMs through cuBLAS: out[n, N] = x[n, K] @ w[N, K]^T (+ bias) with F32 accumulation, for weights in
// F32, F16 and BF16. F32 runs in full F32 (CUBLAS_COMPUTE_32F, TF32 off); for F16/BF16 weights x is
// first rounded to the weight's type (tensor cores take both operands in one type), which costs one
// half-type rounding of each activation (relative 2^-11 F16, 2^-8 BF16), as in vLLM's bf16 models.
// Block-quantized weights (every other type) run cuda/matmul_quant.cuh's kernel instead, batch-invariant.
#pragma once

#include "backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace kvscope::cuda {

// Bytes of scratch matmul needs for n rows of x against w (the x copy in the weight's type; 0 for F32;
// matmul_quant_scratch_bytes for the quantized types).
size_t matmul_scratch_bytes(int n, const WeightView& w);

// x [n, w.cols] F32; w [w.rows, w.cols] in w.dtype; bias [w.rows] F32 or null; out [n, w.rows] F32;
// scratch >= matmul_scratch_bytes(n, w) bytes. The handle must be bound to `stream`. Every DType.
void matmul(cublasHandle_t handle, const float* x, int n, const WeightView& w, const float* bias, float* out,
            void* scratch, cudaStream_t stream);

}  // namespace kvscope::cuda
