// F32 vectors of the kernel set's native width through GCC/Clang vector extensions: vf is one register,
// kLanes floats: one zmm (16 lanes) with AVX-512, one ymm (8) with AVX/AVX2, one xmm (4) otherwise. Kernels
// are written over vf and kLanes, and size their register tiles from kVectorRegisters, so every set keeps
// its accumulators in registers (a 16-lane vector without AVX-512 was two or four registers that GCC kept
// on the stack, and tiles sized for 32 zmm overflowed the 16 ymm of AVX2). Loaders turn kLanes stored
// weights into F32 lanes.
#pragma once

#include "cpu/kernel_set.h"
#include "dtype.h"

#include <cstdint>
#include <cstring>
#include <utility>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

KVSCOPE_CPU_KERNEL_SET_ONLY("cpu/simd.h");

#if defined(__AVX512F__)
#define KVSCOPE_CPU_LANES 16
#elif defined(__AVX__)
#define KVSCOPE_CPU_LANES 8
#else
#define KVSCOPE_CPU_LANES 4
#endif

namespace KVSCOPE_CPU_NAMESPACE {

inline constexpr int kLanes = KVSCOPE_CPU_LANES;
// Vector registers of the set: zmm0-31 with AVX-512, ymm/xmm0-15 otherwise.
#if defined(__AVX512F__)
inline constexpr int kVectorRegisters = 32;
#else
inline constexpr int kVectorRegisters = 16;
#endif

typedef float vf __attribute__((vector_size(4 * KVSCOPE_CPU_LANES)));
typedef int32_t vi32 __attribute__((vector_size(4 * KVSCOPE_CPU_LANES)));
typedef uint32_t vu32 __attribute__((vector_size(4 * KVSCOPE_CPU_LANES)));
typedef uint16_t vu16 __attribute__((vector_size(2 * KVSCOPE_CPU_LANES)));

template <class To, class From>
inline To bit_cast_vector(From v) {
    static_assert(sizeof(To) == sizeof(From));
    To t;
    std::memcpy(&t, &v, sizeof t);
    return t;
}

inline vf loadv(const float* p) {
    vf v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void storev(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
// A broadcast (vf{} + x would add 0.0f first: an instruction per broadcast, and -0 becomes +0).
inline vf splatv(float x) {
#if defined(__AVX512F__)
    return reinterpret_cast<vf>(_mm512_set1_ps(x));
#elif KVSCOPE_CPU_LANES == 8
    return reinterpret_cast<vf>(_mm256_set1_ps(x));
#elif defined(__SSE2__)
    return reinterpret_cast<vf>(_mm_set1_ps(x));
#else
    return vf{} + x;
#endif
}
// a * b + c, fused wherever the set has FMA, unfused where it has none (baseline): never left to
// -ffp-contract. GCC's Zen tuning (avoid-fma-chains) left single-accumulator tiles unfused and wider ones
// fused, so a row's result depended on the batch it ran in (test_backend_ops, N = 33 on AVX2). The
// matmul tiles say so here; kernels/CMakeLists.txt also turns that tuning off for every other loop.
inline vf fmav(vf a, vf b, vf c) {
#if defined(__AVX512F__)
    return reinterpret_cast<vf>(_mm512_fmadd_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b),
                                                reinterpret_cast<__m512>(c)));
#elif KVSCOPE_CPU_LANES == 8 && defined(__FMA__)
    return reinterpret_cast<vf>(_mm256_fmadd_ps(reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b),
                                                reinterpret_cast<__m256>(c)));
#else
    return a * b + c;  // the set has no FMA instruction to contract to
#endif
}
// Pins v to a register, so GCC cannot fold the load that made it into each instruction that uses it (a
// memory operand each: as many loads as uses).
inline void keep_in_register(vf& v) {
#if defined(__AVX512F__)
    asm("" : "+v"(v));
#elif defined(__SSE2__)
    asm("" : "+x"(v));
#else
    (void)v;
#endif
}

