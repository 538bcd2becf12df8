// Shared by the kernels/cuda/*.cu files (nvcc only): error checks that throw std::runtime_error naming the failed call
// and its file:line (CUDA_CHECK, CUBLAS_CHECK, CUDA_CHECK_LAUNCH after every kernel launch), warp
// reductions, element conversions and the small index helpers every launcher uses. Device code here is header-only.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvscope::cuda {

[[noreturn]] inline void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line) {
    // Clear the runtime's last error: a failed API call (out of pinned memory, a bad argument) leaves it set,
    // and the next op's CUDA_CHECK_LAUNCH would report it as its own launch failing. Sticky errors (a fault
    // in a kernel) stay whatever is read here.
    (void)cudaGetLastError();
    throw std::runtime_error(std::string("CUDA error: ") + call + " failed: " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ") at " + file + ":" + std::to_string(line));
}

[[noreturn]] inline void throw_cublas_error(const char* call, cublasStatus_t st, const char* file, int line) {
    throw std::runtime_error(std::string("cuBLAS error: ") + call + " failed: " + cublasGetStatusName(st) + " (" +
                             cublasGetStatusString(st) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace kvscope::cuda

#define CUDA_CHECK(call)                                                                        \
    do {                                                                                        \
        const cudaError_t kvscope_err_ = (call);                                                \
        if (kvscope_err_ != cudaSuccess)                                                        \
            ::kvscope::cuda::throw_cuda_error(#call, kvscope_err_, __FILE__, __LINE__);         \
    } while (0)

#define CUBLAS_CHECK(call)                                                                      \
    do {                                                                                        \
        const cublasStatus_t kvscope_st_ = (call);                                              \
        if (kvscope_st_ != CUBLAS_STATUS_SUCCESS)                                               \
            ::kvscope::cuda::throw_cublas_error(#call, kvscope_st_, __FILE__, __LINE__);        \
    } while (0)

// After every <<<>>> launch: configuration errors (bad grid, too much shared memory, no kernel image for
// this device) surface here, named by the kernel.
#define CUDA_CHECK_LAUNCH(kernel_name)                                                          \
    do {                                                                                        \
        const cudaError_t kvscope_err_ = cudaGetLastError();                                    \
        if (kvscope_err_ != cudaSuccess)                                                        \
            ::kvscope::cuda::throw_cuda_error("launch of " kernel_name, kvscope_err_, __FILE__, __LINE__); \
    } while (0)

namespace kvscope::cuda {

constexpr int kWarpSize = 32;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Grid size for a grid-stride loop over n elements: enough blocks to fill the device, never 0.
inline unsigned grid_for(int64_t n, int threads) {
    const int64_t blocks = ceil_div(n, threads);
    return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
// F32 into an element type, rounded to nearest even (as the CPU backend's conversions).
__device__ __forceinline__ void store_rounded(float* y, float v) { *y = v; }
__device__ __forceinline__ void store_rounded(__half* y, float v) { *y = __float2half_rn(v); }
__device__ __forceinline__ void store_rounded(__nv_bfloat16* y, float v) { *y = __float2bfloat16_rn(v); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = kWarpSize / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

}  // namespace kvscope::cuda
