#include "cpu/matmul_x8.h"

#include "cpu/q8_values.h"
#include "cpu/tile_tasks.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace KVSCOPE_CPU_NAMESPACE {

#if defined(__AVX2__)

namespace {

constexpr int kRows = 8;

// Block b of 8 rows: the same bytes as their 8 BlockQ4_K / BlockQ5_K, rearranged. A row's qs[32p + i]
// holds value i of group 2p (low nibble) and of group 2p + 1 (high nibble), so after the nibbles are
// split, qs[p][c] gives values 4c .. 4c + 3 of groups 2p and 2p + 1 for the 8 rows. Q5_K's fifth bits:
// bit j of qh[i] belongs to value i of group j, so qh[c] serves chunk c of every group.
struct BlockQ4_Kx8 {
    uint16_t d[kRows], dmin[kRows];
    uint8_t scales[12][kRows];    // byte k of row r's 12 packed scale and min bytes at [k][r]
    uint8_t qs[4][8][kRows][4];  // [pair p][chunk c][row r]: row r's qs[32p + 4c .. 32p + 4c + 3]
};
static_assert(sizeof(BlockQ4_Kx8) == kRows * sizeof(BlockQ4_K));

struct BlockQ5_Kx8 {
    uint16_t d[kRows], dmin[kRows];
    uint8_t scales[12][kRows];
    uint8_t qh[8][kRows][4];     // [chunk c][row r]: row r's qh[4c .. 4c + 3]
    uint8_t qs[4][8][kRows][4];
};
static_assert(sizeof(BlockQ5_Kx8) == kRows * sizeof(BlockQ5_K));

// Block b of 8 Q6_K rows, in the order the kernel reads them: q[h][c % 4][k][c / 4][r] holds row r's values
// 4c .. 4c + 3 of group 4h + k (dequantize_q6_k's walk: group j = 4 * half + quarter, value i takes its low 4
// bits from ql[64 * half + 32 * (quarter % 2) + i], nibble quarter / 2, and its high 2 from bits 2 * quarter of
// qh[32 * half + i]) whole in bits 0-5, and bits 2k, 2k + 1 of group 4h + 3's value in bits 6-7: the same
// 24 bits per 4 values as ql and qh (pack_row_q6k). So one chunk's 96 bytes give values 4c .. 4c + 3 of the
// half's 4 groups, three of them with one mask; chunks i and i + 4 of a group lie side by side, so that a
// 64-byte load takes both (the VNNI decode; two 32-byte loads and an insert took 4% of its time) and its lanes
// 0-7 and 8-15 hold the group's two sub-blocks of 16 (one vpmulld by both scales, which lie side by side too).
// scales[s][r] is row r's scale of values 16s .. 16s + 15.
struct BlockQ6_Kx8 {
    uint16_t d[kRows];
    int8_t scales[16][kRows];
    uint8_t q[2][4][3][2][kRows][4];  // [half h][chunk c % 4][group 4h + k, k < 3][chunk c / 4][row r]
};
static_assert(sizeof(BlockQ6_Kx8) == kRows * sizeof(BlockQ6_K));

// Block b of 8 IQ4_XS rows: qs[s][c][r] is row r's qs[16s + 4c .. 16s + 4c + 3] (sub-block s: its low nibbles
// values 4c .. 4c + 3, high nibbles 16 + 4c ..., as IQ4_NL's blocks), scales_l[k][r] its scales_l[k] (the low 4
// bits of sub-blocks 2k and 2k + 1's scales), scales_h[t][r] byte t of its scales_h (the top 2 bits of
// sub-blocks 4t .. 4t + 3's, 2 bits each).
struct BlockIQ4_XSx8 {
    uint16_t d[kRows];
    uint8_t scales_l[4][kRows];
    uint8_t scales_h[2][kRows];
    uint8_t qs[8][4][kRows][4];  // [sub-block s][chunk c][row r][byte]
};
static_assert(sizeof(BlockIQ4_XSx8) == kRows * sizeof(BlockIQ4_XS));

// Block b of 8 Q2_K rows: scales[s][r] is row r's byte s (scale of values 16s .. 16s + 15 in the low nibble,
// min in the high), and values 32j .. 32j + 31 (activation block j) come from two 4-byte planes q[j][0..1][r]:
// bits 2i, 2i + 1 of byte k of plane p hold value 4c + k of chunk c = 4p + i of the set (pack_row_q2k).
struct BlockQ2_Kx8 {
    uint16_t d[kRows], dmin[kRows];
    uint8_t scales[16][kRows];
    uint8_t q[8][2][kRows][4];  // [activation block j][plane][row r][byte k]
};
static_assert(sizeof(BlockQ2_Kx8) == kRows * sizeof(BlockQ2_K));

// Block b of 8 Q3_K rows. Row r's value v as unsigned u = low 2 bits + 4 * high bit (0 .. 7; the value is
// u - 4), three bits per value as in BlockQ3_K, arranged so that values 32j .. 32j + 31 (activation block j:
// sub-blocks 2j and 2j + 1) come from three 4-byte planes q[j][0..2][r]: byte k of the planes holds value
// 4c + k of chunks c = 0 .. 7 of the set, chunks 0 / 1 in bits 0-2 / 3-5 of plane 0, 2 / 3 of plane 1, 4 / 5 of
// plane 2, chunk 6 in bits 6-7 of plane 0 and bit 6 of plane 1, chunk 7 in bit 7 of plane 1 and bits 6-7 of
// plane 2 (pack_row_q3k). Six chunks then take at most a shift and a mask. scales: the 12 packed scale bytes,
// byte k of row r at [k][r].
struct BlockQ3_Kx8 {
    uint16_t d[kRows];
    uint8_t scales[12][kRows];
    uint8_t q[8][3][kRows][4];  // [activation block j][plane][row r][byte k]
};
static_assert(sizeof(BlockQ3_Kx8) == kRows * sizeof(BlockQ3_K));

// Block b (32 values) of 8 Q4_0 rows, the same bytes rearranged: qs[c][r] is row r's qs[4c .. 4c + 3], whose
// low nibbles are values 4c .. 4c + 3 and high nibbles values 16 + 4c .. 16 + 4c + 3.
struct BlockQ4_0x8 {
    uint16_t d[kRows];
    uint8_t qs[4][kRows][4];
};
static_assert(sizeof(BlockQ4_0x8) == kRows * sizeof(BlockQ4_0));
// IQ4_NL's blocks have Q4_0's layout (its nibbles index kIq4nlValues): packed the same way.
struct BlockIQ4_NLx8 : BlockQ4_0x8 {};
static_assert(sizeof(BlockIQ4_NL) == sizeof(BlockQ4_0) && sizeof(BlockIQ4_NLx8) == sizeof(BlockQ4_0x8));

// Block b of 8 Q5_0 rows: qs[c][r] is row r's qs[4c .. 4c + 3] as Q4_0's; qh[r] its fifth bits transposed,
// bit m of byte k value 4m + k's (q5_0_fifth_bits), so that one shift and mask puts chunk m's at bit 4 of the
// bytes that multiply values 4m .. 4m + 3.
struct BlockQ5_0x8 {
    uint16_t d[kRows];
    uint8_t qh[kRows][4];
    uint8_t qs[4][kRows][4];
};
static_assert(sizeof(BlockQ5_0x8) == kRows * sizeof(BlockQ5_0));

// Q4_1 and Q5_1: Q4_0 and Q5_0's layouts with each row's min m beside d.
struct BlockQ4_1x8 {
    uint16_t d[kRows], m[kRows];
    uint8_t qs[4][kRows][4];
};
static_assert(sizeof(BlockQ4_1x8) == kRows * sizeof(BlockQ4_1));
struct BlockQ5_1x8 {
    uint16_t d[kRows], m[kRows];
    uint8_t qh[kRows][4];
    uint8_t qs[4][kRows][4];
};
static_assert(sizeof(BlockQ5_1x8) == kRows * sizeof(BlockQ5_1));

// Block b of 8 Q8_0 rows: qs[c][r] is row r's qs[4c .. 4c + 3].
struct BlockQ8_0x8 {
    uint16_t d[kRows];
    int8_t qs[8][kRows][4];
};
static_assert(sizeof(BlockQ8_0x8) == kRows * sizeof(BlockQ8_0));

// Per packed block: how many values it holds, and what it is dotted with beside the activation blocks
// (BlockQ8Act): the K types a block of 256 against 8 of them and their ActSumsQ8, the 32-value types one
// and its sum(q_x) (Q4_0, Q5_0: their offsets), d_x * sum(q_x) (Q4_1, Q5_1: their mins) or nothing (IQ4_NL,
// Q8_0: NoSums, whose pointer is null and never indexed).
struct NoSums {};
template <class S>
S sums_at(const S* xs, int64_t b) {
    return xs[b];
}
inline NoSums sums_at(const NoSums*, int64_t) { return {}; }
template <class S>
const S* advance(const S* xs, int64_t k) {
    return xs + k;
}
inline const NoSums* advance(const NoSums* xs, int64_t) { return xs; }

template <class Block>
struct X8Traits {
    static constexpr int kValues = 256;
    using Sums = ActSumsQ8;
};
template <class S>
struct X8Traits32 {
    static constexpr int kValues = 32;
    using Sums = S;
};
template <>
struct X8Traits<BlockQ4_0x8> : X8Traits32<int32_t> {};
template <>
struct X8Traits<BlockQ5_0x8> : X8Traits32<int32_t> {};
template <>
struct X8Traits<BlockIQ4_NLx8> : X8Traits32<NoSums> {};
template <>
struct X8Traits<BlockQ8_0x8> : X8Traits32<NoSums> {};
// Q4_1 / Q5_1: against d_x * sum(q_x) per activation block, which their mins multiply.
template <>
struct X8Traits<BlockQ4_1x8> : X8Traits32<float> {};
template <>
struct X8Traits<BlockQ5_1x8> : X8Traits32<float> {};

// pshufb indices over 16 bytes [group a: rows 0-7][group b: rows 0-7] present in both 128-bit halves
// (rows 0-3 come out of the low half, 4-7 of the high): spread[0] puts group a's byte of row r in both
// words of dword r (the scale pmaddwd multiplies each int16 pair sum by), spread[1] group b's; pair puts
// a's in word 0 and b's in word 1 (the mins, against the pair of x sums). The signed forms put the bytes in
// the words' high bytes instead, so that one arithmetic shift right by 8 sign-extends them (int8 scales).
struct Indices {
    alignas(32) int8_t spread[2][32];
    alignas(32) int8_t pair[32];
    alignas(32) int8_t spread_signed[32];
    alignas(32) int8_t pair_signed[32];
    constexpr Indices() : spread{}, pair{}, spread_signed{}, pair_signed{} {
        for (int i = 0; i < 32; ++i) {
            const int r = i / 4, byte = i % 4;  // dword r (row r; the high half's indices address its own copy)
            for (int g = 0; g < 2; ++g) spread[g][i] = static_cast<int8_t>(byte % 2 ? -1 : 8 * g + r);
            pair[i] = static_cast<int8_t>(byte % 2 ? -1 : 8 * (byte / 2) + r);
            spread_signed[i] = static_cast<int8_t>(byte % 2 ? r : -1);
            pair_signed[i] = static_cast<int8_t>(byte % 2 ? 8 * (byte / 2) + r : -1);
        }
    }
};
inline constexpr Indices kIndices{};

inline __m256i load32(const void* p) { return _mm256_load_si256(static_cast<const __m256i*>(p)); }
inline __m256i loadu32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i broadcast_i32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// The 128-bit half h of v in both halves.
inline __m256i both_halves(__m256i v, int h) {
    return h ? _mm256_permute4x64_epi64(v, 0xEE) : _mm256_permute4x64_epi64(v, 0x44);
}

// Bit J of each byte of v at bit 4, the other bits zero.
template <int J>
inline __m256i bit_at_4(__m256i v) {
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    if constexpr (J <= 4)
        return _mm256_and_si256(_mm256_slli_epi16(v, 4 - J), bit4);
    else
        return _mm256_and_si256(_mm256_srli_epi16(v, J - 4), bit4);
}

// acc (lane r: row r) += (isum converted to F32) * d_w * d_x, d_w the 8 rows' F16 scales.
inline void add_scaled(__m256i isum, const uint16_t (&d)[kRows], float dx, __m256& acc) {
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc);
}

