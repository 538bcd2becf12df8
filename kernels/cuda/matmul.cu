// matmul: row-major out[n, N] = x[n, K] @ w[N, K]^T is, in cuBLAS's column-major terms,
// out^T (N x n, ld N) = W^T (N x K) * X (K x n), with W stored K x N (ld K) and X stored K x n (ld K):
// one cublasGemmEx(OP_T, OP_N, m = N, n = n, k = K). Bias is a second, elementwise pass. Block-quantized
// weights go to cuda/matmul_quant.cuh.
#include "cuda/matmul.cuh"

#include "cuda/cuda_common.cuh"
#include "cuda/matmul_quant.cuh"

namespace kvscope::cuda {

namespace {
constexpr int kThreads = 256;

cudaDataType_t cuda_type(DType t) {
    switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default:
        throw std::invalid_argument("cuda matmul: weight type " + std::string(dtype_name(t)) +
                                    " is not a cuBLAS type (F32, F16, BF16)");
    }
}
}  // namespace

// grid-stride over n.                       x [n] F32 -> y [n] in T (round to nearest even)
template <typename T>
static __global__ void convert_kernel(const float* __restrict__ x, int64_t n, T* __restrict__ y) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        store_rounded(y + i, x[i]);
}

// grid-stride over n * cols.                out [n, cols] += bias [cols] per row
static __global__ void add_bias_kernel(float* __restrict__ out, const float* __restrict__ bias, int64_t n,
                                       int64_t cols) {
    const int64_t total = n * cols;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        out[i] += bias[i % cols];
}

size_t matmul_scratch_bytes(int n, const WeightView& w) {
    if (dtype_is_quantized(w.dtype)) return matmul_quant_scratch_bytes(n, w);
    return w.dtype == DType::F32 ? 0 : static_cast<size_t>(n) * static_cast<size_t>(w.cols) * 2;
}

void matmul(cublasHandle_t handle, const float* x, int n, const WeightView& w, const float* bias, float* out,
            void* scratch, cudaStream_t stream) {
    if (dtype_is_quantized(w.dtype)) return matmul_quant(x, n, w, bias, out, scratch, stream);
    const cudaDataType_t wt = cuda_type(w.dtype);
    if (w.rows <= 0 || w.cols <= 0 || w.rows > INT32_MAX || w.cols > INT32_MAX)
        throw std::invalid_argument("cuda matmul: weight shape [" + std::to_string(w.rows) + ", " +
                                    std::to_string(w.cols) + "] is not supported");
    if (n <= 0) return;
    const int N = static_cast<int>(w.rows), K = static_cast<int>(w.cols);
    const void* b = x;  // X in the weight's type
    if (w.dtype != DType::F32) {
        const int64_t count = static_cast<int64_t>(n) * K;
        if (w.dtype == DType::F16)
            convert_kernel<__half><<<grid_for(count, kThreads), kThreads, 0, stream>>>(x, count, static_cast<__half*>(scratch));
        else
            convert_kernel<__nv_bfloat16><<<grid_for(count, kThreads), kThreads, 0, stream>>>(
                x, count, static_cast<__nv_bfloat16*>(scratch));
        CUDA_CHECK_LAUNCH("convert_kernel");
        b = scratch;
    }
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, n, K, &alpha, w.data, wt, K, b, wt, K, &beta, out,
                              CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (bias) {
        const int64_t total = static_cast<int64_t>(n) * N;
        add_bias_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(out, bias, n, N);
        CUDA_CHECK_LAUNCH("add_bias_kernel");
    }
}

}  // namespace kvscope::cuda
