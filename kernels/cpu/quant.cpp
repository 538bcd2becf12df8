#include "cpu/quant.h"
#include "cpu/q8_values.h"
#include "q4k_scales.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

void dequantize_f16(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
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

void dequantize_bf16(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void dequantize_q8_0(const BlockQ8_0* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = f16_to_f32(blocks[b].d);
        for (int j = 0; j < 32; ++j) dst[b * 32 + j] = d * blocks[b].qs[j];
    }
}

// The inverse: 8 6-bit scales and mins into 12 bytes.
void pack_scale_min_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t out[12]) {
    std::memset(out, 0, 12);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            out[j] = ls[j];
            out[j + 4] = lm[j];
        } else {
            out[j + 4] = (ls[j] & 0xF) | ((lm[j] & 0xF) << 4);
            out[j - 4] |= (ls[j] >> 4) << 6;
            out[j] |= (lm[j] >> 4) << 6;
        }
    }
}

#if defined(__AVX2__)
// y[0..32) = scale * u[i] - offset for 32 unsigned bytes u, rounded as the scalar expression is.
inline void store_affine_u8x32(__m256i u, float scale, float offset, float* y) {
    const __m256 s = _mm256_set1_ps(scale), o = _mm256_set1_ps(offset);
    for (int part = 0; part < 4; ++part) {
        const __m128i half = part < 2 ? _mm256_castsi256_si128(u) : _mm256_extracti128_si256(u, 1);
        const __m256i u32 = _mm256_cvtepu8_epi32(part % 2 ? _mm_srli_si128(half, 8) : half);
        _mm256_storeu_ps(y + 8 * part, _mm256_sub_ps(_mm256_mul_ps(s, _mm256_cvtepi32_ps(u32)), o));
    }
}
// y[0..16) = s1 * v[i], y[16..32) = s2 * v[i] for 32 signed bytes v, rounded as the scalar expression is.
inline void store_scaled_i8x32(__m256i v, float s1, float s2, float* y) {
    for (int part = 0; part < 4; ++part) {
        const __m128i half = part < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
        const __m256i v32 = _mm256_cvtepi8_epi32(part % 2 ? _mm_srli_si128(half, 8) : half);
        _mm256_storeu_ps(y + 8 * part, _mm256_mul_ps(_mm256_set1_ps(part < 2 ? s1 : s2), _mm256_cvtepi32_ps(v32)));
    }
}
#endif

void dequantize_q4_k(const BlockQ4_K* __restrict blocks, float* __restrict dst, int64_t n) {
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
#if defined(__AVX2__)  // the same values (multiply, then subtract) a vector at a time
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
            store_affine_u8x32(_mm256_and_si256(bytes, _mm256_set1_epi8(0x0F)), d1, m1, y);
            store_affine_u8x32(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), _mm256_set1_epi8(0x0F)), d2, m2, y + 32);
#else
            for (int l = 0; l < 32; ++l) y[l] = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) y[32 + l] = d2 * (q[l] >> 4) - m2;
#endif
            y += 64;
            q += 32;
        }
    }
}

