// argmax: one thread block per row. Each thread scans a strided slice keeping its first maximum; the
// (value, index) pairs are merged by "larger value, else lower index" (block_argmax_row), so ties resolve to
// the lowest index exactly as std::max_element does. NaN logits never win; a row of NaN gives 0.
#include "cuda/argmax.cuh"

#include "cuda/block_reduce.cuh"

namespace kvscope::cuda {

namespace {
constexpr int kThreads = 256;
}  // namespace

// grid (n), block kThreads.                 logits [n, vocab]; out [n]
static __global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* __restrict__ logits, int vocab, int32_t* __restrict__ out) {
    const ArgMax best = block_argmax_row<kThreads>(logits + static_cast<int64_t>(blockIdx.x) * vocab, vocab);
    if (threadIdx.x == 0) out[blockIdx.x] = best.index == INT_MAX ? 0 : best.index;
}

void argmax(const float* logits, int n, int vocab, int32_t* out, cudaStream_t stream) {
    if (n <= 0) return;
    if (vocab <= 0) throw std::invalid_argument("cuda argmax: vocab " + std::to_string(vocab) + " must be positive");
    argmax_kernel<<<n, kThreads, 0, stream>>>(logits, vocab, out);
    CUDA_CHECK_LAUNCH("argmax_kernel");
}

}  // namespace kvscope::cuda
