// 16-lane F32 vectors through GCC/Clang vector extensions: one zmm register with AVX-512, two ymm with
// AVX2, and plain code elsewhere, from the same source. Loaders turn 16 stored weights into F32 lanes.
#pragma once

#include "cpu/kernel_set.h"
#include "dtype.h"

#include <cstdint>
#include <cstring>
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

KVSCOPE_CPU_KERNEL_SET_ONLY("cpu/simd.h");

namespace KVSCOPE_CPU_NAMESPACE {

typedef float v16f __attribute__((vector_size(64)));
typedef uint16_t v16u16 __attribute__((vector_size(32)));
typedef uint32_t v16u32 __attribute__((vector_size(64)));
typedef int32_t v16i32 __attribute__((vector_size(64)));

inline v16f load16(const float* p) {
    v16f v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store16(float* p, v16f v) { std::memcpy(p, &v, sizeof v); }
inline v16f splat16(float x) { return v16f{} + x; }
// Pins v to a register, so GCC cannot fold the load that made it into each instruction that uses it (a
// memory operand each: as many loads as uses). Only where a v16f fits one register.
inline void keep_in_register(v16f& v) {
#if defined(__AVX512F__)
    asm("" : "+v"(v));
#else
    (void)v;
#endif
}
inline float hsum16(v16f v) {
#if defined(__AVX512F__)
    return _mm512_reduce_add_ps(reinterpret_cast<__m512>(v));
#else
    float s = 0;
    for (int i = 0; i < 16; ++i) s += v[i];
    return s;
#endif
}

// out[j] = hsum16(acc[j]) for 16 vectors at once: a transpose-and-add tree (15 two-shuffle steps
// instead of 16 full horizontal sums). Each level halves the lane segment that holds one input's partial
// sum; feeding the inputs in bit-reversed order leaves the sums in natural lane order.
namespace detail {
template <int W>
inline v16f fold(v16f p, v16f q) {
    if constexpr (W == 8)
        return __builtin_shufflevector(p, q, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
               __builtin_shufflevector(p, q, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    else if constexpr (W == 4)
        return __builtin_shufflevector(p, q, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) +
               __builtin_shufflevector(p, q, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    else if constexpr (W == 2)
        return __builtin_shufflevector(p, q, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) +
               __builtin_shufflevector(p, q, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    else
        return __builtin_shufflevector(p, q, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) +
               __builtin_shufflevector(p, q, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
}
}  // namespace detail

inline v16f hsum16x16(const v16f* acc) {
    constexpr int rev[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
    v16f a[8], b[4], c[2];
    for (int i = 0; i < 8; ++i) a[i] = detail::fold<8>(acc[rev[2 * i]], acc[rev[2 * i + 1]]);
    for (int i = 0; i < 4; ++i) b[i] = detail::fold<4>(a[2 * i], a[2 * i + 1]);
    for (int i = 0; i < 2; ++i) c[i] = detail::fold<2>(b[2 * i], b[2 * i + 1]);
    return detail::fold<1>(c[0], c[1]);
}

// exp(x) of 16 lanes: x = n ln2 + r with |r| <= ln2/2, a degree-6 Taylor polynomial for exp(r)
// (relative error below 2e-7) and 2^n put into the exponent. x is clamped to [-87, 88], the normal range:
// exp(-87) is negligible beside softmax's max term exp(0) = 1, and silu's x / (1 + exp(88)) is 0 as well.
inline v16f exp16(v16f x) {
    x = x < -87.0f ? splat16(-87.0f) : x;
    x = x > 88.0f ? splat16(88.0f) : x;
    const v16f n = (x * 1.44269504089f + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23 trick)
    const v16f r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
    v16f p = splat16(1.0f / 720);
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const v16i32 e = (__builtin_convertvector(n, v16i32) + 127) << 23;
    v16f scale;
    std::memcpy(&scale, &e, sizeof scale);
    return p * scale;
}

inline v16f load16_bf16(const uint16_t* p) {
    v16u16 h;
    std::memcpy(&h, p, sizeof h);
    v16u32 w = __builtin_convertvector(h, v16u32) << 16;
    v16f f;
    std::memcpy(&f, &w, sizeof f);
    return f;
}

inline v16f load16_f16(const uint16_t* p) {
#if defined(__AVX512F__)
    return reinterpret_cast<v16f>(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#elif defined(__F16C__)
    const __m256 lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256 hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
    v16f f;
    std::memcpy(&f, &lo, sizeof lo);
    std::memcpy(reinterpret_cast<char*>(&f) + sizeof lo, &hi, sizeof hi);
    return f;
#else
    v16f f;
    for (int i = 0; i < 16; ++i) f[i] = f16_to_f32(p[i]);
    return f;
#endif
}

inline float f16_scale(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32(h);
#endif
}

}  // namespace KVSCOPE_CPU_NAMESPACE
