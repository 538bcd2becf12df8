// argmax: one thread block per row. Each thread scans a strided slice keeping its first maximum; the
// (value, index) pairs are merged by "larger value, else lower index", so ties resolve to the lowest
// index exactly as std::max_element does. NaN logits never win; a row of NaN gives 0.
#include "cuda/argmax.cuh"

#include "cuda/cuda_common.cuh"

#include <climits>

namespace kvscope::cuda {

namespace {
constexpr int kThreads = 256;

__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) {
        v = ov;
        i = oi;
    }
}
}  // namespace

// grid (n), block kThreads.                 logits [n, vocab]; out [n]
static __global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* __restrict__ logits, int vocab, int32_t* __restrict__ out) {
    __shared__ float best_v[kThreads / kWarpSize];
    __shared__ int best_i[kThreads / kWarpSize];
    const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
    float v = -INFINITY;
    int i = INT_MAX;
    for (int j = threadIdx.x; j < vocab; j += kThreads) better(v, i, row[j], j);
#pragma unroll
    for (int o = kWarpSize / 2; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, i, o);
        better(v, i, ov, oi);
    }
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    if (lane == 0) {
        best_v[warp] = v;
        best_i[warp] = i;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < kThreads / kWarpSize ? best_v[lane] : -INFINITY;
        i = lane < kThreads / kWarpSize ? best_i[lane] : INT_MAX;
#pragma unroll
        for (int o = kWarpSize / 2; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, v, o);
            const int oi = __shfl_xor_sync(0xffffffffu, i, o);
            better(v, i, ov, oi);
        }
        if (lane == 0) out[blockIdx.x] = i == INT_MAX ? 0 : i;
    }
}

void argmax(const float* logits, int n, int vocab, int32_t* out, cudaStream_t stream) {
    if (n <= 0) return;
    if (vocab <= 0) throw std::invalid_argument("cuda argmax: vocab " + std::to_string(vocab) + " must be positive");
    argmax_kernel<<<n, kThreads, 0, stream>>>(logits, vocab, out);
    CUDA_CHECK_LAUNCH("argmax_kernel");
}

}  // namespace kvscope::cuda
