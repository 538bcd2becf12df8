// The blocks that unpack to Q8_0 (quant.h unpacks_to_q8_0: Q8_0, Q4_0, Q5_0, IQ4_NL) as their 32 int8 values
// in one AVX2 register, a block at a time: unpack_row_q8_0 stores them for the prefill tiles, and the
// single-row decode tile of matmul_q8.cpp reads them straight from the weights, so both see the same bytes.
// Also Q4_1 and Q5_1's q (their mins apart), which the AVX2 tile reads in place at every batch size.
#pragma once

#include "cpu/kernel_set.h"
#include "dtype.h"

#include <cstdint>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>

namespace KVSCOPE_CPU_NAMESPACE {

// The 32 nibbles of a 16-byte block in value order (low nibbles, then high nibbles) as bytes 0..15.
inline __m256i nibbles_avx2(const uint8_t* qs) {
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
}
// Byte i = 0x10 where bit i of the u32 qh is set, else 0.
inline __m256i fifth_bits_avx2(const uint8_t* qh) {
    uint32_t h;
    std::memcpy(&h, qh, 4);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)),
                                              _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                                                 0x0303030303030303ll));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(0x10));
}

// Q4_0 and Q5_0 store value + kQ8Offset as unsigned bits (q8_stored): a dot can take those as pmaddubsw's
// unsigned operand and subtract kQ8Offset * (sums of x), cheaper than signing both operands. Q4_1 and Q5_1
// store q itself (offset 0) and add their min apart (kQ8Mins: quant.h has_block_mins).
template <class Block>
constexpr bool kQ8Unsigned = false;
template <class Block>
constexpr int kQ8Offset = 0;
template <class Block>
constexpr bool kQ8Mins = false;
template <>
constexpr bool kQ8Unsigned<BlockQ4_0> = true;
template <>
constexpr bool kQ8Unsigned<BlockQ5_0> = true;
template <>
constexpr bool kQ8Unsigned<BlockQ4_1> = true;
template <>
constexpr bool kQ8Unsigned<BlockQ5_1> = true;
template <>
constexpr int kQ8Offset<BlockQ4_0> = 8;
template <>
constexpr int kQ8Offset<BlockQ5_0> = 16;
template <>
constexpr bool kQ8Mins<BlockQ4_1> = true;
template <>
constexpr bool kQ8Mins<BlockQ5_1> = true;
inline __m256i q8_stored(const BlockQ4_0& b) { return nibbles_avx2(b.qs); }
inline __m256i q8_stored(const BlockQ5_0& b) { return _mm256_or_si256(nibbles_avx2(b.qs), fifth_bits_avx2(b.qh)); }
inline __m256i q8_stored(const BlockQ4_1& b) { return nibbles_avx2(b.qs); }
inline __m256i q8_stored(const BlockQ5_1& b) { return _mm256_or_si256(nibbles_avx2(b.qs), fifth_bits_avx2(b.qh)); }

// A block's 32 values as int8: exactly dequantize_row's value / d.
inline __m256i q8_values(const BlockQ8_0& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
inline __m256i q8_values(const BlockQ4_0& b) { return _mm256_sub_epi8(q8_stored(b), _mm256_set1_epi8(8)); }
inline __m256i q8_values(const BlockQ5_0& b) { return _mm256_sub_epi8(q8_stored(b), _mm256_set1_epi8(16)); }
// The IQ4_NL / IQ4_XS level (kIq4nlValues) of each byte's low 4 bits (bytes 0..15).
inline __m256i iq4nl_levels(__m256i nibbles) {
    const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    return _mm256_shuffle_epi8(levels, nibbles);
}
inline __m256i q8_values(const BlockIQ4_NL& b) { return iq4nl_levels(nibbles_avx2(b.qs)); }

}  // namespace KVSCOPE_CPU_NAMESPACE

#endif