// Q5_K: Q4_K's layout plus qh, whose bit j holds the 5th bit of sub-block j's value at l = byte index.
void dequantize_q5_k(const BlockQ5_K* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const BlockQ5_K& blk = blocks[b];
        const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
        const uint8_t* q = blk.qs;
        float* y = dst + b * 256;
        for (int j = 0; j < 8; j += 2) {
            uint8_t sc, m;
            q4k_scale_min(j, blk.scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            q4k_scale_min(j + 1, blk.scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) y[l] = d1 * ((q[l] & 0xF) | (((blk.qh[l] >> j) & 1) << 4)) - m1;
            for (int l = 0; l < 32; ++l) y[32 + l] = d2 * ((q[l] >> 4) | (((blk.qh[l] >> (j + 1)) & 1) << 4)) - m2;
            y += 64;
            q += 32;
        }
    }
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL: value j of a 32-block in the low nibble of qs[j % 16] (j < 16) or
// the high one (j >= 16); Q5 adds bit j of qh (a little-endian u32) as the 5th bit.
inline int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

void dequantize_q4_0(const BlockQ4_0* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = f16_to_f32(blocks[b].d);
        const uint8_t* q = blocks[b].qs;
        for (int j = 0; j < 16; ++j) {
            dst[b * 32 + j] = static_cast<float>((q[j] & 0xF) - 8) * d;
            dst[b * 32 + 16 + j] = static_cast<float>((q[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_q4_1(const BlockQ4_1* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = f16_to_f32(blocks[b].d), m = f16_to_f32(blocks[b].m);
#if defined(__AVX2__)  // d * q - (-m): the same rounding as d * q + m
        store_affine_u8x32(nibbles_avx2(blocks[b].qs), d, -m, dst + b * 32);
#else
        const uint8_t* q = blocks[b].qs;
        for (int j = 0; j < 16; ++j) {
            dst[b * 32 + j] = static_cast<float>(q[j] & 0xF) * d + m;
            dst[b * 32 + 16 + j] = static_cast<float>(q[j] >> 4) * d + m;
        }
#endif
    }
}

void dequantize_q5_0(const BlockQ5_0* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = f16_to_f32(blocks[b].d);
        const uint8_t* q = blocks[b].qs;
        uint32_t qh;
        std::memcpy(&qh, blocks[b].qh, 4);
        for (int j = 0; j < 16; ++j) {
            dst[b * 32 + j] = static_cast<float>(static_cast<int>((q[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16) * d;
            dst[b * 32 + 16 + j] = static_cast<float>(static_cast<int>((q[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16) * d;
        }
    }
}

void dequantize_q5_1(const BlockQ5_1* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = f16_to_f32(blocks[b].d), m = f16_to_f32(blocks[b].m);
#if defined(__AVX2__)
        store_affine_u8x32(_mm256_or_si256(nibbles_avx2(blocks[b].qs), fifth_bits_avx2(blocks[b].qh)), d, -m, dst + b * 32);
#else
        const uint8_t* q = blocks[b].qs;
        uint32_t qh;
        std::memcpy(&qh, blocks[b].qh, 4);
        for (int j = 0; j < 16; ++j) {
            dst[b * 32 + j] = static_cast<float>((q[j] & 0xF) | (((qh >> j) & 1) << 4)) * d + m;
            dst[b * 32 + 16 + j] = static_cast<float>((q[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) * d + m;
        }
#endif
    }
}

void dequantize_iq4_nl(const BlockIQ4_NL* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float d = f16_to_f32(blocks[b].d);
        for (int j = 0; j < 32; ++j) dst[b * 32 + j] = d * kIq4nlValues[nibble(blocks[b].qs, j)];
    }
}

void dequantize_iq4_xs(const BlockIQ4_XS* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const BlockIQ4_XS& blk = blocks[b];
        const float d = f16_to_f32(blk.d);
        for (int s = 0; s < 8; ++s) {
            const float dl = d * static_cast<float>(iq4xs_scale(s, blk.scales_l, blk.scales_h));
#if defined(__AVX2__)  // the levels looked up 32 at a time (the scalar lookups ran at a few GB/s)
            store_scaled_i8x32(iq4nl_levels(nibbles_avx2(blk.qs + 16 * s)), dl, dl, dst + b * 256 + s * 32);
#else
            for (int j = 0; j < 32; ++j) dst[b * 256 + s * 32 + j] = dl * kIq4nlValues[nibble(blk.qs + 16 * s, j)];
#endif
        }
    }
}

// Q2_K and Q3_K share the 2-bit layout: value i of the 256 sits in byte 32 * (i / 128) + i % 32 at bit
// 2 * ((i % 128) / 32); its sub-block (scale) is i / 16. Q3_K's high bit is bit i / 32 of hmask[i % 32],
// and a clear bit subtracts 4.
void dequantize_q2_k(const BlockQ2_K* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const BlockQ2_K& blk = blocks[b];
        const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
        float* y = dst + b * 256;
        for (int s = 0; s < 16; ++s) {  // sub-block of 16
            const float dl = d * (blk.scales[s] & 0xF), ml = dmin * (blk.scales[s] >> 4);
            const uint8_t* q = blk.qs + 32 * (s / 8) + 16 * (s % 2);
            const int shift = 2 * ((s % 8) / 2);
            for (int l = 0; l < 16; ++l) y[16 * s + l] = dl * ((q[l] >> shift) & 3) - ml;
        }
    }
}

void dequantize_q3_k(const BlockQ3_K* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const BlockQ3_K& blk = blocks[b];
        const float d = f16_to_f32(blk.d);
        float* y = dst + b * 256;
        for (int s = 0; s < 16; ++s) {
            const float dl = d * static_cast<float>(q3k_scale(s, blk.scales));
            const uint8_t* q = blk.qs + 32 * (s / 8) + 16 * (s % 2);
            const uint8_t* hm = blk.hmask + 16 * (s % 2);
            const int shift = 2 * ((s % 8) / 2), hbit = s / 2;
            for (int l = 0; l < 16; ++l)
                y[16 * s + l] = dl * static_cast<float>(((q[l] >> shift) & 3) - (((hm[l] >> hbit) & 1) ? 0 : 4));
        }
    }
}

// Q6_K: in each half of 128 values, value r (0..127) has its low 4 bits in ql[64 * half + r % 64]
// (low nibble for r < 64, high nibble above) and its top 2 bits at bit 2 * (r / 32) of qh[32 * half +
// r % 32]; stored with an offset of 32; its scale is scales[i / 16].
void dequantize_q6_k(const BlockQ6_K* __restrict blocks, float* __restrict dst, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const BlockQ6_K& blk = blocks[b];
        const float d = f16_to_f32(blk.d);
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = blk.ql + 64 * half;
            const uint8_t* qh = blk.qh + 32 * half;
            float* y = dst + b * 256 + 128 * half;
            for (int quarter = 0; quarter < 4; ++quarter) {
                const float d1 = d * blk.scales[8 * half + 2 * quarter], d2 = d * blk.scales[8 * half + 2 * quarter + 1];
                const uint8_t* lo = ql + 32 * (quarter % 2);
                const int nshift = 4 * (quarter / 2), hshift = 2 * quarter;
#if defined(__AVX2__)  // the same values a vector at a time (GCC's vectorization of the loops below gathers bytes)
                const __m256i l4 = _mm256_and_si256(
                    _mm256_srl_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo)), _mm_cvtsi32_si128(nshift)),
                    _mm256_set1_epi8(0x0F));
                const __m256i h2 = _mm256_and_si256(
                    _mm256_srl_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)), _mm_cvtsi32_si128(hshift)),
                    _mm256_set1_epi8(3));
                const __m256i q8 = _mm256_sub_epi8(_mm256_or_si256(l4, _mm256_slli_epi16(h2, 4)), _mm256_set1_epi8(32));
                store_scaled_i8x32(q8, d1, d2, y + 32 * quarter);
#else
                for (int l = 0; l < 16; ++l) {
                    const int q = (((lo[l] >> nshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4)) - 32;
                    y[32 * quarter + l] = d1 * static_cast<float>(q);
                }
                for (int l = 16; l < 32; ++l) {
                    const int q = (((lo[l] >> nshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4)) - 32;
                    y[32 * quarter + l] = d2 * static_cast<float>(q);
                }
#endif
            }
        }
    }
}

// ---- Quantizers: plain round-to-nearest ones, for test data and dummy models (ggml searches for better
// scales; files from llama-quantize carry those, and only dequantization reads them).

inline int round_clamp(float v, int lo, int hi) { return static_cast<int>(std::clamp<long>(std::lround(v), lo, hi)); }

// The value of largest magnitude (with its sign) of x[0..n).
float signed_absmax(const float* x, int n) {
    float m = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
    return m;
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

inline void set_nibble(uint8_t* qs, int j, int q) {
    if (j < 16)
        qs[j] = static_cast<uint8_t>(q & 0xF);
    else
        qs[j - 16] = static_cast<uint8_t>(qs[j - 16] | ((q & 0xF) << 4));
}

// Symmetric 32-blocks (Q4_0, Q5_0): d = m / -2^(bits-1) for the signed largest value m, so that m itself
// is the grid's end -2^(bits-1) and the rest fits in [-2^(bits-1), 2^(bits-1) - 1].
template <class Block, int kBits>
void quantize_symmetric(const float* src, Block* blocks, int64_t n) {
    constexpr int half = 1 << (kBits - 1);
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* x = src + b * 32;
        Block& blk = blocks[b];
        blk.d = f32_to_f16(signed_absmax(x, 32) / -half);
        const float d = f16_to_f32(blk.d);
        uint32_t qh = 0;
        std::memset(blk.qs, 0, sizeof blk.qs);
        for (int j = 0; j < 32; ++j) {
            const int q = d != 0 ? round_clamp(x[j] / d, -half, half - 1) + half : half;
            set_nibble(blk.qs, j, q);
            qh |= static_cast<uint32_t>(q >> 4) << j;
        }
        if constexpr (kBits == 5) std::memcpy(blk.qh, &qh, 4);
    }
}

// Affine 32-blocks (Q4_1, Q5_1): m = min, d = (max - min) / (2^bits - 1).
template <class Block, int kBits>
void quantize_affine(const float* src, Block* blocks, int64_t n) {
    constexpr int top = (1 << kBits) - 1;
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* x = src + b * 32;
        Block& blk = blocks[b];
        const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
        blk.d = f32_to_f16((hi - lo) / top);
        blk.m = f32_to_f16(lo);
        const float d = f16_to_f32(blk.d), m = f16_to_f32(blk.m);
        uint32_t qh = 0;
        std::memset(blk.qs, 0, sizeof blk.qs);
        for (int j = 0; j < 32; ++j) {
            const int q = d != 0 ? round_clamp((x[j] - m) / d, 0, top) : 0;
            set_nibble(blk.qs, j, q);
            qh |= static_cast<uint32_t>(q >> 4) << j;
        }
        if constexpr (kBits == 5) std::memcpy(blk.qh, &qh, 4);
    }
}

