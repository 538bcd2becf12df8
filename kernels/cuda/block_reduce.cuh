// Whole-block reductions for one-block-per-row kernels (nvcc only): argmax with the lowest index on ties
// (of a row, or of per-thread candidates) and a float sum. Both are deterministic: the combining order is fixed by the thread layout, and every
// thread receives the same result. Each call synchronizes the block and may be called repeatedly.
#pragma once

#include "cuda/cuda_common.cuh"

#include <climits>

namespace kvscope::cuda {

// A candidate maximum: value and index; INT_MAX = none yet.
struct ArgMax {
    float value = -INFINITY;
    int index = INT_MAX;
};

// Keeps the larger value, else the lower index, as std::max_element does on rows without NaN. A NaN never
// wins here, where std::max_element (the CPU's argmax) returns index 0 when the row starts with one.
__device__ __forceinline__ void keep_better(ArgMax& a, float value, int index) {
    if (value > a.value || (value == a.value && index < a.index)) {
        a.value = value;
        a.index = index;
    }
}

__device__ __forceinline__ ArgMax warp_argmax(ArgMax a) {
#pragma unroll
    for (int o = kWarpSize / 2; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, a.value, o);
        const int i = __shfl_xor_sync(0xffffffffu, a.index, o);
        keep_better(a, v, i);
    }
    return a;
}

// Every thread of the block (kThreads, a multiple of the warp size) passes its candidate; all get the best.
template <int kThreads>
__device__ ArgMax block_argmax(ArgMax a) {
    static_assert(kThreads % kWarpSize == 0 && kThreads <= kWarpSize * kWarpSize, "block size");
    constexpr int kWarps = kThreads / kWarpSize;
    __shared__ float values[kWarps];
    __shared__ int indices[kWarps];
    __shared__ float best_value;  // (ArgMax has initializers, which __shared__ variables may not have)
    __shared__ int best_index;
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    a = warp_argmax(a);
    if (lane == 0) {
        values[warp] = a.value;
        indices[warp] = a.index;
    }
    __syncthreads();
    if (warp == 0) {
        ArgMax b;
        if (lane < kWarps) {
            b.value = values[lane];
            b.index = indices[lane];
        }
        b = warp_argmax(b);
        if (lane == 0) {
            best_value = b.value;
            best_index = b.index;
        }
    }
    __syncthreads();
    ArgMax r;
    r.value = best_value;
    r.index = best_index;
    __syncthreads();  // the next call may overwrite the shared slots
    return r;
}

// The argmax of row [0, n): every thread scans a strided slice, then the block merges. Index INT_MAX when
// every value is NaN.
template <int kThreads>
__device__ ArgMax block_argmax_row(const float* row, int n) {
    ArgMax a;
    for (int j = threadIdx.x; j < n; j += kThreads) keep_better(a, row[j], j);
    return block_argmax<kThreads>(a);
}

// Every thread passes its partial sum; all get the block's total.
template <int kThreads>
__device__ float block_sum(float v) {
    static_assert(kThreads % kWarpSize == 0 && kThreads <= kWarpSize * kWarpSize, "block size");
    constexpr int kWarps = kThreads / kWarpSize;
    __shared__ float partial[kWarps];
    __shared__ float result;
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    v = warp_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < kWarps ? partial[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) result = s;
    }
    __syncthreads();
    const float r = result;
    __syncthreads();
    return r;
}

}  // namespace kvscope::cuda
