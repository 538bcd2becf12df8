// RoPE: one thread per rotated pair of one head of one token (q heads first, then k heads). The angle is
// position * inv_freq[i] rounded to F32 (as HF and the CPU backend compute it); sincosf is the accurate
// libdevice version (kvscope never builds with --use_fast_math), good to ~1 ulp for angles up to 1e5.
#include "cuda/rope.cuh"

#include "cuda/cuda_common.cuh"

namespace kvscope::cuda {

namespace {
constexpr int kThreads = 256;
}

// grid-stride over n * (num_heads + num_kv_heads) * half pairs.
//   q [n, num_heads, head_dim]; k [n, num_kv_heads, head_dim]; positions [n]; inv_freq [half]
static __global__ void rope_kernel(float* q, float* k, const int32_t* __restrict__ positions, int n, int num_heads,
                                   int num_kv_heads, const float* __restrict__ inv_freq, int head_dim, int half,
                                   bool neox) {
    const int heads = num_heads + num_kv_heads;
    const int64_t total = static_cast<int64_t>(n) * heads * half;
    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int i = static_cast<int>(idx % half);
        const int hh = static_cast<int>((idx / half) % heads);
        const int64_t t = idx / (static_cast<int64_t>(half) * heads);
        float* head = hh < num_heads ? q + (t * num_heads + hh) * head_dim
                                     : k + (t * num_kv_heads + (hh - num_heads)) * head_dim;
        const float angle = static_cast<float>(positions[t]) * inv_freq[i];
        float sn, cs;
        sincosf(angle, &sn, &cs);
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x0 = head[a], x1 = head[b];
        head[a] = x0 * cs - x1 * sn;
        head[b] = x0 * sn + x1 * cs;
    }
}

void rope(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads, const RopeParams& p,
          cudaStream_t stream) {
    if (p.rotary_dim <= 0 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
        throw std::invalid_argument("cuda rope: rotary_dim " + std::to_string(p.rotary_dim) +
                                    " must be even, positive and at most head_dim " + std::to_string(p.head_dim));
    if (n <= 0 || num_heads + num_kv_heads <= 0) return;
    const int half = p.rotary_dim / 2;
    const int64_t total = static_cast<int64_t>(n) * (num_heads + num_kv_heads) * half;
    rope_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(q, k, positions, n, num_heads, num_kv_heads,
                                                                    p.inv_freq, p.head_dim, half, p.neox);
    CUDA_CHECK_LAUNCH("rope_kernel");
}

}  // namespace kvscope::cuda