// IQ4_NL levels: the index of the level nearest to v.
int nearest_iq4nl(float v) {
    int best = 0;
    for (int k = 1; k < 16; ++k)
        if (std::fabs(v - kIq4nlValues[k]) < std::fabs(v - kIq4nlValues[best])) best = k;
    return best;
}

void quantize_iq4_nl(const float* src, BlockIQ4_NL* blocks, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* x = src + b * 32;
        blocks[b].d = f32_to_f16(signed_absmax(x, 32) / kIq4nlValues[0]);  // the largest value on -127
        const float d = f16_to_f32(blocks[b].d);
        std::memset(blocks[b].qs, 0, 16);
        for (int j = 0; j < 32; ++j) set_nibble(blocks[b].qs, j, nearest_iq4nl(d != 0 ? x[j] / d : 0.0f));
    }
}

void quantize_iq4_xs(const float* src, BlockIQ4_XS* blocks, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const float* x = src + b * 256;
        BlockIQ4_XS& blk = blocks[b];
        float s[8], smax = 0;
        for (int j = 0; j < 8; ++j) {
            s[j] = signed_absmax(x + 32 * j, 32) / kIq4nlValues[0];
            smax = std::max(smax, std::fabs(s[j]));
        }
        blk.d = f32_to_f16(smax / 31);  // 6-bit signed scales in [-32, 31]
        const float d = f16_to_f32(blk.d);
        blk.scales_h = 0;
        std::memset(blk.scales_l, 0, sizeof blk.scales_l);
        std::memset(blk.qs, 0, sizeof blk.qs);
        for (int j = 0; j < 8; ++j) {
            const int ls = d != 0 ? round_clamp(s[j] / d, -32, 31) : 0;
            const int u = ls + 32;
            blk.scales_l[j / 2] = static_cast<uint8_t>(blk.scales_l[j / 2] | ((u & 0xF) << (4 * (j % 2))));
            blk.scales_h = static_cast<uint16_t>(blk.scales_h | ((u >> 4) << (2 * j)));
            const float dl = d * static_cast<float>(ls);
            for (int l = 0; l < 32; ++l) set_nibble(blk.qs + 16 * j, l, nearest_iq4nl(dl != 0 ? x[32 * j + l] / dl : 0.0f));
        }
    }
}

