// The packing of a Q4_K / Q5_K block's sub-block scales, shared by the CPU kernels (cpu/quant.cpp) and the
// CUDA decoder (cuda/dequantize.cuh), so the bit layout is written once.
#pragma once

#include <cstdint>

namespace kvscope {

// Device-callable too where nvcc compiles the including file (cuda/dequantize.cuh decodes blocks with it).
#if defined(__CUDACC__)
#define KVSCOPE_BLOCK_FN __host__ __device__ inline
#else
#define KVSCOPE_BLOCK_FN inline
#endif

// The 6-bit scale sc and min m of sub-block j (0..7) of a Q4_K or Q5_K block, as ggml packs them in its 12
// bytes q (T: uint8_t or int, whichever the caller's arithmetic wants).
template <class T>
KVSCOPE_BLOCK_FN void q4k_scale_min(int j, const uint8_t* q, T& sc, T& m) {
    if (j < 4) {
        sc = static_cast<T>(q[j] & 63);
        m = static_cast<T>(q[j + 4] & 63);
    } else {
        sc = static_cast<T>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = static_cast<T>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

}  // namespace kvscope
