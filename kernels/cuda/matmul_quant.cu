// The quantized matmul kernel (cuda/matmul_quant.cuh) and the activation quantization before it.
// Simple on purpose: one weight element per lane per step, decoded by Quant<T>::value; the weight row is
// read once per 8 x rows (decode reads it once), x reads are coalesced.
#include "cuda/matmul_quant.cuh"

#include "cpu/quant.h"
#include "cuda/cuda_common.cuh"
#include "cuda/dequantize.cuh"

namespace kvscope::cuda {

namespace {
constexpr int kWarps = 8;        // weight rows per thread block
constexpr int kRowsPerWarp = 8;  // x rows per warp: the weight row is decoded once for these
constexpr int kQuantThreads = 256;
}  // namespace

// Warp-per-32-values, grid-stride.          x [count] F32 -> xq [count] F32 (count a multiple of 32)
// Each value as the CPU's int8 path sees it (q8_activation; the warp's max is exact in any order).
static __global__ void quantize_activations_kernel(const float* __restrict__ x, int64_t count, float* __restrict__ xq) {
    const int lane = threadIdx.x % kWarpSize;
    const int64_t groups = count / 32;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
    for (int64_t g = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarpSize; g < groups; g += stride) {
        const float v = x[g * 32 + lane];
        xq[g * 32 + lane] = q8_activation(v, warp_max(fabsf(v)));
    }
}

// grid (ceil(N / kWarps), ceil(n / kRowsPerWarp)), block kWarps * 32.
//   x [n, K] F32; w [N, row_bytes] of Q::Block; bias [N] or null; out [n, N] F32
// Warp w of block (bx, by): weight row bx * kWarps + w, x rows by * kRowsPerWarp + [0, kRowsPerWarp).
// Warp-per-256-values, grid-stride, for the K types (cpu::matmul_runs_k_int8): x [count] F32 -> xq [count]
// F32 (count a multiple of 256). m is the value of largest magnitude, the first one on a tie as on the CPU,
// so each lane carries its best (|x|, index) and the warp keeps the larger, then the lower index.
static __global__ void quantize_activations_k_kernel(const float* __restrict__ x, int64_t count, float* __restrict__ xq) {
    const int lane = threadIdx.x % kWarpSize;
    const int64_t groups = count / 256;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarpSize;
    for (int64_t g = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarpSize; g < groups; g += stride) {
        const float* xg = x + g * 256;
        float best = -1.0f;
        int at = 0;
        for (int i = 0; i < 8; ++i) {
            const int j = lane + 32 * i;
            const float a = fabsf(xg[j]);
            if (a > best) best = a, at = j;  // j rises within a lane: ties keep the first
        }
#pragma unroll
        for (int o = kWarpSize / 2; o > 0; o >>= 1) {
            const float b = __shfl_xor_sync(0xffffffffu, best, o);
            const int bj = __shfl_xor_sync(0xffffffffu, at, o);
            if (b > best || (b == best && bj < at)) best = b, at = bj;
        }
        const float m = xg[at];
        for (int i = 0; i < 8; ++i) xq[g * 256 + lane + 32 * i] = q8k_activation(xg[lane + 32 * i], m);
    }
}

template <class Q>
static __global__ void __launch_bounds__(kWarps * kWarpSize)
    matmul_quant_kernel(const float* __restrict__ x, int n, int K, const uint8_t* __restrict__ w, int64_t row_bytes,
                        int N, const float* __restrict__ bias, float* __restrict__ out) {
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    const int r = blockIdx.x * kWarps + warp;
    if (r >= N) return;  // the whole warp
    const int t0 = blockIdx.y * kRowsPerWarp;
    const int rows = min(kRowsPerWarp, n - t0);
    const auto* wr = reinterpret_cast<const typename Q::Block*>(w + static_cast<int64_t>(r) * row_bytes);
    const float* xr = x + static_cast<int64_t>(t0) * K;
    float acc[kRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) acc[i] = 0.0f;
    for (int k = lane; k < K; k += kWarpSize) {  // K is a multiple of 32: every lane runs every step
        const float wv = Q::value(wr[k / Q::kElems], k % Q::kElems);
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i)
            if (i < rows) acc[i] = fma_rn(wv, xr[static_cast<int64_t>(i) * K + k], acc[i]);
    }
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
        const float s = warp_sum(acc[i]);
        if (lane == 0 && i < rows) out[static_cast<int64_t>(t0 + i) * N + r] = bias ? add_rn(s, bias[r]) : s;
    }
}

size_t matmul_quant_scratch_bytes(int n, const WeightView& w) {
    return cpu::matmul_quantizes_activations(w.dtype) ? static_cast<size_t>(n) * static_cast<size_t>(w.cols) * 4 : 0;
}

void matmul_quant(const float* x, int n, const WeightView& w, const float* bias, float* out, void* scratch,
                  cudaStream_t stream) {
    if (w.rows <= 0 || w.cols <= 0 || w.rows > INT32_MAX || w.cols > INT32_MAX || w.cols % dtype_block_elems(w.dtype) != 0)
        throw std::invalid_argument("cuda matmul: weight shape [" + std::to_string(w.rows) + ", " + std::to_string(w.cols) +
                                    "] is not supported for " + std::string(dtype_name(w.dtype)) +
                                    " (rows of whole blocks of " + std::to_string(dtype_block_elems(w.dtype)) + ")");
    if (n <= 0) return;
    const int N = static_cast<int>(w.rows), K = static_cast<int>(w.cols);
    if (cpu::matmul_quantizes_activations(w.dtype)) {
        if (!scratch) throw std::invalid_argument("cuda matmul: quantized activations need scratch");
        const int64_t count = static_cast<int64_t>(n) * K;
        if (cpu::matmul_runs_k_int8(w.dtype)) {  // one warp per 256 values
            quantize_activations_k_kernel<<<grid_for(count / 8, kQuantThreads), kQuantThreads, 0, stream>>>(
                x, count, static_cast<float*>(scratch));
            CUDA_CHECK_LAUNCH("quantize_activations_k_kernel");
        } else {
            quantize_activations_kernel<<<grid_for(count, kQuantThreads), kQuantThreads, 0, stream>>>(
                x, count, static_cast<float*>(scratch));
            CUDA_CHECK_LAUNCH("quantize_activations_kernel");
        }
        x = static_cast<const float*>(scratch);
    }
    const dim3 grid(static_cast<unsigned>(ceil_div(N, kWarps)), static_cast<unsigned>(ceil_div(n, kRowsPerWarp)));
    if (grid.y > 65535) throw std::invalid_argument("cuda matmul: " + std::to_string(n) + " rows is too many for one call");
    visit_quant_type(w.dtype, "cuda matmul", [&](auto q) {
        using Q = decltype(q);
        matmul_quant_kernel<Q><<<grid, kWarps * kWarpSize, 0, stream>>>(
            x, n, K, static_cast<const uint8_t*>(w.data), dtype_row_bytes(w.dtype, K), N, bias, out);
        CUDA_CHECK_LAUNCH("matmul_quant_kernel");
    });
}

}  // namespace kvscope::cuda