// The 6-bit scales of groups 2P and 2P + 1 of a block's 8 rows, bytes [group][row] in both halves
// (q4k_scale_min on 8 rows at once): group j < 4 the low 6 bits of byte j; j >= 4 the low nibble of byte
// j + 4 and the top 2 bits of byte j - 4. The mins (accumulate) the same from bytes j + 4, j + 4's high
// nibble and j.
template <int P, class Block>
inline __m256i pair_scales(const Block& blk) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), low6 = _mm256_set1_epi8(0x3F), bits45 = _mm256_set1_epi8(0x30);
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.scales[0]));
    if constexpr (P < 2) return both_halves(_mm256_and_si256(v0, low6), P % 2);
    const __m256i v2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.scales[8]));
    return both_halves(_mm256_or_si256(_mm256_and_si256(v2, low4), _mm256_and_si256(_mm256_srli_epi16(v0, 2), bits45)), P % 2);
}

// Groups 2P and 2P + 1 of blocks blk[0 .. G) (8 rows each) against xb[0 .. R) (the blocks' 8 BlockQ8Act of R
// activation rows): per row the exact int32 sums of (value * q_x), in int16 over at most kChunks chunks of 4
// at a time, times the groups' scales, into isum[g][r]. Decode (R = 1): each x broadcast serves the G blocks.
// Prefill (G = 1): each block's values, decoded once, serve the R activation rows. A row's sums do not
// depend on G or R (integers, exact).
template <int P, int G, int R, class Block>
inline void accumulate_pair(const Block* const* blk, const BlockQ8Act* const* xb, __m256i (&isum)[G][R]) {
    constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_Kx8>;
    constexpr int kChunks = kFifthBit ? 4 : 8;  // pmaddubsw pairs of 2 * 31 * 127 (2 * 15 * 127): below 2^15
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int c0 = 0; c0 < 8; c0 += kChunks) {
        __m256i sum_a[G][R], sum_b[G][R];
        for (int g = 0; g < G; ++g)
            for (int r = 0; r < R; ++r) sum_a[g][r] = sum_b[g][r] = _mm256_setzero_si256();
        for (int c = c0; c < c0 + kChunks; ++c) {
            auto x_a = [&](int r) { return broadcast_i32(xb[r][2 * P].qs + 4 * c); };
            auto x_b = [&](int r) { return broadcast_i32(xb[r][2 * P + 1].qs + 4 * c); };
            // One row: its broadcasts loaded once for the G blocks. Several: each where it is used, so that
            // no more than one is live (2R of them would not fit in the registers beside the sums).
            __m256i xa0, xb0;
            if constexpr (R == 1) xa0 = x_a(0), xb0 = x_b(0);
            for (int g = 0; g < G; ++g) {
                const __m256i q = load32(blk[g]->qs[P][c]);
                __m256i a = _mm256_and_si256(q, low4), b = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                if constexpr (kFifthBit) {  // bits 2P and 2P + 1 of qh to bit 4
                    const __m256i h = load32(blk[g]->qh[c]);
                    a = _mm256_or_si256(a, bit_at_4<2 * P>(h));
                    b = _mm256_or_si256(b, bit_at_4<2 * P + 1>(h));
                }
                for (int r = 0; r < R; ++r) {
                    sum_a[g][r] = _mm256_add_epi16(sum_a[g][r], _mm256_maddubs_epi16(a, R == 1 ? xa0 : x_a(r)));
                    sum_b[g][r] = _mm256_add_epi16(sum_b[g][r], _mm256_maddubs_epi16(b, R == 1 ? xb0 : x_b(r)));
                    // Pinned in order: otherwise GCC computes every product of the pair first and spills them
                    // to sum them as a tree (Q4_K 14.5 -> 12.3 cycles per 256 weights in L1).
                    asm("" : "+x"(sum_a[g][r]), "+x"(sum_b[g][r]));
                }
            }
        }
        for (int g = 0; g < G; ++g) {
            const __m256i sc = pair_scales<P>(*blk[g]);
            const __m256i sc_a = _mm256_shuffle_epi8(sc, load32(kIndices.spread[0]));
            const __m256i sc_b = _mm256_shuffle_epi8(sc, load32(kIndices.spread[1]));
            for (int r = 0; r < R; ++r) {
                isum[g][r] = _mm256_add_epi32(isum[g][r], _mm256_madd_epi16(sum_a[g][r], sc_a));
                isum[g][r] = _mm256_add_epi32(isum[g][r], _mm256_madd_epi16(sum_b[g][r], sc_b));
                asm("" : "+x"(isum[g][r]));  // likewise
            }
        }
    }
}

// Q4_K / Q5_K blocks blk[0 .. G) with their groups' scaled sums isum[g][r] (exact int32): the mins against the
// groups' sums of q_x, then acc[g][r] += isum * d_w * d_x - msum * dmin_w * d_x, in that order.
template <int G, int R, class Block>
inline void finish_k4(const Block* const* blk, const BlockQ8Act* const* xb, const ActSumsQ8* const* s, const __m256i (&isum)[G][R],
                      __m256 (&acc)[G][R]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), low6 = _mm256_set1_epi8(0x3F), bits45 = _mm256_set1_epi8(0x30);
    // The mins against the groups' sums of q_x, a pair of groups per pmaddwd.
    const __m256i pair = load32(kIndices.pair);
    for (int g = 0; g < G; ++g) {
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[g]->scales[4]));
        const __m256i v2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[g]->scales[8]));
        const __m256i m_lo = _mm256_and_si256(v1, low6);
        const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v2, 4), low4),
                                             _mm256_and_si256(_mm256_srli_epi16(v1, 2), bits45));
        __m256i msum[R];
        for (int r = 0; r < R; ++r) msum[r] = _mm256_setzero_si256();
        for (int p = 0; p < 4; ++p) {
            const __m256i m = _mm256_shuffle_epi8(both_halves(p < 2 ? m_lo : m_hi, p % 2), pair);
            for (int r = 0; r < R; ++r) msum[r] = _mm256_add_epi32(msum[r], _mm256_madd_epi16(m, broadcast_i32(s[r]->isum + 2 * p)));
        }
        const __m256 dmin = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(blk[g]->dmin)));
        for (int r = 0; r < R; ++r) {
            add_scaled(isum[g][r], blk[g]->d, xb[r][0].d, acc[g][r]);
            acc[g][r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[r]), _mm256_mul_ps(dmin, _mm256_set1_ps(xb[r][0].d)), acc[g][r]);
        }
    }
}

// Blocks blk[0 .. G) of 8 rows each (Q4_K or Q5_K) against R activation rows (xb[r], its sums s[r]), into
// acc[g][r]: each row's floats in the same order whatever G and R are.
template <int G, int R, class Block>
inline void accumulate(const Block* const* blk, const BlockQ8Act* const* xb, const ActSumsQ8* const* s, __m256 (&acc)[G][R]) {
    __m256i isum[G][R];
    for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) isum[g][r] = _mm256_setzero_si256();
    accumulate_pair<0>(blk, xb, isum);
    accumulate_pair<1>(blk, xb, isum);
    accumulate_pair<2>(blk, xb, isum);
    accumulate_pair<3>(blk, xb, isum);
    finish_k4(blk, xb, s, isum, acc);
}

// Sub-block s's scale of a block's 8 rows (Q6_K, Q3_K: sc[s][r], int8) as int16 in both words of dword r (row
// r): what pmaddwd multiplies each int16 pair sum by. And the offset sum of a block: sum over its 16
// sub-blocks of scale * sum(q_x) (ActSumsQ8::isum16), a pair of sub-blocks per pmaddwd, exact in int32.
inline __m256i scale_words(const int8_t* row_scales) {
    int64_t v;
    std::memcpy(&v, row_scales, 8);
    return _mm256_srai_epi16(_mm256_shuffle_epi8(_mm256_set1_epi64x(v), load32(kIndices.spread_signed)), 8);
}
inline __m256i scale_words(const int8_t (&sc)[16][kRows], int s) { return scale_words(sc[s]); }
// For R activation rows at once (osum[r] against s[r]): each pair's words widened once.
template <int R>
inline void scaled_isum16(const int8_t (&sc)[16][kRows], const ActSumsQ8* const* s, __m256i (&osum)[R]) {
    for (int r = 0; r < R; ++r) osum[r] = _mm256_setzero_si256();
    for (int p = 0; p < 8; ++p) {
        const __m256i ab = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc[2 * p])));
        const __m256i words = _mm256_srai_epi16(_mm256_shuffle_epi8(ab, load32(kIndices.pair_signed)), 8);  // row r: (s_2p, s_2p+1)
        for (int r = 0; r < R; ++r) osum[r] = _mm256_add_epi32(osum[r], _mm256_madd_epi16(words, broadcast_i32(s[r]->isum16 + 2 * p)));
    }
}
inline __m256i scaled_isum16(const int8_t (&sc)[16][kRows], const ActSumsQ8& s) {
    const ActSumsQ8* const one[1] = {&s};
    __m256i osum[1];
    scaled_isum16(sc, one, osum);
    return osum[0];
}

// Half H of Q6_K blocks blk[0 .. G) (groups 4H .. 4H + 3) against the activation blocks xh[r][0 .. 4) of R
// rows: per row and sub-block of 16 the stored values' dot with q_x (pmaddubsw pairs of at most 2 * 63 * 127)
// times the sub-block's scale, into isum[g][r]. As accumulate_pair: decode's x broadcasts serve the G blocks,
// prefill's decoded values the R rows.
template <int H, int G, int R>
inline void q6k_half(const BlockQ6_Kx8* const* blk, const BlockQ8Act* const* xh, __m256i (&isum)[G][R]) {
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int c0 = 0; c0 < 8; c0 += 4) {  // sub-blocks 2j + c0 / 4 of the half's groups j
        __m256i sc[4][G];
        for (int q = 0; q < 4; ++q)
            for (int g = 0; g < G; ++g) sc[q][g] = scale_words(blk[g]->scales, 2 * (4 * H + q) + c0 / 4);
        for (int c = c0; c < c0 + 4; ++c) {
            auto x_at = [&](int r, int q) { return broadcast_i32(xh[r][q].qs + 4 * c); };
            __m256i x0[4];
            if constexpr (R == 1)
                for (int q = 0; q < 4; ++q) x0[q] = x_at(0, q);
            for (int g = 0; g < G; ++g) {
                const auto& qc = blk[g]->q[H][c % 4];
                const __m256i a = loadu32(qc[0][c / 4]), b = loadu32(qc[1][c / 4]), e = loadu32(qc[2][c / 4]);
                const __m256i low6 = _mm256_set1_epi8(0x3F);
                const __m256i v[4] = {  // three values whole, the fourth from the three top bit pairs
                    _mm256_and_si256(a, low6), _mm256_and_si256(b, low6), _mm256_and_si256(e, low6),
                    _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 6), _mm256_set1_epi8(0x03)),
                                                    _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi8(0x0C))),
                                    _mm256_and_si256(_mm256_srli_epi16(e, 2), bits45))};
                for (int r = 0; r < R; ++r)
                    for (int q = 0; q < 4; ++q) {
                        const __m256i prod = _mm256_maddubs_epi16(v[q], R == 1 ? x0[q] : x_at(r, q));
                        isum[g][r] = _mm256_add_epi32(isum[g][r], _mm256_madd_epi16(prod, sc[q][g]));
                        asm("" : "+x"(isum[g][r]));  // in order, as accumulate_pair's sums
                    }
            }
        }
    }
}

// Q6_K blocks blk[0 .. G) against R activation rows (xb[r] and its sums s[r], isum16: sum(q_x) per 16 values),
// into acc[g][r]: the stored values' scaled dots minus their offset, 32 * sum over sub-blocks of scale *
// sum(q_x) (a pair of sub-blocks per pmaddwd), exact in int32, times d_w * d_x.
template <int G, int R>
inline void accumulate(const BlockQ6_Kx8* const* blk, const BlockQ8Act* const* xb, const ActSumsQ8* const* s, __m256 (&acc)[G][R]) {
    __m256i isum[G][R];
    for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) isum[g][r] = _mm256_setzero_si256();
    const BlockQ8Act* xh[R];
    q6k_half<0>(blk, xb, isum);
    for (int r = 0; r < R; ++r) xh[r] = xb[r] + 4;
    q6k_half<1>(blk, xh, isum);
    for (int g = 0; g < G; ++g) {
        __m256i offset[R];
        scaled_isum16(blk[g]->scales, s, offset);
        for (int r = 0; r < R; ++r)
            add_scaled(_mm256_sub_epi32(isum[g][r], _mm256_slli_epi32(offset[r], 5)), blk[g]->d, xb[r][0].d, acc[g][r]);
    }
}

