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

// grid-stride over n.                       gate, up, out [n]
static __global__ void gelu_tanh_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        const float two_u = (2.0f * 0.7978845608f) * (g + 0.044715f * g * g * g);
        out[i] = g / (1.0f + expf(-two_u)) * up[i];
    }
}

// grid-stride over n.                       x [n]
static __global__ void scale_kernel(float* x, int64_t n, float s) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        x[i] *= s;
}

// grid-stride over n.                       x [n]
static __global__ void softcap_kernel(float* x, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        x[i] = cap * tanhf(x[i] * inv);
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

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
    if (n <= 0) return;
    gelu_tanh_mul_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out);
    CUDA_CHECK_LAUNCH("gelu_tanh_mul_kernel");
}

void scale(float* x, int64_t n, float s, cudaStream_t stream) {
    if (n <= 0) return;
    scale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, s);
    CUDA_CHECK_LAUNCH("scale_kernel");
}

void softcap(float* x, int64_t n, float cap, cudaStream_t stream) {
    if (n <= 0) return;
    softcap_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, cap);
    CUDA_CHECK_LAUNCH("softcap_kernel");
}

void add(float* x, const float* y, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    add_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, y, n);
    CUDA_CHECK_LAUNCH("add_kernel");
}

}  // namespace kvscope::cuda