// Q4_K / Q5_K: per sub-block of 32 a min/max affine grid (the min clamped to <= 0: ggml stores -min as a
// non-negative m), scale and min rounded to 6 bits against the super-block's d and dmin.
template <int kBits>
void quantize_k_affine(const float* x, uint16_t& d_out, uint16_t& dmin_out, uint8_t scales[12], int q[256]) {
    constexpr int top = (1 << kBits) - 1;
    float sub_scale[8], sub_min[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        float lo = 0, hi = 0;
        for (int l = 0; l < 32; ++l) {
            lo = std::min(lo, x[j * 32 + l]);
            hi = std::max(hi, x[j * 32 + l]);
        }
        sub_scale[j] = (hi - lo) / top;
        sub_min[j] = -lo;
        max_scale = std::max(max_scale, sub_scale[j]);
        max_min = std::max(max_min, sub_min[j]);
    }
    d_out = f32_to_f16(max_scale / 63.0f);
    dmin_out = f32_to_f16(max_min / 63.0f);
    const float dd = f16_to_f32(d_out), dm = f16_to_f32(dmin_out);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
        ls[j] = static_cast<uint8_t>(dd > 0 ? round_clamp(sub_scale[j] / dd, 0, 63) : 0);
        lm[j] = static_cast<uint8_t>(dm > 0 ? round_clamp(sub_min[j] / dm, 0, 63) : 0);
    }
    pack_scale_min_k4(ls, lm, scales);
    for (int j = 0; j < 8; ++j) {
        const float sd = dd * ls[j], sm = dm * lm[j];
        for (int l = 0; l < 32; ++l) q[j * 32 + l] = sd > 0 ? round_clamp((x[j * 32 + l] + sm) / sd, 0, top) : 0;
    }
}