// Q3_K's 16 scales of a block's 8 rows, decoded (q3k_scale on 8 rows at once) and less 32: sc[s][r] is row
// r's scale of values 16s .. 16s + 15, -32 .. 31. Scale s takes its low 4 bits from byte s % 8 (low nibble
// for s < 8, high for s >= 8) and its top 2 from bits 2 * (s / 4) of byte 8 + s % 4.
inline void q3k_scales(const BlockQ3_Kx8& blk, int8_t (&sc)[16][kRows]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    const __m256i l0 = loadu32(blk.scales[0]), l1 = loadu32(blk.scales[4]), h = loadu32(blk.scales[8]);
    const __m256i hi[4] = {_mm256_and_si256(_mm256_slli_epi16(h, 4), bits45), _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45),
                           _mm256_and_si256(h, bits45), _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45)};
    const __m256i lo[4] = {_mm256_and_si256(l0, low4), _mm256_and_si256(l1, low4),
                           _mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(_mm256_srli_epi16(l1, 4), low4)};
    for (int q = 0; q < 4; ++q)  // scales 4q .. 4q + 3
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc[4 * q]), _mm256_sub_epi8(_mm256_or_si256(lo[q], hi[q]), k32));
}


// Q3_K blocks blk[0 .. G) against R activation rows (xb[r], its sums s[r]), into acc[g][r]: per activation
// block j, the 8 chunks' unsigned values u (pmaddubsw pairs of at most 2 * 7 * 127, four chunks per int16 sum:
// exact) times the two sub-blocks' scales, then the offset 4 * sum over sub-blocks of scale * sum(q_x) off,
// times d_w * d_x. Each block's values are decoded once for the R rows (as accumulate_pair's).
template <int G, int R>
inline void accumulate(const BlockQ3_Kx8* const* blk, const BlockQ8Act* const* xb, const ActSumsQ8* const* s, __m256 (&acc)[G][R]) {
    const __m256i m1 = _mm256_set1_epi8(1), m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4), m6 = _mm256_set1_epi8(6),
                  m7 = _mm256_set1_epi8(7);
    alignas(32) int8_t sc[G][16][kRows];
    __m256i isum[G][R];
    for (int g = 0; g < G; ++g) {
        q3k_scales(*blk[g], sc[g]);
        for (int r = 0; r < R; ++r) isum[g][r] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 8; ++j)
        for (int g = 0; g < G; ++g) {
            const __m256i a = loadu32(blk[g]->q[j][0]), b = loadu32(blk[g]->q[j][1]), c = loadu32(blk[g]->q[j][2]);
            const __m256i u[8] = {
                _mm256_and_si256(a, m7), _mm256_and_si256(_mm256_srli_epi16(a, 3), m7),
                _mm256_and_si256(b, m7), _mm256_and_si256(_mm256_srli_epi16(b, 3), m7),
                _mm256_and_si256(c, m7), _mm256_and_si256(_mm256_srli_epi16(c, 3), m7),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 6), m3), _mm256_and_si256(_mm256_srli_epi16(b, 4), m4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 7), m1), _mm256_and_si256(_mm256_srli_epi16(c, 5), m6))};
            // The scale words: once for several rows; for one, where used (two fewer live registers: decode
            // ran 2-3% slower with them hoisted).
            __m256i sw[2];
            if constexpr (R > 1) sw[0] = scale_words(sc[g], 2 * j), sw[1] = scale_words(sc[g], 2 * j + 1);
            for (int r = 0; r < R; ++r) {
                const int8_t* x = xb[r][j].qs;
                for (int h = 0; h < 2; ++h) {
                    if constexpr (R == 1) sw[h] = scale_words(sc[g], 2 * j + h);
                    __m256i sum = _mm256_maddubs_epi16(u[4 * h], broadcast_i32(x + 16 * h));
                    for (int k = 1; k < 4; ++k) {
                        sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(u[4 * h + k], broadcast_i32(x + 16 * h + 4 * k)));
                        asm("" : "+x"(sum));  // in order, as accumulate_pair's sums
                    }
                    isum[g][r] = _mm256_add_epi32(isum[g][r], _mm256_madd_epi16(sum, sw[h]));
                }
            }
        }
    for (int g = 0; g < G; ++g) {
        __m256i offset[R];
        scaled_isum16(sc[g], s, offset);
        for (int r = 0; r < R; ++r)
            add_scaled(_mm256_sub_epi32(isum[g][r], _mm256_slli_epi32(offset[r], 2)), blk[g]->d, xb[r][0].d, acc[g][r]);
    }
}

// Q2_K's scales and mins of a block's 8 rows (the low and high nibbles, 0 .. 15): sc[s][r] and mins[s][r] are
// row r's of values 16s .. 16s + 15.
inline void q2k_scales(const BlockQ2_Kx8& blk, int8_t (&sc)[16][kRows], int8_t (&mins)[16][kRows]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int q = 0; q < 4; ++q) {
        const __m256i v = loadu32(blk.scales[4 * q]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc[4 * q]), _mm256_and_si256(v, low4));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(mins[4 * q]), _mm256_and_si256(_mm256_srli_epi16(v, 4), low4));
    }
}

// Q2_K blocks blk[0 .. G) against R activation rows (xb[r], its sums s[r]), into acc[g][r]: per activation
// block j the 8 chunks' 2-bit values (pmaddubsw pairs of at most 2 * 3 * 127, four chunks per int16 sum) times
// the two sub-blocks' scales, exact in int32, times d_w * d_x; then the mins against the sums of q_x per 16
// values, times dmin_w * d_x, subtracted (as Q4_K's mins). Each block's values are decoded once for the R rows.
template <int G, int R>
inline void accumulate(const BlockQ2_Kx8* const* blk, const BlockQ8Act* const* xb, const ActSumsQ8* const* s, __m256 (&acc)[G][R]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    alignas(32) int8_t sc[G][16][kRows], mins[G][16][kRows];
    __m256i isum[G][R];
    for (int g = 0; g < G; ++g) {
        q2k_scales(*blk[g], sc[g], mins[g]);
        for (int r = 0; r < R; ++r) isum[g][r] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 8; ++j)
        for (int g = 0; g < G; ++g) {
            // Plane h: chunks 4h .. 4h + 3, sub-block 2j + h. Its values and the scale words: decoded once for
            // several rows; for one, where used (decode ran 2-3% slower with them all live at once).
            const __m256i p[2] = {loadu32(blk[g]->q[j][0]), loadu32(blk[g]->q[j][1])};
            auto values = [&](int h, int i) { return _mm256_and_si256(i ? _mm256_srli_epi16(p[h], 2 * i) : p[h], m3); };
            __m256i u[2][4], sw[2];
            if constexpr (R > 1)
                for (int h = 0; h < 2; ++h) {
                    for (int i = 0; i < 4; ++i) u[h][i] = values(h, i);
                    sw[h] = scale_words(sc[g], 2 * j + h);
                }
            for (int r = 0; r < R; ++r) {
                const int8_t* x = xb[r][j].qs;
                for (int h = 0; h < 2; ++h) {
                    __m256i sum = _mm256_maddubs_epi16(R > 1 ? u[h][0] : values(h, 0), broadcast_i32(x + 16 * h));
                    for (int i = 1; i < 4; ++i) {
                        sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(R > 1 ? u[h][i] : values(h, i), broadcast_i32(x + 16 * h + 4 * i)));
                        asm("" : "+x"(sum));  // in order, as accumulate_pair's sums
                    }
                    isum[g][r] = _mm256_add_epi32(isum[g][r], _mm256_madd_epi16(sum, R > 1 ? sw[h] : scale_words(sc[g], 2 * j + h)));
                }
            }
        }
    for (int g = 0; g < G; ++g) {
        __m256i min_sum[R];
        scaled_isum16(mins[g], s, min_sum);
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[g]->dmin)));
        for (int r = 0; r < R; ++r) {
            add_scaled(isum[g][r], blk[g]->d, xb[r][0].d, acc[g][r]);
            acc[g][r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_sum[r]), _mm256_mul_ps(dmin, _mm256_set1_ps(xb[r][0].d)), acc[g][r]);
        }
    }
}

// The 32-value blocks below take R activation rows (xb[r], the activation block of row r, and its sums) at
// once, as the K types' do: each block's values decoded once for the R rows, and each row's integers and
// floats as for it alone.

// The 8 rows' 4-bit values (qs of BlockQ4_0x8 / BlockQ4_1x8) against activation blocks xb[0 .. R): per row the
// exact int32 sum of value * q_x, the products summed in int16 (8 pmaddubsw pairs of at most 2 * 15 * 127:
// below 2^15).
template <int R>
inline void dot_u4(const uint8_t (&qs)[4][kRows][4], const BlockQ8Act* const* xb, __m256i (&dot)[R]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
        const __m256i q = loadu32(qs[c]);  // blocks of 144 or 160 bytes: not all 32-byte aligned
        // The low nibbles' products before the high nibbles are split off: one row's decode ran 3% slower
        // with both halves made first.
        const __m256i lo = _mm256_and_si256(q, low4);
        for (int r = 0; r < R; ++r) sum[r] = _mm256_add_epi16(sum[r], _mm256_maddubs_epi16(lo, broadcast_i32(xb[r]->qs + 4 * c)));
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        for (int r = 0; r < R; ++r) sum[r] = _mm256_add_epi16(sum[r], _mm256_maddubs_epi16(hi, broadcast_i32(xb[r]->qs + 16 + 4 * c)));
    }
    for (int r = 0; r < R; ++r) dot[r] = _mm256_madd_epi16(sum[r], _mm256_set1_epi16(1));
}

// The same for 5-bit values: the nibbles ored with the fifth bits (qh stored transposed, q5_0_fifth_bits: a
// shift and a mask put chunk m's at bit 4), two int16 sums of 4 pmaddubsw pairs of at most 2 * 31 * 127.
template <int R>
inline void dot_u5(const uint8_t (&qs)[4][kRows][4], const uint8_t (&qh_t)[kRows][4], const BlockQ8Act* const* xb,
                   __m256i (&dot)[R]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), qh = loadu32(qh_t);
    __m256i sum_lo[R], sum_hi[R];
    for (int r = 0; r < R; ++r) sum_lo[r] = sum_hi[r] = _mm256_setzero_si256();
    auto chunk = [&]<int C>() {  // values 4C .. 4C + 3 (low nibbles) and 16 + 4C .. (high)
        const __m256i q = loadu32(qs[C]);
        const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), bit_at_4<C>(qh));
        const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), bit_at_4<C + 4>(qh));
        for (int r = 0; r < R; ++r) {
            sum_lo[r] = _mm256_add_epi16(sum_lo[r], _mm256_maddubs_epi16(lo, broadcast_i32(xb[r]->qs + 4 * C)));
            sum_hi[r] = _mm256_add_epi16(sum_hi[r], _mm256_maddubs_epi16(hi, broadcast_i32(xb[r]->qs + 16 + 4 * C)));
        }
    };
    chunk.template operator()<0>();
    chunk.template operator()<1>();
    chunk.template operator()<2>();
    chunk.template operator()<3>();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < R; ++r) dot[r] = _mm256_add_epi32(_mm256_madd_epi16(sum_lo[r], ones), _mm256_madd_epi16(sum_hi[r], ones));
}

// One block of 8 Q4_0 rows against activation blocks xb[r], whose values sum to xsum[r]: per row the exact
// int32 sum of (q - 8) * q_x (dot_u4 minus 8 * xsum), times d_w * d_x into acc[r].
template <int R>
inline void accumulate(const BlockQ4_0x8& blk, const BlockQ8Act* const* xb, const int32_t (&xsum)[R], __m256 (&acc)[R]) {
    __m256i dot[R];
    dot_u4(blk.qs, xb, dot);
    for (int r = 0; r < R; ++r) add_scaled(_mm256_sub_epi32(dot[r], _mm256_set1_epi32(8 * xsum[r])), blk.d, xb[r]->d, acc[r]);
}

