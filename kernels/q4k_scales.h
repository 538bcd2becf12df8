// The packing of the K types' sub-block scales (Q4_K / Q5_K, Q3_K, IQ4_XS), shared by the CPU kernels
// (cpu/quant.cpp, cpu/matmul_q8.cpp) and the CUDA decoder (cuda/dequantize.cuh), so each bit layout is
// written once.
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

// Sub-block j's (0..15) 6-bit Q3_K scale, its offset of 32 removed: the low 4 bits in nibble j / 8 of byte
// j % 8 of the 12 bytes s, the top 2 bits in bits 2 * (j / 4) of byte 8 + j % 4.
KVSCOPE_BLOCK_FN int q3k_scale(int j, const uint8_t* s) {
    const int lo = (s[j % 8] >> (4 * (j / 8))) & 0xF;
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

// IQ4_XS sub-block j's (0..7) 6-bit scale, its offset of 32 removed: the low 4 bits in nibble j % 2 of
// scales_l[j / 2], the top 2 bits in bits 2j, 2j + 1 of scales_h.
KVSCOPE_BLOCK_FN int iq4xs_scale(int j, const uint8_t* scales_l, uint16_t scales_h) {
    return (((scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((scales_h >> (2 * j)) & 3) << 4)) - 32;
}

}  // namespace kvscope