void quantize_q4_k(const float* src, BlockQ4_K* blocks, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        BlockQ4_K& blk = blocks[b];
        int q[256];
        quantize_k_affine<4>(src + b * 256, blk.d, blk.dmin, blk.scales, q);
        for (int c = 0; c < 4; ++c)  // sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles)
            for (int l = 0; l < 32; ++l)
                blk.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
}

void quantize_q5_k(const float* src, BlockQ5_K* blocks, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        BlockQ5_K& blk = blocks[b];
        int q[256];
        quantize_k_affine<5>(src + b * 256, blk.d, blk.dmin, blk.scales, q);
        std::memset(blk.qh, 0, sizeof blk.qh);
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l) {
                const int q1 = q[64 * c + l], q2 = q[64 * c + 32 + l];
                blk.qs[32 * c + l] = static_cast<uint8_t>((q1 & 0xF) | ((q2 & 0xF) << 4));
                blk.qh[l] = static_cast<uint8_t>(blk.qh[l] | ((q1 >> 4) << (2 * c)) | ((q2 >> 4) << (2 * c + 1)));
            }
    }
}

// Q2_K: per sub-block of 16 a min/max grid of 4 levels, scale and min rounded to 4 bits.
void quantize_q2_k(const float* src, BlockQ2_K* blocks, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const float* x = src + b * 256;
        BlockQ2_K& blk = blocks[b];
        float sub_scale[16], sub_min[16], max_scale = 0, max_min = 0;
        for (int s = 0; s < 16; ++s) {
            float lo = 0, hi = 0;
            for (int l = 0; l < 16; ++l) {
                lo = std::min(lo, x[16 * s + l]);
                hi = std::max(hi, x[16 * s + l]);
            }
            sub_scale[s] = (hi - lo) / 3;
            sub_min[s] = -lo;
            max_scale = std::max(max_scale, sub_scale[s]);
            max_min = std::max(max_min, sub_min[s]);
        }
        blk.d = f32_to_f16(max_scale / 15);
        blk.dmin = f32_to_f16(max_min / 15);
        const float dd = f16_to_f32(blk.d), dm = f16_to_f32(blk.dmin);
        std::memset(blk.qs, 0, sizeof blk.qs);
        for (int s = 0; s < 16; ++s) {
            const int ls = dd > 0 ? round_clamp(sub_scale[s] / dd, 0, 15) : 0;
            const int lm = dm > 0 ? round_clamp(sub_min[s] / dm, 0, 15) : 0;
            blk.scales[s] = static_cast<uint8_t>(ls | (lm << 4));
            const float sd = dd * ls, sm = dm * lm;
            uint8_t* q = blk.qs + 32 * (s / 8) + 16 * (s % 2);
            const int shift = 2 * ((s % 8) / 2);
            for (int l = 0; l < 16; ++l) {
                const int v = sd > 0 ? round_clamp((x[16 * s + l] + sm) / sd, 0, 3) : 0;
                q[l] = static_cast<uint8_t>(q[l] | (v << shift));
            }
        }
    }
}

// Q3_K: per sub-block of 16 a symmetric grid -4..3 (the signed largest value on -4), scales rounded to
// 6 signed bits against d.
void quantize_q3_k(const float* src, BlockQ3_K* blocks, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const float* x = src + b * 256;
        BlockQ3_K& blk = blocks[b];
        float s[16], smax = 0;
        for (int j = 0; j < 16; ++j) {
            s[j] = signed_absmax(x + 16 * j, 16) / -4;
            smax = std::max(smax, std::fabs(s[j]));
        }
        blk.d = f32_to_f16(smax / 31);
        const float d = f16_to_f32(blk.d);
        std::memset(blk.scales, 0, sizeof blk.scales);
        std::memset(blk.qs, 0, sizeof blk.qs);
        std::memset(blk.hmask, 0, sizeof blk.hmask);
        for (int j = 0; j < 16; ++j) {
            const int ls = d != 0 ? round_clamp(s[j] / d, -32, 31) : 0;
            const int u = ls + 32;
            blk.scales[j % 8] = static_cast<uint8_t>(blk.scales[j % 8] | ((u & 0xF) << (4 * (j / 8))));
            blk.scales[8 + j % 4] = static_cast<uint8_t>(blk.scales[8 + j % 4] | ((u >> 4) << (2 * (j / 4))));
            const float dl = d * static_cast<float>(ls);
            uint8_t* q = blk.qs + 32 * (j / 8) + 16 * (j % 2);
            uint8_t* hm = blk.hmask + 16 * (j % 2);
            const int shift = 2 * ((j % 8) / 2), hbit = j / 2;
            for (int l = 0; l < 16; ++l) {
                const int v = (dl != 0 ? round_clamp(x[16 * j + l] / dl, -4, 3) : 0) + 4;  // 0..7
                q[l] = static_cast<uint8_t>(q[l] | ((v & 3) << shift));
                hm[l] = static_cast<uint8_t>(hm[l] | ((v >> 2) << hbit));
            }
        }
    }
}