// Q5_0: (q - 16) * q_x, dot_u5 minus 16 * xsum.
template <int R>
inline void accumulate(const BlockQ5_0x8& blk, const BlockQ8Act* const* xb, const int32_t (&xsum)[R], __m256 (&acc)[R]) {
    __m256i dot[R];
    dot_u5(blk.qs, blk.qh, xb, dot);
    for (int r = 0; r < R; ++r) add_scaled(_mm256_sub_epi32(dot[r], _mm256_set1_epi32(16 * xsum[r])), blk.d, xb[r]->d, acc[r]);
}

// Q4_1 / Q5_1 (value d * q + m) against xb[r], whose values times d_x sum to xsum_dx[r]: the stored values' dot
// times d_w * d_x, then m * xsum_dx.
inline void add_min(const uint16_t (&m)[kRows], float xsum_dx, __m256& acc) {
    acc = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m))), _mm256_set1_ps(xsum_dx), acc);
}
template <int R>
inline void accumulate(const BlockQ4_1x8& blk, const BlockQ8Act* const* xb, const float (&xsum_dx)[R], __m256 (&acc)[R]) {
    __m256i dot[R];
    dot_u4(blk.qs, xb, dot);
    for (int r = 0; r < R; ++r) {
        add_scaled(dot[r], blk.d, xb[r]->d, acc[r]);
        add_min(blk.m, xsum_dx[r], acc[r]);
    }
}
template <int R>
inline void accumulate(const BlockQ5_1x8& blk, const BlockQ8Act* const* xb, const float (&xsum_dx)[R], __m256 (&acc)[R]) {
    __m256i dot[R];
    dot_u5(blk.qs, blk.qh, xb, dot);
    for (int r = 0; r < R; ++r) {
        add_scaled(dot[r], blk.d, xb[r]->d, acc[r]);
        add_min(blk.m, xsum_dx[r], acc[r]);
    }
}

// Chunk v (4 signed values of each of the 8 rows, -128 .. 127; abs_v = |v|) against x (4 q_x broadcast): per
// row the exact int32 dot, by pmaddubsw's sign trick (|v| as unsigned times x with v's sign; pairs of at most
// 2 * 128 * 127 fit int16) and pmaddwd to int32 at once.
inline __m256i chunk_dot_signed(__m256i v, __m256i abs_v, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_v, _mm256_sign_epi8(x, v)), _mm256_set1_epi16(1));
}
// Chunk v against the R rows' x at offset k of their activation blocks, into isum[r]: |v| once for them.
template <int R>
inline void chunk_dot_signed_rows(__m256i v, const BlockQ8Act* const* xb, int k, __m256i (&isum)[R]) {
    const __m256i abs_v = _mm256_sign_epi8(v, v);
    for (int r = 0; r < R; ++r) isum[r] = _mm256_add_epi32(isum[r], chunk_dot_signed(v, abs_v, broadcast_i32(xb[r]->qs + k)));
}

// The same for IQ4_NL: its levels are signed, so each chunk takes chunk_dot_signed.
template <int R>
inline void accumulate(const BlockIQ4_NLx8& blk, const BlockQ8Act* const* xb, const NoSums (&)[R], __m256 (&acc)[R]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
        const __m256i q = loadu32(blk.qs[c]);
        chunk_dot_signed_rows(iq4nl_levels(_mm256_and_si256(q, low4)), xb, 4 * c, isum);
        chunk_dot_signed_rows(iq4nl_levels(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4)), xb, 16 + 4 * c, isum);
    }
    for (int r = 0; r < R; ++r) add_scaled(isum[r], blk.d, xb[r]->d, acc[r]);
}

// The 8 rows' sub-block scales of an IQ4_XS block (6 bits, less 32: -32 .. 31): sc[s % 2][s / 2][r] is row r's
// scale of sub-block s.
inline void iq4xs_scales(const BlockIQ4_XSx8& blk, int8_t (&sc)[2][4][kRows]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12), k32 = _mm256_set1_epi8(32);
    const __m256i lo = loadu32(blk.scales_l);
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales_h));
    const __m128i h_even = _mm_and_si128(h, _mm_set1_epi8(0x0F)), h_odd = _mm_and_si128(_mm_srli_epi16(h, 4), _mm_set1_epi8(0x0F));
    // [k][r]: the top bits of sub-blocks 2k (bits 0-1) and 2k + 1 (bits 2-3)
    const __m256i hi = _mm256_set_m128i(_mm_unpackhi_epi64(h_even, h_odd), _mm_unpacklo_epi64(h_even, h_odd));
    const __m256i even = _mm256_or_si256(_mm256_and_si256(lo, low4), _mm256_slli_epi16(_mm256_and_si256(hi, m3), 4));
    const __m256i odd = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), low4), _mm256_slli_epi16(_mm256_and_si256(hi, m12), 2));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc[0]), _mm256_sub_epi8(even, k32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc[1]), _mm256_sub_epi8(odd, k32));
}

// IQ4_XS blocks blk[0 .. G) against xb, into acc[0 .. G): per sub-block of 32 its chunks' levels against q_x by
// pmaddubsw's sign trick (chunk_dot_signed), each pair sum times the sub-block's scale (6 bits, less 32) in
// the pmaddwd, exact in int32, times d_w * d_x.
template <int G, int R>
inline void accumulate(const BlockIQ4_XSx8* const* blk, const BlockQ8Act* const* xb, const ActSumsQ8* const*, __m256 (&acc)[G][R]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    alignas(32) int8_t sc[G][2][4][kRows];  // [g][s % 2][s / 2][r]: row r's scale of sub-block s, -32 .. 31
    __m256i isum[G][R];
    for (int g = 0; g < G; ++g) {
        iq4xs_scales(*blk[g], sc[g]);
        for (int r = 0; r < R; ++r) isum[g][r] = _mm256_setzero_si256();
    }
    for (int s = 0; s < 8; ++s)
        for (int g = 0; g < G; ++g) {
            const __m256i sw = scale_words(sc[g][s % 2][s / 2]);
            for (int c = 0; c < 4; ++c) {  // each chunk's levels and their magnitudes once for the R rows
                const __m256i q = loadu32(blk[g]->qs[s][c]);
                const __m256i a = iq4nl_levels(_mm256_and_si256(q, low4)), b = iq4nl_levels(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
                __m256i abs_a, abs_b;
                if constexpr (R > 1) abs_a = _mm256_sign_epi8(a, a), abs_b = _mm256_sign_epi8(b, b);
                for (int r = 0; r < R; ++r) {
                    const __m256i xa = broadcast_i32(xb[r][s].qs + 4 * c), xb16 = broadcast_i32(xb[r][s].qs + 16 + 4 * c);
                    isum[g][r] = _mm256_add_epi32(isum[g][r], _mm256_madd_epi16(_mm256_maddubs_epi16(R > 1 ? abs_a : _mm256_sign_epi8(a, a), _mm256_sign_epi8(xa, a)), sw));
                    isum[g][r] = _mm256_add_epi32(isum[g][r], _mm256_madd_epi16(_mm256_maddubs_epi16(R > 1 ? abs_b : _mm256_sign_epi8(b, b), _mm256_sign_epi8(xb16, b)), sw));
                }
            }
        }
    for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) add_scaled(isum[g][r], blk[g]->d, xb[r][0].d, acc[g][r]);
}

// And Q8_0: 8 chunks of stored values.
template <int R>
inline void accumulate(const BlockQ8_0x8& blk, const BlockQ8Act* const* xb, const NoSums (&)[R], __m256 (&acc)[R]) {
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) chunk_dot_signed_rows(loadu32(blk.qs[c]), xb, 4 * c, isum);
    for (int r = 0; r < R; ++r) add_scaled(isum[r], blk.d, xb[r]->d, acc[r]);
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
// Single-row calls on AVX-512 VNNI sets (matmul_x8.h: figures). One vpdpbusd on 64 bytes (chunks c and c + 1
// of the 8 rows: lanes 0-7 and 8-15) does what pmaddubsw, the sign trick and pmaddwd do on 32, and its int32
// sums do not saturate. They are the same exact integers as the AVX2 kernels', and the floats are added by
// the same steps (add_scaled, finish_k4), so these rows still equal prefill's bit for bit.

// Chunks 2 * C2 and 2 * C2 + 1 of an activation block's q_x (x: its 32 bytes), each broadcast to 8 lanes.
template <int C2>
inline __m512i x_chunk_pair(__m512i x) {
    return _mm512_permutexvar_epi32(_mm512_set_epi32(2 * C2 + 1, 2 * C2 + 1, 2 * C2 + 1, 2 * C2 + 1, 2 * C2 + 1, 2 * C2 + 1,
                                                     2 * C2 + 1, 2 * C2 + 1, 2 * C2, 2 * C2, 2 * C2, 2 * C2, 2 * C2, 2 * C2, 2 * C2, 2 * C2),
                                    x);
}
inline __m512i x_block(const BlockQ8Act& x) { return _mm512_castsi256_si512(loadu32(x.qs)); }
// Lane r of the 8 rows: lanes r and r + 8 added.
inline __m256i fold(__m512i v) { return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }

// An activation block's chunk pairs, x_chunk_pair<0 .. 3>.
inline void chunk_pairs(const BlockQ8Act& x, __m512i (&xp)[4]) {
    const __m512i xv = x_block(x);
    xp[0] = x_chunk_pair<0>(xv);
    xp[1] = x_chunk_pair<1>(xv);
    xp[2] = x_chunk_pair<2>(xv);
    xp[3] = x_chunk_pair<3>(xv);
}
// 128 * sum(q_x) of the activation block whose chunk pairs are xp, in each of the 8 row lanes: what stored
// values taken as value + 128 (vpdpbusd wants them unsigned) add to every row's dot.
inline __m256i offset_128(const __m512i (&xp)[4]) {
    const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i offset = _mm512_setzero_si512();
    for (const __m512i& p : xp) offset = _mm512_dpbusd_epi32(offset, k80, p);
    return fold(offset);
}

// Q8_0 blocks blk[0 .. G) against one activation row. vpdpbusd multiplies unsigned by signed bytes: the
// stored values go in as w + 128 (w xor 0x80), which adds 128 * sum(q_x) to every row's sum, taken off once
// for the G blocks.
template <int G>
inline void accumulate_vnni(const BlockQ8_0x8* const* blk, const BlockQ8Act& x, NoSums, __m256 (&acc)[G][1]) {
    const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i xp[4];
    chunk_pairs(x, xp);
    const __m256i offset8 = offset_128(xp);
    for (int g = 0; g < G; ++g) {
        __m512i sum = _mm512_setzero_si512();
        for (int c2 = 0; c2 < 4; ++c2)
            sum = _mm512_dpbusd_epi32(sum, _mm512_xor_si512(_mm512_loadu_si512(blk[g]->qs[2 * c2]), k80), xp[c2]);
        add_scaled(_mm256_sub_epi32(fold(sum), offset8), blk[g]->d, x.d, acc[g][0]);
    }
}

// Bit J of each byte of v at bit 4, the other bits zero (bit_at_4 on 64 bytes).
template <int J>
inline __m512i bit_at_4(__m512i v) {
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    if constexpr (J <= 4)
        return _mm512_and_si512(_mm512_slli_epi16(v, 4 - J), bit4);
    else
        return _mm512_and_si512(_mm512_srli_epi16(v, J - 4), bit4);
}

// Two 32-byte runs of the layout (8 rows' 4 bytes each) in the low and high halves of one register.
inline __m512i two_halves(const uint8_t (&lo)[kRows][4], const uint8_t (&hi)[kRows][4]) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(loadu32(lo)), loadu32(hi), 1);
}

// Dwords 2p and 2p + 1 (lanes 0-7 and 8-15): chunk pair p of an activation block, or a pair of pairs.
alignas(64) constexpr int32_t kChunkPairIndex[4][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5}, {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}};

// scaled_isum16 on 512 bits: sub-blocks 4p and 4p + 1 in the low half, 4p + 2 and 4p + 3 in the high one
// (each half rows 0-3 then 4-7, as the 256-bit pmaddwd), by vpdpwssd; lanes r and r + 8 folded. The same
// exact int32 sums in about half the operations: Q6_K decode spent 10% of its time on the 256-bit one.
inline __m256i scaled_isum16_vnni(const int8_t (&sc)[16][kRows], const ActSumsQ8& s) {
    const __m512i pair_signed = _mm512_broadcast_i64x4(load32(kIndices.pair_signed));
    const __m512i x_pairs = _mm512_castsi256_si512(load32(s.isum16));  // dword p: isum16[2p], isum16[2p + 1]
    __m512i sum = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
        const __m512i v = _mm512_castsi256_si512(loadu32(sc[4 * p]));
        const __m512i words = _mm512_srai_epi16(_mm512_shuffle_epi8(_mm512_shuffle_i64x2(v, v, 0x50), pair_signed), 8);
        sum = _mm512_dpwssd_epi32(sum, words, _mm512_permutexvar_epi32(_mm512_load_si512(kChunkPairIndex[p]), x_pairs));
    }
    return fold(sum);
}

