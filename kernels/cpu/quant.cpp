#include "cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

void dequantize_f16(const uint16_t* src, float* dst, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
    for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void dequantize_bf16(const uint16_t* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void dequantize_q8_0(const BlockQ8_0* blocks, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = f16_to_f32(blocks[b].d);
        for (int j = 0; j < 32; ++j) dst[b * 32 + j] = d * blocks[b].qs[j];
    }
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K block, as ggml packs them.
inline void q4k_scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

void dequantize_q4_k(const BlockQ4_K* blocks, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const BlockQ4_K& blk = blocks[b];
        const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
        const uint8_t* q = blk.qs;
        float* y = dst + b * 256;
        for (int j = 0; j < 8; j += 2) {  // 64 values: low nibbles then high nibbles of 32 bytes
            uint8_t sc, m;
            q4k_scale_min(j, blk.scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            q4k_scale_min(j + 1, blk.scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) y[l] = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) y[32 + l] = d2 * (q[l] >> 4) - m2;
            y += 64;
            q += 32;
        }
    }
}

void quantize_q8_0(const float* src, BlockQ8_0* blocks, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(src[b * 32 + j]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        blocks[b].d = f32_to_f16(d);
        for (int j = 0; j < 32; ++j) blocks[b].qs[j] = static_cast<int8_t>(std::lround(src[b * 32 + j] * id));
    }
}

// A plain min/max Q4_K quantizer (ggml's searches better scales; this one only makes test data).
void quantize_q4_k(const float* src, BlockQ4_K* blocks, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const float* x = src + b * 256;
        float scales[8], mins[8];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; ++j) {
            float lo = 0, hi = 0;  // the min is clamped to <= 0: ggml stores -min as a non-negative m
            for (int l = 0; l < 32; ++l) {
                lo = std::min(lo, x[j * 32 + l]);
                hi = std::max(hi, x[j * 32 + l]);
            }
            scales[j] = (hi - lo) / 15.0f;
            mins[j] = -lo;
            max_scale = std::max(max_scale, scales[j]);
            max_min = std::max(max_min, mins[j]);
        }
        BlockQ4_K& blk = blocks[b];
        const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
        blk.d = f32_to_f16(d);
        blk.dmin = f32_to_f16(dmin);
        const float dd = f16_to_f32(blk.d), dm = f16_to_f32(blk.dmin);
        uint8_t ls[8], lm[8];
        for (int j = 0; j < 8; ++j) {
            ls[j] = static_cast<uint8_t>(std::clamp<long>(dd > 0 ? std::lround(scales[j] / dd) : 0, 0, 63));
            lm[j] = static_cast<uint8_t>(std::clamp<long>(dm > 0 ? std::lround(mins[j] / dm) : 0, 0, 63));
        }
        std::memset(blk.scales, 0, sizeof blk.scales);
        for (int j = 0; j < 8; ++j) {
            if (j < 4) {
                blk.scales[j] = ls[j];
                blk.scales[j + 4] = lm[j];
            } else {
                blk.scales[j + 4] = (ls[j] & 0xF) | ((lm[j] & 0xF) << 4);
                blk.scales[j - 4] |= (ls[j] >> 4) << 6;
                blk.scales[j] |= (lm[j] >> 4) << 6;
            }
        }
        for (int j = 0; j < 8; j += 2) {
            for (int half = 0; half < 2; ++half) {
                const float sd = dd * ls[j + half], sm = dm * lm[j + half];
                for (int l = 0; l < 32; ++l) {
                    long q = sd > 0 ? std::lround((x[(j + half) * 32 + l] + sm) / sd) : 0;
                    q = std::clamp<long>(q, 0, 15);
                    uint8_t& byte = blk.qs[j / 2 * 32 + l];
                    byte = half == 0 ? static_cast<uint8_t>(q) : static_cast<uint8_t>(byte | (q << 4));
                }
            }
        }
    }
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
    switch (type) {
    case DType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::F16: dequantize_f16(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::BF16: dequantize_bf16(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::Q8_0: dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n); return;
    case DType::Q4_K: dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, n); return;
    }
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
    switch (type) {
    case DType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::F16:
        for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
        return;
    case DType::BF16:
        for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
        return;
    case DType::Q8_0: quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n); return;
    case DType::Q4_K: quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n); return;
    }
}

void quantize_activations_q8(const float* src, BlockQ8Act* dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* x = src + b * 32;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        dst[b].d = d;
        // Round to nearest even by the 1.5 * 2^23 trick (exact for |v| <= 127), with an explicit fma
        // so that no compiler contraction choice can change a rounding.
        for (int j = 0; j < 32; ++j) {
            const float v = std::fma(x[j], id, 12582912.0f) - 12582912.0f;
            dst[b].qs[j] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
        }
    }
}

}  // namespace KVSCOPE_CPU_NAMESPACE