// Q6_K: per sub-block of 16 a symmetric grid -32..31 (the signed largest value on -32), int8 scales.
void quantize_q6_k(const float* src, BlockQ6_K* blocks, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const float* x = src + b * 256;
        BlockQ6_K& blk = blocks[b];
        float s[16], smax = 0;
        for (int j = 0; j < 16; ++j) {
            s[j] = signed_absmax(x + 16 * j, 16) / -32;
            smax = std::max(smax, std::fabs(s[j]));
        }
        blk.d = f32_to_f16(smax / 127);
        const float d = f16_to_f32(blk.d);
        std::memset(blk.ql, 0, sizeof blk.ql);
        std::memset(blk.qh, 0, sizeof blk.qh);
        for (int j = 0; j < 16; ++j) {
            const int ls = d != 0 ? round_clamp(s[j] / d, -128, 127) : 0;
            blk.scales[j] = static_cast<int8_t>(ls);
            const float dl = d * static_cast<float>(ls);
            for (int l = 0; l < 16; ++l) {
                const int i = 16 * j + l, half = i / 128, r = i % 128;
                const int v = (dl != 0 ? round_clamp(x[i] / dl, -32, 31) : 0) + 32;  // 0..63
                uint8_t& lo = blk.ql[64 * half + r % 64];
                lo = static_cast<uint8_t>(lo | ((v & 0xF) << (4 * (r / 64))));
                uint8_t& hi = blk.qh[32 * half + r % 32];
                hi = static_cast<uint8_t>(hi | ((v >> 4) << (2 * (r / 32))));
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
    case DType::Q4_0: dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, n); return;
    case DType::Q4_1: dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, n); return;
    case DType::Q5_0: dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, n); return;
    case DType::Q5_1: dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, n); return;
    case DType::Q2_K: dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, n); return;
    case DType::Q3_K: dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, n); return;
    case DType::Q5_K: dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, n); return;
    case DType::Q6_K: dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n); return;
    case DType::IQ4_NL: dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n); return;
    case DType::IQ4_XS: dequantize_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, n); return;
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
    case DType::Q4_0: quantize_symmetric<BlockQ4_0, 4>(src, static_cast<BlockQ4_0*>(dst), n); return;
    case DType::Q4_1: quantize_affine<BlockQ4_1, 4>(src, static_cast<BlockQ4_1*>(dst), n); return;
    case DType::Q5_0: quantize_symmetric<BlockQ5_0, 5>(src, static_cast<BlockQ5_0*>(dst), n); return;
    case DType::Q5_1: quantize_affine<BlockQ5_1, 5>(src, static_cast<BlockQ5_1*>(dst), n); return;
    case DType::Q2_K: quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), n); return;
    case DType::Q3_K: quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), n); return;
    case DType::Q5_K: quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), n); return;
    case DType::Q6_K: quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n); return;
    case DType::IQ4_NL: quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), n); return;
    case DType::IQ4_XS: quantize_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), n); return;
    }
}

// Eight bytes at a time in a u64 (SWAR: portable, and GCC's own vectorization of the byte loops was
// several times slower than the int8 dot products they feed). Stored straight to the block: gathered in
// a local array first, the 32-byte copy out of it stalled on store forwarding.
inline void store_u64(int8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
constexpr uint64_t kLowNibbles = 0x0F0F0F0F0F0F0F0Full;
// Each byte v (v + 128 - c < 256) becomes the int8 v - c: v + (128 - c) stays in its byte, then bit 7 flips.
inline uint64_t bytes_minus(uint64_t v, int c) {
    return (v + 0x0101010101010101ull * static_cast<uint64_t>(128 - c)) ^ 0x8080808080808080ull;
}
// Byte i = `set` where bit i of bits is set, else 0 (set a single bit).
inline uint64_t bits_to_bytes(uint8_t bits, uint8_t set) {
    const uint64_t t = (static_cast<uint64_t>(bits) * 0x0101010101010101ull) & 0x8040201008040201ull;
    const uint64_t top = (t + 0x7F7F7F7F7F7F7F7Full) & 0x8080808080808080ull;  // bit 7 where t's byte != 0
    return (top >> 7) * set;
}

#if defined(__AVX2__)
template <class Block>
void unpack_blocks_avx2(const Block* src, BlockQ8_0* __restrict dst, int64_t nb) {
    for (int64_t b = 0; b < nb; ++b) {
        dst[b].d = src[b].d;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst[b].qs), q8_values(src[b]));
    }
}
#endif