// Q3_K and Q2_K store values 32j .. 32j + 31 as planes per activation block j, whose chunks take shifts and
// masks: their decode puts blocks j and j + 1 in the two halves of a register (lanes 0-7 and 8-15), chunk c of
// each against that block's q_x chunk c, and each half's sums times its own sub-block's scale (vpmulld).
alignas(64) constexpr int32_t kHalvesChunkIndex[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8},         {1, 1, 1, 1, 1, 1, 1, 1, 9, 9, 9, 9, 9, 9, 9, 9},
    {2, 2, 2, 2, 2, 2, 2, 2, 10, 10, 10, 10, 10, 10, 10, 10}, {3, 3, 3, 3, 3, 3, 3, 3, 11, 11, 11, 11, 11, 11, 11, 11},
    {4, 4, 4, 4, 4, 4, 4, 4, 12, 12, 12, 12, 12, 12, 12, 12}, {5, 5, 5, 5, 5, 5, 5, 5, 13, 13, 13, 13, 13, 13, 13, 13},
    {6, 6, 6, 6, 6, 6, 6, 6, 14, 14, 14, 14, 14, 14, 14, 14}, {7, 7, 7, 7, 7, 7, 7, 7, 15, 15, 15, 15, 15, 15, 15, 15}};
// Chunk c of activation blocks a and b (q_x 4c .. 4c + 3) broadcast to lanes 0-7 and 8-15: xc[c].
inline void x_chunk_halves(const BlockQ8Act& a, const BlockQ8Act& b, __m512i (&xc)[8]) {
    const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(loadu32(a.qs)), loadu32(b.qs), 1);
    for (int c = 0; c < 8; ++c) xc[c] = _mm512_permutexvar_epi32(_mm512_load_si512(kHalvesChunkIndex[c]), x);
}
// The scales of sub-blocks s (lanes 0-7) and s + 2 (lanes 8-15: the next activation block's) of the 8 rows.
inline __m512i scale_halves(const int8_t (&sc)[16][kRows], int s) {
    int64_t a, b;
    std::memcpy(&a, sc[s], 8);
    std::memcpy(&b, sc[s + 2], 8);
    return _mm512_cvtepi8_epi32(_mm_set_epi64x(b, a));
}
// Chunks 4h .. 4h + 3 (u: the 8 chunks of both halves' blocks) against xc, times the scales of sub-blocks 2j + h
// and 2j + 2 + h, into isum.
inline void add_sub_blocks_vnni(const __m512i (&u)[8], const __m512i (&xc)[8], const int8_t (&sc)[16][kRows], int j, __m512i& isum) {
    for (int h = 0; h < 2; ++h) {
        __m512i sum = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) sum = _mm512_dpbusd_epi32(sum, u[4 * h + k], xc[4 * h + k]);
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(sum, scale_halves(sc, 2 * j + h)));
    }
}

// Q3_K blocks blk[0 .. G) against one activation row (its 8 blocks xb, sums s): the unsigned values u of
// accumulate, the same exact int32 sums, the offset 4 * sum of scale * sum(q_x) off, times d_w * d_x.
template <int G>
inline void accumulate_vnni(const BlockQ3_Kx8* const* blk, const BlockQ8Act* xb, const ActSumsQ8* s, __m256 (&acc)[G][1]) {
    const __m512i m1 = _mm512_set1_epi8(1), m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(4), m6 = _mm512_set1_epi8(6),
                  m7 = _mm512_set1_epi8(7);
    alignas(32) int8_t sc[G][16][kRows];
    __m512i isum[G];
    for (int g = 0; g < G; ++g) {
        q3k_scales(*blk[g], sc[g]);
        isum[g] = _mm512_setzero_si512();
    }
    for (int j = 0; j < 8; j += 2) {
        __m512i xc[8];
        x_chunk_halves(xb[j], xb[j + 1], xc);
        for (int g = 0; g < G; ++g) {
            const __m512i a = two_halves(blk[g]->q[j][0], blk[g]->q[j + 1][0]), b = two_halves(blk[g]->q[j][1], blk[g]->q[j + 1][1]),
                          c = two_halves(blk[g]->q[j][2], blk[g]->q[j + 1][2]);
            const __m512i u[8] = {
                _mm512_and_si512(a, m7), _mm512_and_si512(_mm512_srli_epi16(a, 3), m7),
                _mm512_and_si512(b, m7), _mm512_and_si512(_mm512_srli_epi16(b, 3), m7),
                _mm512_and_si512(c, m7), _mm512_and_si512(_mm512_srli_epi16(c, 3), m7),
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 6), m3), _mm512_and_si512(_mm512_srli_epi16(b, 4), m4)),
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(b, 7), m1), _mm512_and_si512(_mm512_srli_epi16(c, 5), m6))};
            add_sub_blocks_vnni(u, xc, sc[g], j, isum[g]);
        }
    }
    for (int g = 0; g < G; ++g)
        add_scaled(_mm256_sub_epi32(fold(isum[g]), _mm256_slli_epi32(scaled_isum16_vnni(sc[g], *s), 2)), blk[g]->d, xb[0].d, acc[g][0]);
}

// Q2_K blocks blk[0 .. G) against one activation row: accumulate's 2-bit values and exact int32 sums, then its
// float steps (the sums times d_w * d_x, the mins times dmin_w * d_x off).
template <int G>
inline void accumulate_vnni(const BlockQ2_Kx8* const* blk, const BlockQ8Act* xb, const ActSumsQ8* s, __m256 (&acc)[G][1]) {
    const __m512i m3 = _mm512_set1_epi8(3);
    alignas(32) int8_t sc[G][16][kRows], mins[G][16][kRows];
    __m512i isum[G];
    for (int g = 0; g < G; ++g) {
        q2k_scales(*blk[g], sc[g], mins[g]);
        isum[g] = _mm512_setzero_si512();
    }
    for (int j = 0; j < 8; j += 2) {
        __m512i xc[8];
        x_chunk_halves(xb[j], xb[j + 1], xc);
        for (int g = 0; g < G; ++g) {
            const __m512i p[2] = {two_halves(blk[g]->q[j][0], blk[g]->q[j + 1][0]), two_halves(blk[g]->q[j][1], blk[g]->q[j + 1][1])};
            __m512i u[8];
            for (int h = 0; h < 2; ++h)
                for (int i = 0; i < 4; ++i) u[4 * h + i] = _mm512_and_si512(i ? _mm512_srli_epi16(p[h], 2 * i) : p[h], m3);
            add_sub_blocks_vnni(u, xc, sc[g], j, isum[g]);
        }
    }
    for (int g = 0; g < G; ++g) {
        const __m256i min_sum = scaled_isum16_vnni(mins[g], *s);
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[g]->dmin)));
        add_scaled(fold(isum[g]), blk[g]->d, xb[0].d, acc[g][0]);
        acc[g][0] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_sum), _mm256_mul_ps(dmin, _mm256_set1_ps(xb[0].d)), acc[g][0]);
    }
}

// The 8 rows' 4-bit values (Q4_0 / Q4_1; with kFifthBit, Q5_0 / Q5_1's 5-bit ones) against one activation
// block (xp: its chunk pairs): per row the exact int32 sum of value * q_x that dot_u4 / dot_u5 make. The
// values are unsigned, so vpdpbusd takes them as they are. Chunks 2 * C2 and 2 * C2 + 1 of qs lie in lanes 0-7
// and 8-15 of one load; their fifth bits are bits 2 * C2 and 2 * C2 + 1 of qh (high nibbles: + 4), so the high
// half of the register holds qh shifted down by one and one shift serves both halves.
template <bool kFifthBit, class Block>
inline __m256i dot_u45_vnni(const Block& blk, const __m512i (&xp)[4]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i qh = _mm512_setzero_si512();
    if constexpr (kFifthBit) {
        const __m256i h = loadu32(blk.qh);
        qh = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 1), 1);
    }
    __m512i sum = _mm512_setzero_si512();
    auto pair = [&]<int C2>() {
        const __m512i q = _mm512_loadu_si512(blk.qs[2 * C2]);
        __m512i lo = _mm512_and_si512(q, low4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
        if constexpr (kFifthBit) {
            lo = _mm512_or_si512(lo, bit_at_4<2 * C2>(qh));
            hi = _mm512_or_si512(hi, bit_at_4<2 * C2 + 4>(qh));
        }
        sum = _mm512_dpbusd_epi32(sum, lo, xp[C2]);
        sum = _mm512_dpbusd_epi32(sum, hi, xp[C2 + 2]);
    };
    pair.template operator()<0>();
    pair.template operator()<1>();
    return fold(sum);
}
// Q4_0 / Q5_0 blocks blk[0 .. G) against one activation block whose values sum to xsum, as accumulate does
// them: the dot minus the offset (8 or 16) times xsum, times d_w * d_x.
template <int G, class Block>
    requires(std::is_same_v<Block, BlockQ4_0x8> || std::is_same_v<Block, BlockQ5_0x8>)
inline void accumulate_vnni(const Block* const* blk, const BlockQ8Act& x, int32_t xsum, __m256 (&acc)[G][1]) {
    constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_0x8>;
    __m512i xp[4];
    chunk_pairs(x, xp);
    const __m256i offset = _mm256_set1_epi32((kFifthBit ? 16 : 8) * xsum);
    for (int g = 0; g < G; ++g)
        add_scaled(_mm256_sub_epi32(dot_u45_vnni<kFifthBit>(*blk[g], xp), offset), blk[g]->d, x.d, acc[g][0]);
}
// Q4_1 / Q5_1: the dot times d_w * d_x, then the mins times d_x * sum(q_x), as accumulate.
template <int G, class Block>
    requires(std::is_same_v<Block, BlockQ4_1x8> || std::is_same_v<Block, BlockQ5_1x8>)
inline void accumulate_vnni(const Block* const* blk, const BlockQ8Act& x, float xsum_dx, __m256 (&acc)[G][1]) {
    __m512i xp[4];
    chunk_pairs(x, xp);
    for (int g = 0; g < G; ++g) {
        add_scaled(dot_u45_vnni<std::is_same_v<Block, BlockQ5_1x8>>(*blk[g], xp), blk[g]->d, x.d, acc[g][0]);
        add_min(blk[g]->m, xsum_dx, acc[g][0]);
    }
}

