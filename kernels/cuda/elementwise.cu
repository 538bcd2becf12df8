// Elementwise kernels: grid-stride loops, one element per thread per iteration. They are memory bound;
// expf and the division are the IEEE-accurate versions (no fast math), so results match the CPU
// backend to a few ulp (add: bitwise).
#include "cuda/elementwise.cuh"

#include "cuda/cuda_common.cuh"

namespace kvscope::cuda {

namespace {
constexpr int kThreads = 256;
}

// grid-stride over n.                       gate, up, out [n]
static __global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// grid-stride over n.                       x, y [n]
static __global__ void add_kernel(float* x, const float* y, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        x[i] += y[i];
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
    if (n <= 0) return;
    silu_mul_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out);
    CUDA_CHECK_LAUNCH("silu_mul_kernel");
}

void add(float* x, const float* y, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    add_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, y, n);
    CUDA_CHECK_LAUNCH("add_kernel");
}

}  // namespace kvscope::cuda