void unpack_row_q8_0(DType type, const void* src, BlockQ8_0* __restrict dst, int64_t n) {
    const int64_t nb = n / 32;
#if defined(__AVX2__)  // one vector per block: several times the SWAR versions below
    switch (type) {
    case DType::Q4_0: unpack_blocks_avx2(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case DType::Q5_0: unpack_blocks_avx2(static_cast<const BlockQ5_0*>(src), dst, nb); return;
    case DType::IQ4_NL: unpack_blocks_avx2(static_cast<const BlockIQ4_NL*>(src), dst, nb); return;
    default: break;
    }
#endif
    switch (type) {
    case DType::Q8_0: std::memcpy(dst, src, static_cast<size_t>(nb) * sizeof(BlockQ8_0)); return;
    case DType::Q4_0:
        for (int64_t b = 0; b < nb; ++b) {
            const BlockQ4_0& blk = static_cast<const BlockQ4_0*>(src)[b];
            uint64_t q[2];
            std::memcpy(q, blk.qs, 16);
            dst[b].d = blk.d;
            for (int h = 0; h < 2; ++h) {  // values 8h.., then 16 + 8h..
                store_u64(dst[b].qs + 8 * h, bytes_minus(q[h] & kLowNibbles, 8));
                store_u64(dst[b].qs + 16 + 8 * h, bytes_minus((q[h] >> 4) & kLowNibbles, 8));
            }
        }
        return;
    case DType::Q5_0:
        for (int64_t b = 0; b < nb; ++b) {
            const BlockQ5_0& blk = static_cast<const BlockQ5_0*>(src)[b];
            uint64_t q[2];
            std::memcpy(q, blk.qs, 16);
            dst[b].d = blk.d;
            for (int h = 0; h < 2; ++h) {
                store_u64(dst[b].qs + 8 * h, bytes_minus((q[h] & kLowNibbles) | bits_to_bytes(blk.qh[h], 0x10), 16));
                store_u64(dst[b].qs + 16 + 8 * h,
                          bytes_minus(((q[h] >> 4) & kLowNibbles) | bits_to_bytes(blk.qh[2 + h], 0x10), 16));
            }
        }
        return;
    case DType::IQ4_NL:
        for (int64_t b = 0; b < nb; ++b) {
            const BlockIQ4_NL& blk = static_cast<const BlockIQ4_NL*>(src)[b];
            uint8_t q[16];  // locals: through byte pointers the loop reloads after every store
            int8_t v[32];
            std::memcpy(q, blk.qs, 16);
            for (int j = 0; j < 16; ++j) {
                v[j] = kIq4nlValues[q[j] & 0xF];
                v[j + 16] = kIq4nlValues[q[j] >> 4];
            }
            dst[b].d = blk.d;
            std::memcpy(dst[b].qs, v, 32);
        }
        return;
    default: throw std::invalid_argument("unpack_row_q8_0: " + std::string(dtype_name(type)) + " does not unpack to Q8_0");
    }
}

#if defined(__AVX2__)
// The AVX2 quantizers below give the scalar versions' bytes exactly: max and min are exact in any order
// (and skip a NaN as the scalar comparisons do), the products and roundings are the same IEEE operations.
// A decode step quantizes each matmul's input on one thread while the others wait; the scalar loops took
// about 4 cycles a value, a tenth of a K-type GEMV of 2048 x 2048.

// The largest |x| of x[0 .. 32 * k).
inline float max_abs(const float* x, int k) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4 * k; ++i) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * i), abs_mask), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

// 32 floats, already integers in [-127, 127], to bytes in order.
inline void store_i8x32(int8_t* dst, __m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256i ab = _mm256_packs_epi32(_mm256_cvtps_epi32(a), _mm256_cvtps_epi32(b));
    const __m256i cd = _mm256_packs_epi32(_mm256_cvtps_epi32(c), _mm256_cvtps_epi32(d));
    // packs works per 128-bit half: the dwords come out as a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
    const __m256i v = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), v);
}
#endif

// max |x[j]| over one 32-value activation block.
inline float max_abs32(const float* x) {
#if defined(__AVX2__)
    return max_abs(x, 1);
#else
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    return amax;
#endif
}