// IQ4_NL / IQ4_XS levels (-127 .. 113) as unsigned bytes for vpdpbusd: level + 128 (the level's bits xor 0x80),
// by nibble, in every 128-bit lane. The 128 * sum(q_x) this adds to each row's dot is taken off after.
inline __m512i iq4nl_table_u8() {
    return _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
}
// The 8 rows' levels + 128 of 32 values (qs: IQ4_NL's 4 chunks, Q4_0's layout) against an activation block's
// chunk pairs xp: per row in lanes r and r + 8, sum((level + 128) * q_x).
inline __m512i dot_iq4_u8(const __m512i table, const uint8_t (&qs)[4][kRows][4], const __m512i (&xp)[4]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i sum = _mm512_setzero_si512();
    for (int c2 = 0; c2 < 2; ++c2) {
        const __m512i q = _mm512_loadu_si512(qs[2 * c2]);
        sum = _mm512_dpbusd_epi32(sum, _mm512_shuffle_epi8(table, _mm512_and_si512(q, low4)), xp[c2]);
        sum = _mm512_dpbusd_epi32(sum, _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), low4)), xp[c2 + 2]);
    }
    return sum;
}
// IQ4_NL blocks blk[0 .. G) against one activation block: the levels' exact dot (the 128 * sum(q_x) taken off
// once for the G blocks, as Q8_0's), times d_w * d_x, as accumulate.
template <int G>
inline void accumulate_vnni(const BlockIQ4_NLx8* const* blk, const BlockQ8Act& x, NoSums, __m256 (&acc)[G][1]) {
    const __m512i table = iq4nl_table_u8();
    __m512i xp[4];
    chunk_pairs(x, xp);
    const __m256i offset8 = offset_128(xp);
    for (int g = 0; g < G; ++g) add_scaled(_mm256_sub_epi32(fold(dot_iq4_u8(table, blk[g]->qs, xp)), offset8), blk[g]->d, x.d, acc[g][0]);
}
// IQ4_XS blocks blk[0 .. G) against one activation row (its 8 blocks xb, sums s): per sub-block the levels + 128
// dotted by vpdpbusd, times the sub-block's scale (vpmulld), less 128 * sum over sub-blocks of scale * sum(q_x)
// (pmaddwd on the scale pairs and isum16's pair sums), then d_w * d_x: accumulate's exact integers.
template <int G>
inline void accumulate_vnni(const BlockIQ4_XSx8* const* blk, const BlockQ8Act* xb, const ActSumsQ8* s, __m256 (&acc)[G][1]) {
    const __m512i table = iq4nl_table_u8();
    alignas(32) int8_t sc[G][2][4][kRows];
    __m512i isum[G];
    for (int g = 0; g < G; ++g) {
        iq4xs_scales(*blk[g], sc[g]);
        isum[g] = _mm512_setzero_si512();
    }
    for (int sb = 0; sb < 8; ++sb) {
        __m512i xp[4];
        chunk_pairs(xb[sb], xp);
        for (int g = 0; g < G; ++g) {
            int64_t row_scales;
            std::memcpy(&row_scales, sc[g][sb % 2][sb / 2], 8);
            const __m512i scale = _mm512_cvtepi8_epi32(_mm_set1_epi64x(row_scales));  // row r in lanes r and r + 8
            isum[g] = _mm512_add_epi32(isum[g], _mm512_mullo_epi32(dot_iq4_u8(table, blk[g]->qs[sb], xp), scale));
        }
    }
    // Sub-block k's sum(q_x): isum16[2k] + isum16[2k + 1]; pairs (2p, 2p + 1) of them against each row's pair of scales.
    int32_t pair_sums[4];
    for (int p = 0; p < 4; ++p) {
        const int32_t even = s->isum16[4 * p] + s->isum16[4 * p + 1], odd = s->isum16[4 * p + 2] + s->isum16[4 * p + 3];
        pair_sums[p] = static_cast<int32_t>(static_cast<uint32_t>(odd) << 16 | (static_cast<uint32_t>(even) & 0xffffu));
    }
    for (int g = 0; g < G; ++g) {
        __m256i offset = _mm256_setzero_si256();
        for (int p = 0; p < 4; ++p) {
            const __m128i words = _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc[g][0][p])),
                                                    _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc[g][1][p])));
            offset = _mm256_add_epi32(offset, _mm256_madd_epi16(_mm256_cvtepi8_epi16(words), _mm256_set1_epi32(pair_sums[p])));
        }
        add_scaled(_mm256_sub_epi32(fold(isum[g]), _mm256_slli_epi32(offset, 7)), blk[g]->d, xb[0].d, acc[g][0]);
    }
}

// Q4_K / Q5_K blocks blk[0 .. G) against one activation row (its 8 blocks xb, sums s): per pair of groups the
// nibbles (Q5_K: with their fifth bits, as accumulate_pair) against their x chunks, the 8 rows' sums of each
// group times their 6-bit scales (vpmulld: the sums reach 32 * 31 * 127, past int16), then finish_k4 as the
// AVX2 kernel.
template <int P, int G, class Block>
inline void q4k_pair_vnni(const Block* const* blk, const BlockQ8Act* xb, const __m128i (&scs)[G][4], __m512i (&isum)[G]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i pa[4], pb[4];
    chunk_pairs(xb[2 * P], pa);
    chunk_pairs(xb[2 * P + 1], pb);
    for (int g = 0; g < G; ++g) {
        __m512i sa = _mm512_setzero_si512(), sb = _mm512_setzero_si512();
        for (int c2 = 0; c2 < 4; ++c2) {
            const __m512i q = _mm512_loadu_si512(blk[g]->qs[P][2 * c2]);
            __m512i a = _mm512_and_si512(q, low4), b = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
            if constexpr (std::is_same_v<Block, BlockQ5_Kx8>) {  // chunks 2 * c2 and 2 * c2 + 1's qh: bits 2P, 2P + 1
                const __m512i h = _mm512_loadu_si512(blk[g]->qh[2 * c2]);
                a = _mm512_or_si512(a, bit_at_4<2 * P>(h));
                b = _mm512_or_si512(b, bit_at_4<2 * P + 1>(h));
            }
            sa = _mm512_dpbusd_epi32(sa, a, pa[c2]);
            sb = _mm512_dpbusd_epi32(sb, b, pb[c2]);
        }
        // [group 2P: rows 0-7][group 2P + 1: rows 0-7], each group's 8 bytes in both halves of 16 lanes
        const __m128i sc = scs[g][P];
        isum[g] = _mm512_add_epi32(isum[g], _mm512_mullo_epi32(sa, _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(sc, sc))));
        isum[g] = _mm512_add_epi32(isum[g], _mm512_mullo_epi32(sb, _mm512_cvtepu8_epi32(_mm_unpackhi_epi64(sc, sc))));
    }
}
template <int G, class Block>
    requires(std::is_same_v<Block, BlockQ4_Kx8> || std::is_same_v<Block, BlockQ5_Kx8>)
inline void accumulate_vnni(const Block* const* blk, const BlockQ8Act* xb, const ActSumsQ8* s, __m256 (&acc)[G][1]) {
    __m512i isum[G];
    for (__m512i& v : isum) v = _mm512_setzero_si512();
    __m128i scs[G][4];  // the scales first, in the order the block's bytes lie
    for (int g = 0; g < G; ++g) {
        scs[g][0] = _mm256_castsi256_si128(pair_scales<0>(*blk[g]));
        scs[g][1] = _mm256_castsi256_si128(pair_scales<1>(*blk[g]));
        scs[g][2] = _mm256_castsi256_si128(pair_scales<2>(*blk[g]));
        scs[g][3] = _mm256_castsi256_si128(pair_scales<3>(*blk[g]));
    }
    q4k_pair_vnni<0>(blk, xb, scs, isum);
    q4k_pair_vnni<1>(blk, xb, scs, isum);
    q4k_pair_vnni<2>(blk, xb, scs, isum);
    q4k_pair_vnni<3>(blk, xb, scs, isum);
    __m256i isum8[G][1];
    for (int g = 0; g < G; ++g) isum8[g][0] = fold(isum[g]);
    const BlockQ8Act* const xr[1] = {xb};
    const ActSumsQ8* const sr[1] = {s};
    finish_k4(blk, xr, sr, isum8, acc);
}

// Dwords i and i + 4 (lanes 0-7 and 8-15): an activation block's chunks i and i + 4, one in each of its two
// sub-blocks of 16 (Q6_K's chunk pairs).
alignas(64) constexpr int32_t kSubBlockPairIndex[4][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4}, {1, 1, 1, 1, 1, 1, 1, 1, 5, 5, 5, 5, 5, 5, 5, 5},
    {2, 2, 2, 2, 2, 2, 2, 2, 6, 6, 6, 6, 6, 6, 6, 6}, {3, 3, 3, 3, 3, 3, 3, 3, 7, 7, 7, 7, 7, 7, 7, 7}};

// Q6_K blocks blk[0 .. G) against one activation row (its 8 blocks xb, sums s): the stored values (0-63,
// unsigned) dotted with q_x by vpdpbusd, chunks i and i + 4 of the 8 rows in lanes 0-7 and 8-15 (one 64-byte
// load: BlockQ6_Kx8), so that after a group's 4 chunk pairs the lanes hold its two sub-blocks of 16, which one
// vpmulld multiplies by their scales; then the offset and d_w * d_x as the AVX2 kernel (accumulate): the same
// exact integers, the same float steps. A vpmulld per sub-block (chunk pairs 2i, 2i + 1) spent a third of the
// kernel's operations on scaling.
template <int G>
inline void accumulate_vnni(const BlockQ6_Kx8* const* blk, const BlockQ8Act* xb, const ActSumsQ8* s, __m256 (&acc)[G][1]) {
    const __m512i low6 = _mm512_set1_epi8(0x3F), low2 = _mm512_set1_epi8(0x03), low4 = _mm512_set1_epi8(0x0F);
    constexpr int kSelect = 0xE4;  // vpternlogd: c ? a : b, bit by bit
    __m512i isum[G];
    for (__m512i& v : isum) v = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
        const __m512i xq[4] = {x_block(xb[4 * h]), x_block(xb[4 * h + 1]), x_block(xb[4 * h + 2]), x_block(xb[4 * h + 3])};
        __m512i sum[G][4];
        for (auto& g : sum)
            for (__m512i& v : g) v = _mm512_setzero_si512();
        for (int i = 0; i < 4; ++i) {
            const __m512i index = _mm512_load_si512(kSubBlockPairIndex[i]);
            __m512i xp[4];
            for (int q = 0; q < 4; ++q) xp[q] = _mm512_permutexvar_epi32(index, xq[q]);
            for (int g = 0; g < G; ++g) {
                const auto& qc = blk[g]->q[h][i];
                const __m512i a = _mm512_loadu_si512(qc[0]), b = _mm512_loadu_si512(qc[1]), e = _mm512_loadu_si512(qc[2]);
                // The fourth value: bits 0-1 from a >> 6, 2-3 from b >> 4, 4-5 from e >> 2 (two bitwise selects;
                // each shift brings the next byte's low bits in above its own, which the selects and the and drop)
                const __m512i v3 = _mm512_and_si512(
                    _mm512_ternarylogic_epi32(
                        _mm512_ternarylogic_epi32(_mm512_srli_epi16(a, 6), _mm512_srli_epi16(b, 4), low2, kSelect),
                        _mm512_srli_epi16(e, 2), low4, kSelect),
                    low6);
                sum[g][0] = _mm512_dpbusd_epi32(sum[g][0], _mm512_and_si512(a, low6), xp[0]);
                sum[g][1] = _mm512_dpbusd_epi32(sum[g][1], _mm512_and_si512(b, low6), xp[1]);
                sum[g][2] = _mm512_dpbusd_epi32(sum[g][2], _mm512_and_si512(e, low6), xp[2]);
                sum[g][3] = _mm512_dpbusd_epi32(sum[g][3], v3, xp[3]);
            }
        }
        for (int g = 0; g < G; ++g)
            for (int q = 0; q < 4; ++q) {  // sub-blocks 2j, 2j + 1 of group j = 4h + q: scales side by side
                const __m512i scale = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[g]->scales[2 * (4 * h + q)])));
                isum[g] = _mm512_add_epi32(isum[g], _mm512_mullo_epi32(sum[g][q], scale));
            }
    }
    for (int g = 0; g < G; ++g)
        add_scaled(_mm256_sub_epi32(fold(isum[g]), _mm256_slli_epi32(scaled_isum16_vnni(blk[g]->scales, *s), 5)), blk[g]->d,
                   xb[0].d, acc[g][0]);
}
template <class Block>
constexpr bool kHasVnni = std::is_same_v<Block, BlockQ8_0x8> || std::is_same_v<Block, BlockQ4_Kx8> || std::is_same_v<Block, BlockQ6_Kx8> ||
                          std::is_same_v<Block, BlockQ4_0x8> || std::is_same_v<Block, BlockQ5_0x8> ||
                          std::is_same_v<Block, BlockQ4_1x8> || std::is_same_v<Block, BlockQ5_1x8> ||
                          std::is_same_v<Block, BlockIQ4_NLx8> || std::is_same_v<Block, BlockIQ4_XSx8> ||
                          std::is_same_v<Block, BlockQ5_Kx8> || std::is_same_v<Block, BlockQ3_Kx8> || std::is_same_v<Block, BlockQ2_Kx8>;
#else
template <class Block>
constexpr bool kHasVnni = false;
#endif

