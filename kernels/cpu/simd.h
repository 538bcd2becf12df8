// 16-lane F32 vectors through GCC/Clang vector extensions: one zmm register with AVX-512, two ymm with
// AVX2, and plain code elsewhere, from the same source. Loaders turn 16 stored weights into F32 lanes.
#pragma once

#include "dtype.h"

#include <cstdint>
#include <cstring>
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace kvscope::cpu {

typedef float v16f __attribute__((vector_size(64)));
typedef int8_t v16i8 __attribute__((vector_size(16)));
typedef uint16_t v16u16 __attribute__((vector_size(32)));
typedef uint32_t v16u32 __attribute__((vector_size(64)));

inline v16f load16(const float* p) {
    v16f v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store16(float* p, v16f v) { std::memcpy(p, &v, sizeof v); }
inline v16f splat16(float x) { return v16f{} + x; }
inline float hsum16(v16f v) {
#if defined(__AVX512F__)
    return _mm512_reduce_add_ps(reinterpret_cast<__m512>(v));
#else
    float s = 0;
    for (int i = 0; i < 16; ++i) s += v[i];
    return s;
#endif
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
#else
    v16f f;
    for (int i = 0; i < 16; ++i) f[i] = f16_to_f32(p[i]);
    return f;
#endif
}

inline v16f load16_i8(const int8_t* p) {
#if defined(__AVX512F__)
    // GCC 12 scalarizes __builtin_convertvector from int8 lanes: 7x slower Q8_0 decode.
    return reinterpret_cast<v16f>(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
#else
    v16i8 q;
    std::memcpy(&q, p, sizeof q);
    return __builtin_convertvector(q, v16f);
#endif
}

inline float f16_scale(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32(h);
#endif
}

}  // namespace kvscope::cpu