void quantize_activations_q8(const float* src, BlockQ8Act* dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* x = src + b * 32;
        const float amax = max_abs32(x);
        const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        // The scale rounded to F16, as llama.cpp's block_q8_0 stores it (q still from the F32 id): with an F32
        // scale kvscope sat 2e-3 to 4e-3 from llama.cpp's log-probabilities on test_llamacpp_xcheck's Q8_0
        // files, with it 4e-5 or less.
        dst[b].d = f16_to_f32(f32_to_f16(d));
        // Round to nearest even by the 1.5 * 2^23 trick (exact for |v| <= 127), with an explicit fma
        // so that no compiler contraction choice can change a rounding.
#if defined(__AVX2__)
        const __m256 vid = _mm256_set1_ps(id), magic = _mm256_set1_ps(12582912.0f);
        const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
        __m256 v[4];
        for (int i = 0; i < 4; ++i)
            v[i] = _mm256_max_ps(_mm256_min_ps(_mm256_sub_ps(_mm256_fmadd_ps(_mm256_loadu_ps(x + 8 * i), vid, magic), magic), hi), lo);
        store_i8x32(dst[b].qs, v[0], v[1], v[2], v[3]);
#else
        for (int j = 0; j < 32; ++j) {
            const float v = std::fma(x[j], id, 12582912.0f) - 12582912.0f;
            dst[b].qs[j] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
        }
#endif
    }
}

float activation_block_sum_q8_1(const float* x, const BlockQ8Act& q) {
    return f16_to_f32(f32_to_f16(max_abs32(x) / 127.0f * static_cast<float>(block_sum(q))));
}

void q8_1_sum_rounding(const float* x, int64_t K, double* c) {
    for (int64_t b = 0; b < K / 32; ++b) {
        BlockQ8Act q;
        quantize_activations_q8(x + b * 32, &q, 32);
        c[b] = static_cast<double>(activation_block_sum_q8_1(x + b * 32, q)) - static_cast<double>(q.d) * block_sum(q);
    }
}

float block_min(DType t, const void* row, int64_t b) {
    switch (t) {
    case DType::Q4_1: return f16_to_f32(static_cast<const BlockQ4_1*>(row)[b].m);
    case DType::Q5_1: return f16_to_f32(static_cast<const BlockQ5_1*>(row)[b].m);
    default: throw std::invalid_argument("block_min: " + std::string(dtype_name(t)) + " has no block mins");
    }
}

void quantize_activations_q8_k(const float* src, BlockQ8Act* dst, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b) {
        const float* x = src + b * 256;
        float m = 0;  // the value of largest magnitude, its sign kept (the first one on a tie)
#if defined(__AVX2__)
        if (const float amax = max_abs(x, 8); amax > 0) {
            const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), va = _mm256_set1_ps(amax);
            for (int j = 0;; j += 8)
                if (const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), va, _CMP_EQ_OQ))) {
                    m = x[j + __builtin_ctz(hit)];
                    break;
                }
        }
#else
        for (int j = 0; j < 256; ++j)
            if (std::fabs(x[j]) > std::fabs(m)) m = x[j];
#endif
        const float iscale = m != 0 ? -127.0f / m : 0.0f, d = m != 0 ? 1.0f / iscale : 0.0f;
        for (int g = 0; g < 8; ++g) {
            BlockQ8Act& out = dst[b * 8 + g];
            out.d = d;
            // The product rounded first, then to the nearest even integer (|q| <= 127: |x| <= |m|).
#if defined(__AVX2__)
            const __m256 vs = _mm256_set1_ps(iscale), hi = _mm256_set1_ps(127.0f);
            __m256 v[4];
            for (int i = 0; i < 4; ++i)
                v[i] = _mm256_min_ps(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * i), vs),
                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), hi);
            store_i8x32(out.qs, v[0], v[1], v[2], v[3]);
#else
            for (int j = 0; j < 32; ++j)
                out.qs[j] = static_cast<int8_t>(std::min(127.0f, std::nearbyint(x[32 * g + j] * iscale)));
#endif
        }
    }
}

void dequantized_activations(DType t, const float* src, float* dst, int64_t n) {
    const int64_t chunk = matmul_runs_k_int8(t) ? 256 : 32;  // the quantizer's unit: nothing allocated
    BlockQ8Act blocks[8];
    for (int64_t i = 0; i < n; i += chunk) {
        quantize_activations_for(t, src + i, blocks, chunk);
        for (int64_t k = 0; k < chunk; ++k) dst[i + k] = blocks[k / 32].d * blocks[k / 32].qs[k % 32];
    }
}

}  // namespace KVSCOPE_CPU_NAMESPACE