// The horizontal sums of a set: one fixed tree, the halving one (lane i + lane i + W for W = kLanes / 2,
// ..., 1), for hsumv and for every lane set of hsum_lanes alike, so an output's sum never depends on how
// many others were reduced with it.
inline float hsumv(vf v) {
#if defined(__AVX512F__)
    return _mm512_reduce_add_ps(reinterpret_cast<__m512>(v));  // 256 + 256, 128 + 128, 64, 32: the same tree
#elif KVSCOPE_CPU_LANES == 8
    const __m256 x = reinterpret_cast<__m256>(v);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
#else
    const vf h = v + __builtin_shufflevector(v, v, 2, 3, 0, 1);
    return h[0] + h[1];
#endif
}

// out[j] = hsumv(acc[j]) for kLanes vectors at once: a transpose-and-add tree (kLanes - 1 two-shuffle
// steps instead of kLanes full horizontal sums). Each level halves the lane segment that holds one
// input's partial sum; feeding the inputs in bit-reversed order leaves the sums in natural lane order.
namespace detail {
// Level W of the tree: output lane i (segment s = i / W, offset j = i % W) adds lanes base and base + W
// of p (even s) or q (odd s), base = s / 2 * 2W + j.
constexpr int fold_index(int i, int W, bool high) {
    const int s = i / W, j = i % W;
    return (s % 2 ? kLanes : 0) + s / 2 * 2 * W + j + (high ? W : 0);
}
template <int W, size_t... I>
inline vf fold(vf p, vf q, std::index_sequence<I...>) {
    return __builtin_shufflevector(p, q, fold_index(I, W, false)...) +
           __builtin_shufflevector(p, q, fold_index(I, W, true)...);
}
constexpr int bit_reverse(int i) {
    int r = 0;
    for (int b = 1; b < kLanes; b <<= 1, i >>= 1) r = (r << 1) | (i & 1);
    return r;
}
template <int W>
inline void fold_level(vf* a, int count) {
    for (int i = 0; i < count / 2; ++i) a[i] = fold<W>(a[2 * i], a[2 * i + 1], std::make_index_sequence<kLanes>());
    if constexpr (W > 1) fold_level<W / 2>(a, count / 2);
}
}  // namespace detail

inline vf hsum_lanes(const vf* acc) {
    vf a[kLanes];
    for (int i = 0; i < kLanes; ++i) a[i] = acc[detail::bit_reverse(i)];
    detail::fold_level<kLanes / 2>(a, kLanes);
    return a[0];
}

// sums[t * NW + r] = the horizontal sum of acc[t][r]: a register tile's epilogue, kLanes accumulators at a
// time (hsum_lanes sums every lane set with the same tree, so a row's result does not depend on the tile
// shape it was computed in). sums holds MX * NW rounded up to a multiple of kLanes.
template <int MX, int NW>
inline constexpr int kTileSums = (MX * NW + kLanes - 1) / kLanes * kLanes;
template <int MX, int NW>
inline void tile_sums(const vf (&acc)[MX][NW], float (&sums)[kTileSums<MX, NW>]) {
    constexpr int kAcc = MX * NW, kPadded = kTileSums<MX, NW>;
    vf flat[kPadded];
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) flat[t * NW + r] = acc[t][r];
    for (int i = kAcc; i < kPadded; ++i) flat[i] = vf{};
    for (int i = 0; i < kPadded; i += kLanes) storev(sums + i, hsum_lanes(flat + i));
}

// exp(x) of each lane: x = n ln2 + r with |r| <= ln2/2, a degree-6 Taylor polynomial for exp(r)
// (relative error below 2e-7) and 2^n put into the exponent. x is clamped to [-87, 88], the normal range:
// exp(-87) is negligible beside softmax's max term exp(0) = 1, and silu's x / (1 + exp(88)) is 0 as well.
inline vf expv(vf x) {
    x = x < -87.0f ? splatv(-87.0f) : x;
    x = x > 88.0f ? splatv(88.0f) : x;
    const vf n = (x * 1.44269504089f + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23 trick)
    const vf r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
    vf p = splatv(1.0f / 720);
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const vi32 e = (__builtin_convertvector(n, vi32) + 127) << 23;
    return p * bit_cast_vector<vf>(e);
}