// A decode tile's groups are read kDecodePrefetchBytes ahead by software prefetch (T0 hint, see below): one
// core kept too few lines in flight on its own, so that a GEMV took about the time of its arithmetic plus
// that of its reads. Streamed Q8_0 GEMVs on a Zen 5 (2 threads, % of the read reference, 3 alternating
// rounds): 2048 x 2048 78 / 70 / 72 -> 81 / 83 / 85, 576 x 3072 71 / 68 / 72 -> 77 / 82 / 81, 576 x 576
// unchanged (46-53); on one thread 576 x 576 64-71 -> 86-89, 2048 x 2048 73-76 -> 82-86. 2 and 8 KiB did no
// better, the default (L1) hint no better than non-temporal. Each call issues a burst for its first kDecodePrefetchBytes:
// starting 4 KiB in instead did worse on 576 x 3072. Q4_K (portable build's avx512 set, 3 alternating rounds):
// 2048 x 2048 67 / 68 / 58 -> 77 / 67 / 75, 576 x 3072 51-53 -> 63-70; Q6_K within the noise. The AVX2 set
// forced on the same machine (4 groups per tile) gained on Q8_0 (2048 x 2048 73-75 -> 78-85) but lost on Q4_K
// (66-70 -> 57-66 at 4 KiB), so it stayed off there until the trial on the Intel VM below.
// Tried later on a Zen 5 reading 78-87 GB/s (2048 x 2048 streamed on 2 threads, GB/s, alternating runs; Q4_K /
// Q6_K / Q8_0): the T0 hint 66 / 65 / 72 and T1-T2 59-61 / 52-57 / 55-67 against NTA's 68 / 66 / 77; every
// other line only, 36 / 36 / 59; a prefetch beside each 64-byte load instead of a block's at once (Q4_K)
// 56-60 against 69-72, a block's lines in two halves (before it and midway) 58-60 against 60-61. Cheaper issue loses too: the burst unrolled, or skipped where a tile goes on from the
// thread's last, made the cached GEMV (one thread, K = 512) 13-30% faster and the streamed ones 3-18% slower.
// So a streamed GEMV here is paced by how its prefetches meet the memory system, not by its arithmetic; the
// bench's "1 core cached" rate includes this loop (about 40% of a cached Q4_K GEMV's samples at K = 512).
// The hint is T0 (L1), not NTA: on an Intel Xeon VM (Granite Rapids class, 2 vCPUs, 34 GB/s) the NTA prefetches took
// 88% of a Q8_0 decode's samples, and the streamed GEMVs ran at 30-35% of the read (cached, one core: Q8_0
// 9 GB/s). With T0 (kvscope-kernel-bench, 2 threads, 3 rounds, two runs each, % of the read, Q8_0 / Q4_K /
// Q6_K): 85-87 / 79-80 / 75-77, as without any prefetch (83-87 / 57-81 / 75); on the Zen 5 T0 had read
// 2-5 points under NTA (above), the price of one hint for both.
// The distance is 2 KiB, not 4, since the Q6_K decode took half its scaling operations away (one vpmulld per
// group): on that Intel VM, kvscope-kernel-bench (2 threads, 3 rounds, two runs, % of the read, Q8_0 / Q4_K /
// Q6_K) 4 KiB 87-88 / 79-80 / 80-81, 2 KiB 91-92 / 85-86 / 86-87, 1.5 KiB 92-95 / 86-88 / 87, 1 KiB 93-94 /
// 84-85 / 84-85, 3 KiB 88-90 / 83-85 / 83-85, 8 KiB 83-84 / 72-76 / 75-78, none 83-84 / 79-81 / 74-76; T1 and
// T2 hints at 2 KiB 87-90 / 79 / 76-77. model-bench tg128 on bench-1b (3 alternating rounds, t/s): Q4_K_M
// 32.7-33.6 -> 33.9-34.5, Q6_K 26.0-26.9 -> 27.2-27.5. On the Zen 5, 2 KiB had read as 4 (with NTA).
// The AVX2 sets took the same distance and hint once it was measured (until then they had no software
// prefetch, from the Zen 5 trial above): forced on the Intel VM (portable build, KVSCOPE_CPU_VARIANT=avx2,
// kernel-bench as above, two runs, % of the read, Q8_0 / Q4_0 / Q4_K / Q6_K / Q3_K / IQ4_XS) none 80-83 / 75 /
// 72-73 / 71-73 / 52-53 / 50-51, 2 KiB 90-91 / 88-89 / 79-81 / 73-75 / 67-68 / 66-67, 4 KiB 91-92 / 87 /
// 73-75 / 67-68 / 66-67 / 61-63; with two groups (kDecodeGroups) at 2 KiB 89 / 87-91 / 85-88 / 80-82 / 76 /
// 78-79. No CPU with AVX2 alone has timed them.
constexpr int kDecodePrefetchBytes = 2048;

// Lanes r = rows 0..7 of each group w[i] (nblk blocks), i < Groups: Rows activation rows (row j: the
// BlockQ8Act of nblk blocks at x + j * nblk * (blocks per weight block), their sums xs + j * nblk) dotted
// with each row, into out[i] + j * ldo, [0 .. 8). A row's steps do not depend on Groups or Rows.
template <class Block, int Groups, int Rows = 1>
void dot_rows8(const Block* const* w, int64_t nblk, const BlockQ8Act* x, const typename X8Traits<Block>::Sums* xs,
               float* const* out, int64_t ldo = 0) {
    constexpr int kActBlocks = X8Traits<Block>::kValues / 32;
    __m256 accs[Groups][Rows];
    for (auto& row : accs)
        for (__m256& acc : row) acc = _mm256_setzero_ps();
    // Decode: each group's lines from its start to kDecodePrefetchBytes past the block in hand (see there).
    const char* prefetched[Groups];
    if constexpr (Rows == 1)
        for (int i = 0; i < Groups; ++i)
            for (prefetched[i] = reinterpret_cast<const char*>(w[i]); prefetched[i] < reinterpret_cast<const char*>(w[i]) + kDecodePrefetchBytes;
                 prefetched[i] += 64)
                __builtin_prefetch(prefetched[i], 0, 3);
    for (int64_t b = 0; b < nblk; ++b) {
        const Block* blk[Groups];
        for (int i = 0; i < Groups; ++i) blk[i] = &w[i][b];
        if constexpr (Rows == 1)
            for (int i = 0; i < Groups; ++i) {
                // prefetched stays within a line past kDecodePrefetchBytes ahead (the burst above starts it there),
                // so a block adds sizeof(Block) / 64 lines or one more: a loop of fixed count, and one test. The
                // loop that compared every line (Q8_0: 4 or 5 a block) cost a fifth of a cached GEMV's samples
                // (one thread, 2048 x 256 from L2: Q4_K 5.1-5.4 -> 4.8-5.0 us, Q6_K 8.1-8.7 -> 7.8-7.9, Q8_0
                // 5.5-5.8 -> 5.1-5.2). Unrolled (#pragma GCC unroll), the prefetches leave in one burst and
                // streamed GEMVs lost (2048 x 2048, 2 threads, % of the read: Q4_K 75 -> 57-65, Q6_K 67-74 ->
                // 55-60). Skipping the burst above where a tile goes on from this thread's last one gained
                // from L2 but lost model-bench tg128 (bench-1b Q4_K_M and Q6_K, 2-5%, 3 alternating rounds).
                const char* ahead = reinterpret_cast<const char*>(blk[i] + 1) + kDecodePrefetchBytes;
                for (size_t l = 0; l < sizeof(Block) / 64; ++l, prefetched[i] += 64) __builtin_prefetch(prefetched[i], 0, 3);
                if (prefetched[i] < ahead) {
                    __builtin_prefetch(prefetched[i], 0, 3);
                    prefetched[i] += 64;
                }
            }
        const BlockQ8Act* xr[Rows];
        for (int j = 0; j < Rows; ++j) xr[j] = x + (j * nblk + b) * kActBlocks;
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
        if constexpr (Rows == 1 && kHasVnni<Block>) {
            if constexpr (kActBlocks == 8)
                accumulate_vnni(blk, xr[0], xs + b, accs);
            else
                accumulate_vnni(blk, *xr[0], sums_at(xs, b), accs);
            continue;
        }
#endif
        if constexpr (kActBlocks == 8) {  // the K types: their blocks and sums together
            const ActSumsQ8* sr[Rows];
            for (int j = 0; j < Rows; ++j) sr[j] = xs + j * nblk + b;
            accumulate(blk, xr, sr, accs);
        } else {
            typename X8Traits<Block>::Sums sr[Rows];
            for (int j = 0; j < Rows; ++j) sr[j] = sums_at(advance(xs, j * nblk), b);
            for (int i = 0; i < Groups; ++i) accumulate(*blk[i], xr, sr, accs[i]);
        }
    }
    for (int i = 0; i < Groups; ++i)
        for (int j = 0; j < Rows; ++j) _mm256_storeu_ps(out[i] + j * ldo, accs[i][j]);
}

// Decode streams the weights once and waits on memory: a core keeps more lines in flight over several
// streams, so a decode tile reads S groups a (1 / S)th of the matrix apart, block by block, and the hardware
// prefetchers follow them. 2048 x 2048 streamed on 2 threads (4 alternating runs, GB/s): two groups with
// software prefetch 8 K blocks ahead (the previous scheme) Q8_0 43-44, Q4_K 35-41; four groups without
// Q8_0 50-53, Q4_K 40-43; four with the prefetch 36-44 and 28-34 (it crowds the L1); eight, Q8_0 45-49.
// That was a Zen 3 (AVX2, 50-56 GB/s), with for_each_tile's two tasks side by side: 8 streams per thread. A
// Zen 5 (AVX-512, 80-87 GB/s) wants fewer. 2 threads, 3 alternating runs, GB/s: 4 groups x 2 tasks Q4_K 39-41,
// Q6_K 40-41, Q8_0 47-50; 4 x 1 Q4_K 60-68, Q6_K 60-67, Q8_0 55-63; 2 x 1 Q4_K 60-70, Q6_K 62-69 (one run 45),
// Q8_0 68-71; 1 x 1 56-61, 60-61, 51-70; 8 x 1 Q4_K 43-46, Q6_K 32. The AVX2 set forced on that Zen 5, % of
// the read reference in 4 alternating rounds (medians Q4_K / Q8_0 / Q6_K): 4 x 2 47 / 51 / 47, 4 x 1 68 / 74 /
// 72, 2 x 1 74 / 68 / 74. So every set reads its groups one task at a time, 2 of them (the AVX2 sets took 4
// until the software prefetch came to them: see kDecodePrefetchBytes). F32 and F16, row-major tiles, keep two
// tasks: no difference there.
constexpr int kDecodeGroups = 2;
template <class Block, int S>
void decode_groups(ThreadPool& pool, const BlockQ8Act* xq, const typename X8Traits<Block>::Sums* xs, const WeightView& w,
                   float* out) {
    const int64_t nb8 = w.cols / X8Traits<Block>::kValues, G = w.rows / kRows;
    const auto* groups = static_cast<const Block*>(w.data);
    for_each_tile(pool, TileTasks(w.rows / S, kRows, pool.size()), 1, [&](int64_t g, int, int, int) {
        const Block* ws[S];
        float* os[S];
        for (int s = 0; s < S; ++s) {
            ws[s] = groups + (g + s * G / S) * nb8;
            os[s] = out + (g + s * G / S) * kRows;
        }
        dot_rows8<Block, S>(ws, nb8, xq, xs, os);
    }, /*decode_streams=*/1);
}

// Activation rows per multi-row call in prefill: their int16 sums (2 per row) take 8 of the 16 registers.
constexpr int kPrefillRows = 4;

template <class Block>
void run(ThreadPool& pool, const BlockQ8Act* xq, const typename X8Traits<Block>::Sums* xs, int n, const WeightView& w,
         float* out) {
    const int64_t K = w.cols, N = w.rows, nb = K / 32, nb8 = K / X8Traits<Block>::kValues;
    const auto* groups = static_cast<const Block*>(w.data);
    const int64_t G = N / kRows;
    if (n == 1 && G % kDecodeGroups == 0) return decode_groups<Block, kDecodeGroups>(pool, xq, xs, w, out);
    for_each_tile(pool, TileTasks(N, kRows, pool.size()), n, [&](int64_t g, int x0, int nx, int) {
        const Block* const w1[1] = {groups + g * nb8};
        if (n == 1) {
            float* const o1[1] = {out + g * kRows};
            dot_rows8<Block, 1>(w1, nb8, xq, xs, o1);
            return;
        }
        for (int t = x0; t < x0 + nx;) {  // the group's blocks stay in L1 / L2 across the x rows
            float* const o1[1] = {out + t * N + g * kRows};
            if (x0 + nx - t >= kPrefillRows) {
                dot_rows8<Block, 1, kPrefillRows>(w1, nb8, xq + t * nb, advance(xs, t * nb8), o1, N);
                t += kPrefillRows;
                continue;
            }
            dot_rows8<Block, 1>(w1, nb8, xq + t * nb, advance(xs, t * nb8), o1);
            ++t;
        }
    });
}

}  // namespace

