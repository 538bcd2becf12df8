// RMSNorm: one thread block per row; the sum of squares is reduced in F32 (warp shuffles, then one
// warp over the per-warp sums), so every row costs one read of x and one write of out.
#include "cuda/rms_norm.cuh"

#include "cuda/cuda_common.cuh"

namespace kvscope::cuda {

namespace {
constexpr int kThreads = 256;  // a multiple of 32, at most 1024
}

// grid (n), block kThreads.                 x, out [n, dim]; weight [dim]
static __global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const float* x, const float* __restrict__ weight, int dim, float eps, float* out) {
    __shared__ float warp_sums[kThreads / kWarpSize];
    __shared__ float inv_rms;
    const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
    float* o = out + static_cast<int64_t>(blockIdx.x) * dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += kThreads) ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    if (lane == 0) warp_sums[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        float s = lane < kThreads / kWarpSize ? warp_sums[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) inv_rms = 1.0f / sqrtf(s / dim + eps);
    }
    __syncthreads();
    const float inv = inv_rms;
    for (int i = threadIdx.x; i < dim; i += kThreads) o[i] = xr[i] * inv * weight[i];
}

void rms_norm(const float* x, const float* weight, int n, int dim, float eps, float* out, cudaStream_t stream) {
    if (n <= 0 || dim <= 0) return;
    rms_norm_kernel<<<n, kThreads, 0, stream>>>(x, weight, dim, eps, out);
    CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

}  // namespace kvscope::cuda