inline vf loadv_bf16(const uint16_t* p) {
    vu16 h;
    std::memcpy(&h, p, sizeof h);
    return bit_cast_vector<vf>(__builtin_convertvector(h, vu32) << 16);
}

// kLanes F16 values widened exactly as f16_to_f32 does: F16C or AVX-512 where the set has it; else
// integer lane arithmetic with no select and no subnormal F32 operand: the exponent rebiased, zero and
// subnormal halves renormalized by one exact F32 subtraction (x * 2^-24 = (2^-14 + x * 2^-24) - 2^-14),
// Inf/NaN given the F32 all-ones exponent.
inline vf loadv_f16(const uint16_t* p) {
#if defined(__AVX512F__)
    return reinterpret_cast<vf>(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#elif defined(__F16C__) && KVSCOPE_CPU_LANES == 8
    return reinterpret_cast<vf>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
    vi32 h;
#if defined(__SSE4_1__) && KVSCOPE_CPU_LANES == 4
    h = reinterpret_cast<vi32>(_mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
    vu16 h16;
    std::memcpy(&h16, p, sizeof h16);
    h = __builtin_convertvector(h16, vi32);
#endif
    const vi32 magnitude = h & 0x7fff;
    const vi32 subnormal = (magnitude & 0x7c00) == 0;  // all ones where the exponent is 0
    const vi32 bits = (magnitude << 13) + ((127 - 15) << 23) + (subnormal & (1 << 23));
    const vf f = bit_cast_vector<vf>(bits) - bit_cast_vector<vf>(subnormal & (113 << 23));  // - 2^-14 or - 0
    const vi32 inf_nan = (magnitude > 0x7bff) & 0x7f800000;
    return bit_cast_vector<vf>(bit_cast_vector<vi32>(f) | inf_nan | ((h & 0x8000) << 16));
#endif
}

// kLanes values stored as F16 with f32_to_f16's rounding (nearest even, gradual underflow, overflow to Inf):
// the hardware's conversion where the set has one (a NaN keeps its payload's top bits there, where
// f32_to_f16 makes every NaN 0x7e00), else f32_to_f16 per lane.
inline void storev_f16(uint16_t* p, vf v) {
#if defined(__AVX512F__)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(reinterpret_cast<__m512>(v), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__) && KVSCOPE_CPU_LANES == 8
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(reinterpret_cast<__m256>(v), _MM_FROUND_TO_NEAREST_INT));
#else
    for (int l = 0; l < kLanes; ++l) p[l] = f32_to_f16(v[l]);
#endif
}

// kLanes values stored as BF16, bit for bit as f32_to_bf16 (nearest even; a NaN stays a quiet NaN).
inline void storev_bf16(uint16_t* p, vf v) {
    const vu32 bits = bit_cast_vector<vu32>(v);
    const vu32 rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    const vu32 nan = bit_cast_vector<vu32>((bits & 0x7fffffffu) > 0x7f800000u);  // all ones where NaN
    const vu16 h = __builtin_convertvector((rounded & ~nan) | (((bits >> 16) | 0x40u) & nan), vu16);
    std::memcpy(p, &h, sizeof h);
}

inline float f16_scale(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32(h);
#endif
}

// Calls fn(std::integral_constant<int, m>{}) for a runtime m in [1, Max]: picks a register tile's
// compile-time shape from a runtime remainder.
template <int Max, class Fn>
inline void with_constant(int m, Fn&& fn) {
    [&]<int... I>(std::integer_sequence<int, I...>) {
        (void)((m == I + 1 ? (fn(std::integral_constant<int, I + 1>{}), true) : false) || ...);
    }(std::make_integer_sequence<int, Max>());
}

}  // namespace KVSCOPE_CPU_NAMESPACE