bool x8_packable(const WeightView& w) {
    return w.layout == WeightLayout::row_major && (w.dtype == DType::Q4_K || w.dtype == DType::Q5_K || w.dtype == DType::Q4_0 ||
                                                   w.dtype == DType::IQ4_NL || w.dtype == DType::Q8_0 || w.dtype == DType::Q6_K ||
                                                   w.dtype == DType::Q5_0 || w.dtype == DType::Q4_1 || w.dtype == DType::Q5_1 ||
                                                   w.dtype == DType::Q3_K || w.dtype == DType::Q2_K || w.dtype == DType::IQ4_XS) &&
           w.rows > 0 && w.rows % kRows == 0 && w.cols > 0;
}

namespace {

// pack_row(block b of row g * 8 + r, block b of group g, r) for every block of every row of w.
template <class In, class Out, class F>
void pack_rows8(ThreadPool& pool, const WeightView& w, Out* out, F pack_row) {
    const size_t row_bytes = dtype_row_bytes(w.dtype, w.cols);
    const int64_t nblk = w.cols / dtype_block_elems(w.dtype);
    pool.run(w.rows / kRows, [&](int64_t g, int) {
        for (int64_t b = 0; b < nblk; ++b)
            for (int r = 0; r < kRows; ++r)
                pack_row(reinterpret_cast<const In*>(static_cast<const uint8_t*>(w.data) + (g * kRows + r) * row_bytes)[b],
                         out[g * nblk + b], r);
    });
}

// Q5_0 / Q5_1's fifth bits (bit i: value i's) transposed: bit m of byte k is value 4m + k's.
void q5_0_fifth_bits(const uint8_t (&qh)[4], uint8_t (&out)[4]) {
    uint32_t bits;
    std::memcpy(&bits, qh, 4);
    for (int k = 0; k < 4; ++k) {
        out[k] = 0;
        for (int m = 0; m < 8; ++m) out[k] |= static_cast<uint8_t>(((bits >> (4 * m + k)) & 1) << m);
    }
}

// 32-value blocks: d, Q4_1 / Q5_1's min, Q5_0 / Q5_1's fifth bits, and the values' bytes in chunks of 4.
template <class In, class Out>
void pack_row_b32(const In& in, Out& o, int r) {
    o.d[r] = in.d;
    if constexpr (requires { in.m; }) o.m[r] = in.m;
    if constexpr (requires { in.qh; }) q5_0_fifth_bits(in.qh, o.qh[r]);
    for (size_t c = 0; c < sizeof in.qs / 4; ++c) std::memcpy(o.qs[c][r], in.qs + 4 * c, 4);
}

template <class In, class Out>
void pack_row_q45k(const In& in, Out& o, int r) {
    o.d[r] = in.d;
    o.dmin[r] = in.dmin;
    for (int k = 0; k < 12; ++k) o.scales[k][r] = in.scales[k];
    for (int p = 0; p < 4; ++p)
        for (int c = 0; c < 8; ++c) std::memcpy(o.qs[p][c][r], in.qs + 32 * p + 4 * c, 4);
    if constexpr (std::is_same_v<In, BlockQ5_K>)
        for (int c = 0; c < 8; ++c) std::memcpy(o.qh[c][r], in.qh + 4 * c, 4);
}

void pack_row_q6k(const BlockQ6_K& in, BlockQ6_Kx8& o, int r) {
    o.d[r] = in.d;
    for (int k = 0; k < 16; ++k) o.scales[k][r] = in.scales[k];
    for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 8; ++c)
            for (int i = 0; i < 4; ++i) {
                const int at = 4 * c + i;  // value i of chunk c of the half's groups 4h + quarter
                const uint8_t lo = in.ql[64 * h + at], hi = in.ql[64 * h + 32 + at], qh = in.qh[32 * h + at];
                uint8_t v[4];
                for (int quarter = 0; quarter < 4; ++quarter)
                    v[quarter] = static_cast<uint8_t>((((quarter % 2 ? hi : lo) >> (4 * (quarter / 2))) & 0xF) |
                                                      (((qh >> (2 * quarter)) & 3) << 4));
                for (int k = 0; k < 3; ++k)  // quarter k whole in bits 0-5, bits 2k, 2k + 1 of quarter 3 on top
                    o.q[h][c % 4][k][c / 4][r][i] = static_cast<uint8_t>(v[k] | (((v[3] >> (2 * k)) & 3) << 6));
            }
}

void pack_row_iq4xs(const BlockIQ4_XS& in, BlockIQ4_XSx8& o, int r) {
    o.d[r] = in.d;
    for (int k = 0; k < 4; ++k) o.scales_l[k][r] = in.scales_l[k];
    for (int t = 0; t < 2; ++t) o.scales_h[t][r] = static_cast<uint8_t>(in.scales_h >> (8 * t));
    for (int s = 0; s < 8; ++s)
        for (int c = 0; c < 4; ++c) std::memcpy(o.qs[s][c][r], in.qs + 16 * s + 4 * c, 4);
}

void pack_row_q2k(const BlockQ2_K& in, BlockQ2_Kx8& o, int r) {
    o.d[r] = in.d;
    o.dmin[r] = in.dmin;
    for (int k = 0; k < 16; ++k) o.scales[k][r] = in.scales[k];
    for (int j = 0; j < 8; ++j)
        for (int p = 0; p < 2; ++p)
            for (int k = 0; k < 4; ++k) {
                uint8_t byte = 0;
                for (int i = 0; i < 4; ++i) {  // dequantize_q2_k's walk: value v of sub-block v / 16
                    const int v = 32 * j + 4 * (4 * p + i) + k, sb = v / 16, l = v % 16;
                    byte |= static_cast<uint8_t>(((in.qs[32 * (sb / 8) + 16 * (sb % 2) + l] >> (2 * ((sb % 8) / 2))) & 3) << (2 * i));
                }
                o.q[j][p][r][k] = byte;
            }
}

void pack_row_q3k(const BlockQ3_K& in, BlockQ3_Kx8& o, int r) {
    o.d[r] = in.d;
    for (int k = 0; k < 12; ++k) o.scales[k][r] = in.scales[k];
    for (int j = 0; j < 8; ++j)
        for (int k = 0; k < 4; ++k) {
            uint8_t u[8];
            for (int c = 0; c < 8; ++c) {  // dequantize_q3_k's walk: value v's low 2 bits and high bit
                const int v = 32 * j + 4 * c + k, half = v / 128, shift = (v % 128) / 32, l = v % 32;
                u[c] = static_cast<uint8_t>(((in.qs[32 * half + l] >> (2 * shift)) & 3) |
                                            (((in.hmask[l] >> (4 * half + shift)) & 1) << 2));
            }
            o.q[j][0][r][k] = static_cast<uint8_t>(u[0] | u[1] << 3 | (u[6] & 3) << 6);
            o.q[j][1][r][k] = static_cast<uint8_t>(u[2] | u[3] << 3 | (u[6] >> 2) << 6 | (u[7] & 1) << 7);
            o.q[j][2][r][k] = static_cast<uint8_t>(u[4] | u[5] << 3 | (u[7] >> 1) << 6);
        }
}

}  // namespace

WeightView pack_x8(ThreadPool& pool, const WeightView& w, void* dst) {
    switch (w.dtype) {
    case DType::Q4_0:
    case DType::IQ4_NL:  // one layout (the IQ4_NLx8 static_assert)
        pack_rows8<BlockQ4_0>(pool, w, static_cast<BlockQ4_0x8*>(dst), pack_row_b32<BlockQ4_0, BlockQ4_0x8>);
        break;
    case DType::Q5_0: pack_rows8<BlockQ5_0>(pool, w, static_cast<BlockQ5_0x8*>(dst), pack_row_b32<BlockQ5_0, BlockQ5_0x8>); break;
    case DType::Q4_1: pack_rows8<BlockQ4_1>(pool, w, static_cast<BlockQ4_1x8*>(dst), pack_row_b32<BlockQ4_1, BlockQ4_1x8>); break;
    case DType::Q5_1: pack_rows8<BlockQ5_1>(pool, w, static_cast<BlockQ5_1x8*>(dst), pack_row_b32<BlockQ5_1, BlockQ5_1x8>); break;
    case DType::Q8_0: pack_rows8<BlockQ8_0>(pool, w, static_cast<BlockQ8_0x8*>(dst), pack_row_b32<BlockQ8_0, BlockQ8_0x8>); break;
    case DType::Q4_K: pack_rows8<BlockQ4_K>(pool, w, static_cast<BlockQ4_Kx8*>(dst), pack_row_q45k<BlockQ4_K, BlockQ4_Kx8>); break;
    case DType::Q5_K: pack_rows8<BlockQ5_K>(pool, w, static_cast<BlockQ5_Kx8*>(dst), pack_row_q45k<BlockQ5_K, BlockQ5_Kx8>); break;
    case DType::Q6_K: pack_rows8<BlockQ6_K>(pool, w, static_cast<BlockQ6_Kx8*>(dst), pack_row_q6k); break;
    case DType::Q3_K: pack_rows8<BlockQ3_K>(pool, w, static_cast<BlockQ3_Kx8*>(dst), pack_row_q3k); break;
    case DType::Q2_K: pack_rows8<BlockQ2_K>(pool, w, static_cast<BlockQ2_Kx8*>(dst), pack_row_q2k); break;
    case DType::IQ4_XS: pack_rows8<BlockIQ4_XS>(pool, w, static_cast<BlockIQ4_XSx8*>(dst), pack_row_iq4xs); break;
    default: throw std::invalid_argument("pack_x8: " + std::string(dtype_name(w.dtype)) + " is not interleaved by 8");
    }
    WeightView view = w;
    view.data = dst;
    view.layout = WeightLayout::rows_x8;
    return view;
}

void matmul_x8_k(ThreadPool& pool, const BlockQ8Act* xq, const ActSumsQ8* xs, int n, const WeightView& w, float* out) {
    if (w.dtype == DType::Q4_K)
        run<BlockQ4_Kx8>(pool, xq, xs, n, w, out);
    else if (w.dtype == DType::Q6_K)
        run<BlockQ6_Kx8>(pool, xq, xs, n, w, out);
    else if (w.dtype == DType::Q3_K)
        run<BlockQ3_Kx8>(pool, xq, xs, n, w, out);
    else if (w.dtype == DType::Q2_K)
        run<BlockQ2_Kx8>(pool, xq, xs, n, w, out);
    else if (w.dtype == DType::IQ4_XS)
        run<BlockIQ4_XSx8>(pool, xq, xs, n, w, out);
    else
        run<BlockQ5_Kx8>(pool, xq, xs, n, w, out);
}

void matmul_x8_b32(ThreadPool& pool, const BlockQ8Act* xq, const int32_t* x_isums, const float* x_sums, int n,
                   const WeightView& w, float* out) {
    switch (w.dtype) {
    case DType::Q4_0: run<BlockQ4_0x8>(pool, xq, x_isums, n, w, out); break;
    case DType::Q5_0: run<BlockQ5_0x8>(pool, xq, x_isums, n, w, out); break;
    case DType::Q4_1: run<BlockQ4_1x8>(pool, xq, x_sums, n, w, out); break;
    case DType::Q5_1: run<BlockQ5_1x8>(pool, xq, x_sums, n, w, out); break;
    case DType::IQ4_NL: run<BlockIQ4_NLx8>(pool, xq, static_cast<const NoSums*>(nullptr), n, w, out); break;
    case DType::Q8_0: run<BlockQ8_0x8>(pool, xq, static_cast<const NoSums*>(nullptr), n, w, out); break;
    default: throw std::invalid_argument("matmul_x8_b32: " + std::string(dtype_name(w.dtype)) + " is not interleaved by 8");
    }
}

#else  // sets without AVX2 keep every type row-major

bool x8_packable(const WeightView&) { return false; }
WeightView pack_x8(ThreadPool&, const WeightView& w, void*) { return w; }
void matmul_x8_k(ThreadPool&, const BlockQ8Act*, const ActSumsQ8*, int, const WeightView&, float*) {}
void matmul_x8_b32(ThreadPool&, const BlockQ8Act*, const int32_t*, const float*, int, const WeightView&, float*) {}

#endif

}  // namespace KVSCOPE_CPU_NAMESPACE
