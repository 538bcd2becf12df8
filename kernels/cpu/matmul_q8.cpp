#include "cpu/matmul_q8.h"

#include "cpu/matmul_x8.h"
#include "q4k_scales.h"

#include "cpu/q8_values.h"
#include "cpu/simd.h"
#include "cpu/tile_tasks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

// Register tiles per kernel set: kTileX activation rows by kTileW weight rows. AVX2 holds 8 accumulators and
// the operands of 4 x 2 block dots (4 x 2 ran 1-5% faster than 3 x 2 in alternating bench-135m Q8_0 /
// Q4_K_M prefills on Zen 3, 8% in a single-thread kernel harness); the SSSE3 baseline, whose x blocks take
// two registers each, 3 x 2.
// Single-row decode takes one weight row at a time (kDecodeW), so that each thread reads its rows as one
// sequential stream: 8-row tiles (8 streams 1-2 KB apart, x loaded once for all) decoded a Q8_0 model
// 20-25% slower (kvscope-model-bench tg128, bench-135m Q8_0 and Q6_K); the x blocks come again from L1.
#if defined(KVSCOPE_Q8_TILE_VNNI)
constexpr int kTileX = 4;
constexpr int kTileW = 4;
#elif defined(__AVX2__)
constexpr int kTileX = 4;
constexpr int kTileW = 2;
#else
constexpr int kTileX = 3;
constexpr int kTileW = 2;
#endif
constexpr int kDecodeW = 1;

// Weight rows of Q8_0 blocks, or (single-row decode on AVX2 sets) of any block type that unpacks to Q8_0,
// read in place through q8_values.h; Q4_1 / Q5_1 rows (AVX2 sets) also with the activation blocks' d_x *
// sum(q_x), which their mins multiply: x_sums[i] for the activation block x_base[i].
template <class Block>
struct BlockRows {
    const Block* base;
    int64_t stride;  // blocks between rows
    const BlockQ8Act* x_base = nullptr;
    const float* x_sums = nullptr;
    const Block& block(int r, int64_t b) const { return base[r * stride + b]; }
    float x_sum(const BlockQ8Act& xb) const { return x_sums[&xb - x_base]; }
};

#if defined(KVSCOPE_Q8_TILE_VNNI)

// Two consecutive 32-byte blocks in one register: block b in the low half, b + 1 (or zeros) in the high.
inline __m512i pair_i8(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m256i load_i8(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m512 pair_f32(float lo, float hi) {
    return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

// out[t * ldo + r] for t < MX, r < NW. A pair of blocks at a time: vpdpbusd multiplies unsigned by
// signed bytes, so x goes in offset by +128 and the accumulator starts at -128 * sum(w), leaving the
// exact int32 sum of x * w per 4 bytes; 8 lanes per block are then scaled by d_w * d_x and accumulated
// in F32. Every output takes exactly these steps in this order, whatever MX and NW: batch invariant.
template <int MX, int NW, class Rows>
void tile(const BlockQ8Act* x, int64_t nb, const Rows& w, float* out, int64_t ldo) {
    __m512 acc[MX][NW];
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) acc[t][r] = _mm512_setzero_ps();
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80)), ones = _mm512_set1_epi8(1);
    for (int64_t b = 0; b < nb; b += 2) {
        const bool two = b + 1 < nb;
        __m512i xu[MX];
        __m512 xs[MX];
        for (int t = 0; t < MX; ++t) {
            const BlockQ8Act* xb = x + t * nb + b;
            // x + 128 as unsigned bytes. A missing second block has x = 0 and w = 0 there: it adds 0.
            xu[t] = _mm512_xor_si512(pair_i8(load_i8(xb[0].qs), two ? load_i8(xb[1].qs) : _mm256_setzero_si256()), offset);
            xs[t] = pair_f32(xb[0].d, two ? xb[1].d : 0.0f);
        }
        // Decode streams the weights once from memory: fetch the next tile's rows a tile ahead (the
        // hardware prefetchers alone left the lm head at about half the bandwidth).
        if constexpr (MX == 1)
            for (int r = 0; r < NW; ++r) {
                __builtin_prefetch(&w.block(NW + r, b));
                __builtin_prefetch(&w.block(NW + r, b + 1));
            }
        for (int r = 0; r < NW; ++r) {
            const auto* wb = &w.block(r, b);
            const __m512i wv = pair_i8(q8_values(wb[0]), two ? q8_values(wb[1]) : _mm256_setzero_si256());
            const __m512i neg_bias = _mm512_sub_epi32(_mm512_setzero_si512(),
                                                      _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, wv), 7));
            const __m512 ws = pair_f32(f16_scale(wb[0].d), two ? f16_scale(wb[1].d) : 0.0f);
            for (int t = 0; t < MX; ++t) {
                const __m512i dot = _mm512_dpbusd_epi32(neg_bias, xu[t], wv);
                acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(ws, xs[t]), acc[t][r]);
            }
        }
    }
    constexpr int kAcc = MX * NW, kPadded = (kAcc + kLanes - 1) / kLanes * kLanes;
    vf flat[kPadded];
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) flat[t * NW + r] = reinterpret_cast<vf>(acc[t][r]);
    for (int i = kAcc; i < kPadded; ++i) flat[i] = vf{};
    float sums[kPadded];
    for (int i = 0; i < kPadded; i += kLanes) storev(sums + i, hsum_lanes(flat + i));
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) out[t * ldo + r] = sums[t * NW + r];
}

#elif defined(__AVX2__)

// One 32-value block's exact int32 dot in 8 lanes, as llama.cpp's AVX2 path: vpmaddubsw multiplies
// unsigned by signed bytes, so |w| (vpsignb(w, w): -128 becomes 128 unsigned) times x with w's sign (0
// where w is 0); pairs of products fit int16 (|x| <= 127, |w| <= 128: at most 32512), then vpmaddwd sums
// pairs into int32.
inline __m256i block_dot(__m256i w_abs, __m256i w, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w)), _mm256_set1_epi16(1));
}

// out[t * ldo + r] for t < MX, r < NW. Per block the exact int32 dot in 8 lanes, scaled by d_w * d_x and
// accumulated (one fma per lane and block) in block order, then the 8 lanes summed by simd.h's halving
// tree; every output takes exactly these steps in this order, whatever MX and NW: batch invariant. (Also
// the path of AVX-512 builds without VNNI, where vf is wider than these accumulators.)
template <int MX, int NW, class Rows>
void tile(const BlockQ8Act* x, int64_t nb, const Rows& w, float* out, int64_t ldo) {
    __m256 acc[MX][NW];
    float mins[MX][NW];  // Q4_1 / Q5_1: sum over blocks of m * d_x * sum(q_x), added to the lanes' sum at the end
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) acc[t][r] = _mm256_setzero_ps(), mins[t][r] = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        __m256i xq[MX];
        __m256 xd[MX];
        for (int t = 0; t < MX; ++t) {
            const BlockQ8Act& xb = x[t * nb + b];
            xq[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
            xd[t] = _mm256_set1_ps(xb.d);
        }
        // Decode streams the weights once from memory: fetch the next tile's rows a tile ahead (the
        // hardware prefetchers alone left the lm head at a third of the bandwidth).
        if constexpr (MX == 1)
            for (int r = 0; r < NW; ++r) __builtin_prefetch(&w.block(NW + r, b));
        using Block = std::remove_cvref_t<decltype(w.block(0, 0))>;
        constexpr int kOffset = kQ8Offset<Block>;
        __m256i x_offset[MX];  // Q4_0 / Q5_0 in place: kOffset * (x[2i] + x[2i + 1]) in int16 lane i
        if constexpr (kOffset != 0)
            for (int t = 0; t < MX; ++t) x_offset[t] = _mm256_maddubs_epi16(_mm256_set1_epi8(kOffset), xq[t]);
        for (int r = 0; r < NW; ++r) {
            const auto& wb = w.block(r, b);
            const __m256 wd = _mm256_set1_ps(f16_scale(wb.d));
            if constexpr (kQ8Unsigned<Block>) {  // the same int16 pairs as block_dot's, from the stored unsigned bits
                const __m256i u = q8_stored(wb);
                for (int t = 0; t < MX; ++t) {
                    __m256i pairs = _mm256_maddubs_epi16(u, xq[t]);
                    if constexpr (kOffset != 0) pairs = _mm256_sub_epi16(pairs, x_offset[t]);
                    const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
                    acc[t][r] = _mm256_fmadd_ps(dot, _mm256_mul_ps(wd, xd[t]), acc[t][r]);
                }
                if constexpr (kQ8Mins<Block>) {  // + m * d_x * sum(q_x), in a scalar beside the lanes
                    const float m = f16_scale(wb.m);
                    for (int t = 0; t < MX; ++t) mins[t][r] = std::fma(m, w.x_sum(x[t * nb + b]), mins[t][r]);
                }
            } else {
                const __m256i wq = q8_values(wb);
                const __m256i w_abs = _mm256_sign_epi8(wq, wq);
                for (int t = 0; t < MX; ++t) {
                    const __m256 dot = _mm256_cvtepi32_ps(block_dot(w_abs, wq, xq[t]));
                    acc[t][r] = _mm256_fmadd_ps(dot, _mm256_mul_ps(wd, xd[t]), acc[t][r]);
                }
            }
        }
    }
    if constexpr (kLanes == 8) {  // kLanes accumulators reduced at once (hsum_lanes: the same tree)
        constexpr int kAcc = MX * NW, kPadded = (kAcc + kLanes - 1) / kLanes * kLanes;
        vf flat[kPadded];
        for (int t = 0; t < MX; ++t)
            for (int r = 0; r < NW; ++r) flat[t * NW + r] = reinterpret_cast<vf>(acc[t][r]);
        for (int i = kAcc; i < kPadded; ++i) flat[i] = vf{};
        float sums[kPadded];
        for (int i = 0; i < kPadded; i += kLanes) storev(sums + i, hsum_lanes(flat + i));
        for (int t = 0; t < MX; ++t)
            for (int r = 0; r < NW; ++r) out[t * ldo + r] = sums[t * NW + r] + mins[t][r];
    } else {
        for (int t = 0; t < MX; ++t)
            for (int r = 0; r < NW; ++r) {
                __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[t][r]), _mm256_extractf128_ps(acc[t][r], 1));
                s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                out[t * ldo + r] = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s))) + mins[t][r];
            }
    }
}

#elif defined(__SSSE3__) && KVSCOPE_CPU_LANES == 4

// The AVX2 path in two 16-byte halves: each half's products summed as in block_dot above, the halves
// added in int32 (exact), 4 lanes per block scaled and accumulated (multiply, then add: no FMA here).
inline __m128i half_dot(__m128i w_abs, __m128i w, __m128i x) {
    return _mm_madd_epi16(_mm_maddubs_epi16(w_abs, _mm_sign_epi8(x, w)), _mm_set1_epi16(1));
}

template <int MX, int NW, class Rows>
void tile(const BlockQ8Act* x, int64_t nb, const Rows& w, float* out, int64_t ldo) {
    vf acc[MX][NW];
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) acc[t][r] = vf{};
    for (int64_t b = 0; b < nb; ++b) {
        __m128i xlo[MX], xhi[MX];
        vf xd[MX];
        for (int t = 0; t < MX; ++t) {
            const BlockQ8Act& xb = x[t * nb + b];
            xlo[t] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.qs));
            xhi[t] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.qs + 16));
            xd[t] = splatv(xb.d);
        }
        if constexpr (MX == 1)  // as in the AVX2 tile
            for (int r = 0; r < NW; ++r) __builtin_prefetch(&w.block(NW + r, b));
        for (int r = 0; r < NW; ++r) {
            const BlockQ8_0& wb = w.block(r, b);
            const __m128i wlo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.qs));
            const __m128i whi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.qs + 16));
            const __m128i alo = _mm_sign_epi8(wlo, wlo), ahi = _mm_sign_epi8(whi, whi);
            const vf wd = splatv(f16_scale(wb.d));
            for (int t = 0; t < MX; ++t) {
                const __m128i dot = _mm_add_epi32(half_dot(alo, wlo, xlo[t]), half_dot(ahi, whi, xhi[t]));
                const vf prod = reinterpret_cast<vf>(_mm_cvtepi32_ps(dot)) * (wd * xd[t]);
                acc[t][r] += prod;
            }
        }
    }
    float sums[kTileSums<MX, NW>];
    tile_sums(acc, sums);
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) out[t * ldo + r] = sums[t * NW + r];
}

#else

// Portable version: per block the exact int32 dot, scaled and accumulated in block order.
template <int MX, int NW, class Rows>
void tile(const BlockQ8Act* x, int64_t nb, const Rows& w, float* out, int64_t ldo) {
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) {
            float s = 0;
            for (int64_t b = 0; b < nb; ++b) {
                const BlockQ8Act& xb = x[t * nb + b];
                const BlockQ8_0& wb = w.block(r, b);
                int32_t dot = 0;
                for (int j = 0; j < 32; ++j) dot += int32_t{xb.qs[j]} * int32_t{wb.qs[j]};
                s = std::fma(static_cast<float>(dot), f16_scale(wb.d) * xb.d, s);
            }
            out[t * ldo + r] = s;
        }
}

#endif

template <int NW, class Rows>
void tile_rows_nw(const BlockQ8Act* x, int n, int64_t nb, const Rows& w, float* out, int64_t ldo) {
    int t = 0;
    for (; t + kTileX <= n; t += kTileX) tile<kTileX, NW>(x + t * nb, nb, w, out + t * ldo, ldo);
    if (t < n) with_constant<kTileX>(n - t, [&](auto MX) { tile<MX(), NW>(x + t * nb, nb, w, out + t * ldo, ldo); });
}

// Single-row decode: weight rows [0, nw) of a row-major tile, one after the other.
template <class Block>
void decode_tile(const BlockQ8Act* x, int64_t nb, const BlockRows<Block>& w, int nw, float* out) {
    for (int r = 0; r < nw; ++r)
        tile<1, 1>(x, nb, BlockRows<Block>{w.base + r * w.stride, w.stride, w.x_base, w.x_sums}, out + r, 1);
}

// ---- Q4_K, Q5_K, Q6_K straight from their blocks (matmul_q8_k). A 256-value block is 8 groups of 32
// values, group j lined up with activation block 8b + j; the activations share one scale d_x per 256
// (quantize_activations_q8_k), so a block's whole dot stays in integers, as llama.cpp's does: per group
// the int32 dot of the stored unsigned values with x's int8 values (4 bytes per lane: lanes 0-3 hold values
// 0-15, lanes 4-7 values 16-31; Q6_K's offset of 32 subtracted inside), times the group's integer scale in
// each lane (Q6_K: one per half of 16), summed over the 8 groups; then once per block, in F32, times
// d_w * d_x. Q4_K / Q5_K subtract dmin * d_x * sum_j m_j * sum(q_x of group j), also in integers.
// The int32 sums are exact (at most 8 * 4 * 32 * 127 * 128 < 2^24 in magnitude, so exact in F32 too).
// With AVX2 the scale rides in pmaddwd, which sums pmaddubsw's pairs into the int32 lanes anyway: two
// multiplies per group and nothing else, where a pmaddwd by ones and a pmulld by the scale left decode
// compute-bound at half the memory bandwidth.

// The 8 6-bit scales and mins of a Q4_K / Q5_K block (q4k_scale_min for all j at once, in 32-bit words):
// byte j of sc and of m is sub-block j's. Kept in registers: bytes stored in pieces and read back as one
// word stall on store forwarding.
inline void q4k_scales_mins(const uint8_t* packed, uint64_t& sc, uint64_t& m) {
    uint32_t u[3];
    std::memcpy(u, packed, 12);
    const uint32_t sc_lo = u[0] & 0x3f3f3f3f, sc_hi = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
    const uint32_t m_lo = u[1] & 0x3f3f3f3f, m_hi = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
    sc = sc_lo | (uint64_t{sc_hi} << 32);
    m = m_lo | (uint64_t{m_hi} << 32);
}

#if defined(__AVX2__)
// pshufb indices that copy word lo of the low 128-bit half to all its words and word hi of the high half
// to all of its: kWordPicks[lo][hi]. From memory: built in registers, GCC rematerialized them every block.
struct WordPicks {
    alignas(32) uint8_t idx[8][8][32];
    constexpr WordPicks() : idx{} {
        for (int lo = 0; lo < 8; ++lo)
            for (int hi = 0; hi < 8; ++hi)
                for (int i = 0; i < 32; ++i) idx[lo][hi][i] = static_cast<uint8_t>(2 * (i < 16 ? lo : hi) + i % 2);
    }
};
inline constexpr WordPicks kWordPicks{};
inline __m256i broadcast_words(__m256i v, int lo, int hi) {
    return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kWordPicks.idx[lo][hi])));
}
#endif

// Q4_K and Q5_K (Bits 4 or 5): one scale and one min per group.
template <class B, int Bits>
struct QKAffineDecoder {
    using Block = B;
    static constexpr bool kMins = true, kMins16 = false, kSigned = false;
    static constexpr int kOffset = 0;
    const Block& blk;
    uint64_t sc, m;  // byte j: group j's 6-bit scale, min
#if defined(__AVX2__)
    __m256i sc16;  // the 8 scales as int16, in both halves
#endif
    explicit QKAffineDecoder(const Block& b) : blk(b) {
        q4k_scales_mins(b.scales, sc, m);
#if defined(__AVX2__)
        sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
#endif
    }
    float d() const { return f16_scale(blk.d); }
    float dmin() const { return f16_scale(blk.dmin); }
    int32_t scale(int j, int) const { return static_cast<int32_t>((sc >> (8 * j)) & 0xFF); }
    int32_t group_imin(int j) const { return static_cast<int32_t>((m >> (8 * j)) & 0xFF); }
    int32_t imin16(int) const { return 0; }
    int value(int j, int i) const {
        const int lo = (blk.qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 0xF;
        if constexpr (Bits == 5)
            return lo | (((blk.qh[i] >> j) & 1) << 4);
        else
            return lo;
    }
#if defined(__AVX2__)
    __m256i values(int j) const {
        const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * (j / 2)));
        const __m256i lo = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(bytes, 4) : bytes, _mm256_set1_epi8(0x0F));
        if constexpr (Bits == 4) {
            return lo;
        } else {  // Q5_K: bit j of each qh byte to bit 4
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh));
            const __m256i at4 = j <= 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4);
            return _mm256_or_si256(lo, _mm256_and_si256(at4, _mm256_set1_epi8(0x10)));
        }
    }
    __m256i scales16(int j) const { return broadcast_words(sc16, j, j); }
    __m128i mins16() const { return _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m))); }
    __m256i mins16x16() const { return _mm256_setzero_si256(); }
#endif
};
using Q4KDecoder = QKAffineDecoder<BlockQ4_K, 4>;
using Q5KDecoder = QKAffineDecoder<BlockQ5_K, 5>;

#if defined(__AVX2__)
// The 16 scales of the types with one per 16 values (Q6_K, Q2_K, Q3_K) as int16, 0-7 in both halves of lo,
// 8-15 in both halves of hi; group j's are scales 2j (words 0-7) and 2j + 1 (words 8-15).
struct Scales16 {
    __m256i lo, hi;
    explicit Scales16(__m256i s16)
        : lo(_mm256_permute2x128_si256(s16, s16, 0x00)), hi(_mm256_permute2x128_si256(s16, s16, 0x11)) {}
    __m256i group(int j) const { return broadcast_words(j < 4 ? lo : hi, (2 * j) % 8, (2 * j + 1) % 8); }
};
#endif

// Q6_K: an int8 scale per 16 values; group j = 4 * half + quarter, as dequantize_q6_k walks the block.
struct Q6KDecoder {
    using Block = BlockQ6_K;
    static constexpr bool kMins = false, kMins16 = false, kSigned = false;
    static constexpr int kOffset = 32;
    const Block& blk;
#if defined(__AVX2__)
    Scales16 sc;
    explicit Q6KDecoder(const Block& b)
        : blk(b), sc(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)))) {}
#else
    explicit Q6KDecoder(const Block& b) : blk(b) {}
#endif
    float d() const { return f16_scale(blk.d); }
    float dmin() const { return 0.0f; }
    int32_t scale(int j, int i) const { return blk.scales[2 * j + i / 16]; }
    int32_t group_imin(int) const { return 0; }
    int32_t imin16(int) const { return 0; }
    int value(int j, int i) const {
        const int half = j / 4, quarter = j % 4;
        return ((blk.ql[64 * half + 32 * (quarter % 2) + i] >> (4 * (quarter / 2))) & 0xF) |
               (((blk.qh[32 * half + i] >> (2 * quarter)) & 3) << 4);
    }
#if defined(__AVX2__)
    __m256i values(int j) const {
        const int half = j / 4, quarter = j % 4;
        const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * half + 32 * (quarter % 2)));
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * half));
        const __m256i l4 = _mm256_and_si256(quarter / 2 ? _mm256_srli_epi16(l, 4) : l, _mm256_set1_epi8(0x0F));
        // bits 2 * quarter, + 1 of each qh byte to bits 4, 5
        const __m256i h_at4 = quarter < 2 ? _mm256_slli_epi16(h, 4 - 2 * quarter) : _mm256_srli_epi16(h, 2 * quarter - 4);
        return _mm256_or_si256(l4, _mm256_and_si256(h_at4, _mm256_set1_epi8(0x30)));
    }
    __m256i scales16(int j) const { return sc.group(j); }
    __m128i mins16() const { return _mm_setzero_si128(); }
    __m256i mins16x16() const { return _mm256_setzero_si256(); }
#endif
};

#if defined(__AVX2__)
// Q2_K and Q3_K's low 2 bits of group j's values: bits 2 * (j % 4) of qs[32 * (j / 4) + i] (dequantize_q2_k).
inline __m256i q2_bits_avx2(const uint8_t* qs, int j) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (j / 4)));
    return _mm256_and_si256(_mm256_srli_epi16(q, 2 * (j % 4)), _mm256_set1_epi8(3));
}
#endif

// Q2_K: a 4-bit scale and a 4-bit min per 16 values (value = d * scale * q - dmin * min, q of 2 bits): the
// mins against the activations' sums per 16 (kMins16).
struct Q2KDecoder {
    using Block = BlockQ2_K;
    static constexpr bool kMins = false, kMins16 = true, kSigned = false;
    static constexpr int kOffset = 0;
    const Block& blk;
#if defined(__AVX2__)
    Scales16 sc;
    explicit Q2KDecoder(const Block& b)
        : blk(b), sc(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)),
                                                       _mm_set1_epi8(0x0F)))) {}
#else
    explicit Q2KDecoder(const Block& b) : blk(b) {}
#endif
    float d() const { return f16_scale(blk.d); }
    float dmin() const { return f16_scale(blk.dmin); }
    int32_t scale(int j, int i) const { return blk.scales[2 * j + i / 16] & 0xF; }
    int32_t group_imin(int) const { return 0; }
    int32_t imin16(int s) const { return blk.scales[s] >> 4; }
    int value(int j, int i) const { return (blk.qs[32 * (j / 4) + i] >> (2 * (j % 4))) & 3; }
#if defined(__AVX2__)
    __m256i values(int j) const { return q2_bits_avx2(blk.qs, j); }
    __m256i scales16(int j) const { return sc.group(j); }
    __m128i mins16() const { return _mm_setzero_si128(); }
    __m256i mins16x16() const {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
        return _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0F)));
    }
#endif
};

// Q3_K: a signed 6-bit scale per 16 values, q of 3 bits stored as the low 2 bits plus 4 * the hmask bit,
// with an offset of 4 (dequantize_q3_k: a clear bit subtracts 4).
struct Q3KDecoder {
    using Block = BlockQ3_K;
    static constexpr bool kMins = false, kMins16 = false, kSigned = false;
    static constexpr int kOffset = 4;
    const Block& blk;
#if defined(__AVX2__)
    Scales16 sc;
    explicit Q3KDecoder(const Block& b) : blk(b), sc(scales(b)) {}
    // q3k_scale for all 16 in registers (scalar ones stored to bytes and loaded as a vector stalled on
    // store forwarding: 82 cycles per block): byte j's low 4 bits from nibble j / 8 of byte j % 8, its
    // top 2 from bits 2 * (j / 4) of byte 8 + j % 4 (32-bit lane j / 4 shifted by 2 * (j / 4)).
    static __m256i scales(const Block& b) {
        uint64_t lo8;
        uint32_t hi4;
        std::memcpy(&lo8, b.scales, 8);
        std::memcpy(&hi4, b.scales + 8, 4);
        const __m128i v = _mm_cvtsi64_si128(static_cast<long long>(lo8)), nib = _mm_set1_epi8(0x0F);
        const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(v, nib), _mm_and_si128(_mm_srli_epi16(v, 4), nib));
        const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(hi4)), _mm_setr_epi32(0, 2, 4, 6)),
                                         _mm_set1_epi8(3));
        return _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32)));
    }
#else
    explicit Q3KDecoder(const Block& b) : blk(b) {}
#endif
    float d() const { return f16_scale(blk.d); }
    float dmin() const { return 0.0f; }
    int32_t scale(int j, int i) const { return q3k_scale(2 * j + i / 16, blk.scales); }
    int32_t group_imin(int) const { return 0; }
    int32_t imin16(int) const { return 0; }
    int value(int j, int i) const {
        return ((blk.qs[32 * (j / 4) + i] >> (2 * (j % 4))) & 3) | (((blk.hmask[i] >> j) & 1) << 2);
    }
#if defined(__AVX2__)
    __m256i values(int j) const {  // bit j of each hmask byte to bit 2
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.hmask));
        const __m256i at2 = j <= 2 ? _mm256_slli_epi16(h, 2 - j) : _mm256_srli_epi16(h, j - 2);
        return _mm256_or_si256(q2_bits_avx2(blk.qs, j), _mm256_and_si256(at2, _mm256_set1_epi8(4)));
    }
    __m256i scales16(int j) const { return sc.group(j); }
    __m128i mins16() const { return _mm_setzero_si128(); }
    __m256i mins16x16() const { return _mm256_setzero_si256(); }
#endif
};

// IQ4_XS: IQ4_NL's 16 int8 levels (signed: kSigned, multiplied with pmaddubsw's sign trick) times a signed
// 6-bit scale per 32 values.
struct IQ4XSDecoder {
    using Block = BlockIQ4_XS;
    static constexpr bool kMins = false, kMins16 = false, kSigned = true;
    static constexpr int kOffset = 0;
    const Block& blk;
#if defined(__AVX2__)
    __m256i sc16;  // the 8 scales as int16, in both halves
#endif
    explicit IQ4XSDecoder(const Block& b) : blk(b) {
#if defined(__AVX2__)
        // iq4xs_scale for all 8 in 32-bit lanes (not through a stored array: see Q3KDecoder).
        uint32_t lo4;
        std::memcpy(&lo4, b.scales_l, 4);
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(lo4)),
                                                              _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                            _mm256_set1_epi32(0x0F));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h),
                                                              _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                            _mm256_set1_epi32(3));
        const __m256i sc = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
        sc16 = _mm256_broadcastsi128_si256(_mm_packs_epi32(_mm256_castsi256_si128(sc), _mm256_extracti128_si256(sc, 1)));
#endif
    }
    float d() const { return f16_scale(blk.d); }
    float dmin() const { return 0.0f; }
    int32_t scale(int j, int) const { return iq4xs_scale(j, blk.scales_l, blk.scales_h); }
    int32_t group_imin(int) const { return 0; }
    int32_t imin16(int) const { return 0; }
    int value(int j, int i) const {
        const uint8_t byte = blk.qs[16 * j + i % 16];
        return kIq4nlValues[i < 16 ? byte & 0xF : byte >> 4];
    }
#if defined(__AVX2__)
    __m256i values(int j) const { return iq4nl_levels(nibbles_avx2(blk.qs + 16 * j)); }
    __m256i scales16(int j) const { return broadcast_words(sc16, j, j); }
    __m128i mins16() const { return _mm_setzero_si128(); }
    __m256i mins16x16() const { return _mm256_setzero_si256(); }
#endif
};

// Where a tile reads its weight blocks: straight from the rows (decode: each block is used once), or from
// blocks decoded once into scratch (more x rows: every x tile reuses them). Both give the tile the same
// integers and scales, so a row's result does not depend on which one served it.
template <class Dec>
struct DirectRows {
    using Decoder = Dec;
    const uint8_t* base;
    size_t row_bytes;
    Dec block(int r, int64_t b) const { return Dec(reinterpret_cast<const typename Dec::Block*>(base + r * row_bytes)[b]); }
    // Every cache line of block b of row r + nw: bytes at most 64 apart from its first to its last (a Q6_K
    // block of 210 bytes can touch 5 lines; four probes 64 apart missed the last, its scales and d).
    void prefetch_next_tile(int r, int64_t b, int nw) const {
        constexpr int kBytes = sizeof(typename Dec::Block);
        const auto* next = reinterpret_cast<const char*>(reinterpret_cast<const typename Dec::Block*>(base + (r + nw) * row_bytes) + b);
        for (int off = 0; off < kBytes + 63; off += 64) __builtin_prefetch(next + std::min(off, kBytes - 1));
    }
};

template <class Dec>
struct DecodedBlockView {
    static constexpr bool kMins = Dec::kMins, kMins16 = Dec::kMins16, kSigned = Dec::kSigned;
    static constexpr int kOffset = Dec::kOffset;
    const DecodedKBlock& k;
    float d() const { return k.d; }
    float dmin() const { return k.dmin; }
    int32_t scale(int j, int i) const { return k.scale16[j][i / 2]; }
    int32_t group_imin(int j) const { return k.imin[j]; }
    int32_t imin16(int s) const { return k.imin16[s]; }
    int value(int j, int i) const { return kSigned ? static_cast<int8_t>(k.q[j][i]) : k.q[j][i]; }
#if defined(__AVX2__)
    __m256i values(int j) const { return _mm256_load_si256(reinterpret_cast<const __m256i*>(k.q[j])); }
    __m256i scales16(int j) const { return _mm256_load_si256(reinterpret_cast<const __m256i*>(k.scale16[j])); }
    __m128i mins16() const { return _mm_load_si128(reinterpret_cast<const __m128i*>(k.imin)); }
    __m256i mins16x16() const { return _mm256_load_si256(reinterpret_cast<const __m256i*>(k.imin16)); }
#endif
};

template <class Dec>
struct DecodedRows {
    using Decoder = DecodedBlockView<Dec>;
    const DecodedKBlock* base;
    int64_t blocks_per_row;
    DecodedBlockView<Dec> block(int r, int64_t b) const { return {base[r * blocks_per_row + b]}; }
    void prefetch_next_tile(int, int64_t, int) const {}
};

// Rows [0, nw) of src (row_bytes apart), nb8 blocks each, decoded into dst[r * nb8 + b].
template <class Dec>
void decode_rows(const uint8_t* src, size_t row_bytes, int nw, int64_t nb8, DecodedKBlock* dst) {
    for (int r = 0; r < nw; ++r)
        for (int64_t b = 0; b < nb8; ++b) {
            const Dec dec(reinterpret_cast<const typename Dec::Block*>(src + r * row_bytes)[b]);
            DecodedKBlock& out = dst[r * nb8 + b];
            out.d = dec.d();
            out.dmin = dec.dmin();
            for (int j = 0; j < 8; ++j) {
#if defined(__AVX2__)
                _mm256_store_si256(reinterpret_cast<__m256i*>(out.q[j]), dec.values(j));
#else
                for (int i = 0; i < 32; ++i) out.q[j][i] = static_cast<uint8_t>(dec.value(j, i));
#endif
                for (int i = 0; i < 16; ++i) out.scale16[j][i] = static_cast<int16_t>(dec.scale(j, 2 * i));
                out.imin[j] = static_cast<int16_t>(dec.group_imin(j));
            }
            for (int s = 0; s < 16; ++s) out.imin16[s] = static_cast<int16_t>(dec.imin16(s));
        }
}

#if defined(__AVX2__)

inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

// out[t * ldo + r] for t < MX, r < NW. Per block: the exact integer sum in 8 lanes, to F32, times d_w *
// d_x, accumulated in block order; then (Q4_K / Q5_K) the mins' exact integer sums, pairs of groups in
// lanes 0-3, to F32, times dmin * d_x, subtracted; at the end the lanes summed by a fixed tree. Every output
// takes exactly these steps in this order, whatever MX, NW and the source: batch invariant. Per group:
// pmaddubsw (unsigned values <= 63 times |q_x| <= 127: pairs below int16's limit), Q6_K's 32 * pair sums
// subtracted (exact: the pairs of (q - 32) * q_x), then pmaddwd by the int16 scales: the int32 lanes of
// (dot of 4 values) * scale.
template <class Src, int MX, int NW>
void tile_k(const BlockQ8Act* x, const ActSumsQ8* xs, int64_t nb8, const Src& src, float* out, int64_t ldo) {
    using Dec = typename Src::Decoder;
    __m256 acc[MX][NW];
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) acc[t][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb8; ++b) {
        for (int r = 0; r < NW; ++r) {
            // Decode streams the weights once: fetch the next tile's rows a tile ahead, as matmul_q8_0.
            if constexpr (MX == 1)
                src.prefetch_next_tile(r, b, NW);
            const Dec dec = src.block(r, b);
            const float dw = dec.d();
            for (int t = 0; t < MX; ++t) {
                const BlockQ8Act* xb = x + (t * nb8 + b) * 8;
                const ActSumsQ8& a = xs[t * nb8 + b];
                __m256i isum = _mm256_setzero_si256();
                for (int j = 0; j < 8; ++j) {
                    const __m256i v = dec.values(j), xj = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[j].qs));
                    __m256i p;
                    if constexpr (Dec::kSigned)  // |v| times x with v's sign: |v| <= 127, so pairs fit int16
                        p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(xj, v));
                    else
                        p = _mm256_maddubs_epi16(v, xj);
                    if constexpr (Dec::kOffset != 0) {  // offset * pair sums: 32 * pairs shifted (exact)
                        static_assert(Dec::kOffset == 32 || Dec::kOffset == 4);
                        const __m256i o32 = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.offset32_pairs[j]));
                        p = _mm256_sub_epi16(p, Dec::kOffset == 32 ? o32 : _mm256_srai_epi16(o32, 3));
                    }
                    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, dec.scales16(j)));
                }
                acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * xb[0].d), acc[t][r]);
                if constexpr (Dec::kMins) {
                    const __m128i mins = _mm_madd_epi16(dec.mins16(), _mm_load_si128(reinterpret_cast<const __m128i*>(a.isum)));
                    acc[t][r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_zextsi128_si256(mins)),
                                                 _mm256_set1_ps(dec.dmin() * xb[0].d), acc[t][r]);
                }
                if constexpr (Dec::kMins16) {  // a pair of 16-value mins per lane
                    const __m256i mins = _mm256_madd_epi16(dec.mins16x16(), _mm256_load_si256(reinterpret_cast<const __m256i*>(a.isum16)));
                    acc[t][r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(dec.dmin() * xb[0].d), acc[t][r]);
                }
            }
        }
    }
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) out[t * ldo + r] = hsum8(acc[t][r]);
}

#else

// Portable version: the same integers per lane and the same float steps (multiply, then add: no FMA here).
template <class Src, int MX, int NW>
void tile_k(const BlockQ8Act* x, const ActSumsQ8* xs, int64_t nb8, const Src& src, float* out, int64_t ldo) {
    using Dec = typename Src::Decoder;
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) {
            float acc[8] = {};
            for (int64_t b = 0; b < nb8; ++b) {
                const Dec dec = src.block(r, b);
                const BlockQ8Act* xb = x + (t * nb8 + b) * 8;
                int32_t isum[8] = {};
                for (int j = 0; j < 8; ++j)
                    for (int l = 0; l < 8; ++l) {
                        int32_t dot = 0;
                        for (int i = 4 * l; i < 4 * l + 4; ++i) dot += (dec.value(j, i) - Dec::kOffset) * int32_t{xb[j].qs[i]};
                        isum[l] += dot * dec.scale(j, 4 * l);
                    }
                const float scale = dec.d() * xb[0].d;
                for (int l = 0; l < 8; ++l) acc[l] += static_cast<float>(isum[l]) * scale;
                if constexpr (Dec::kMins) {
                    const int16_t* s = xs[t * nb8 + b].isum;
                    const float scale_m = dec.dmin() * xb[0].d;
                    for (int l = 0; l < 4; ++l)
                        acc[l] -= static_cast<float>(dec.group_imin(2 * l) * s[2 * l] + dec.group_imin(2 * l + 1) * s[2 * l + 1]) * scale_m;
                }
                if constexpr (Dec::kMins16) {
                    const int16_t* s = xs[t * nb8 + b].isum16;
                    const float scale_m = dec.dmin() * xb[0].d;
                    for (int l = 0; l < 8; ++l)
                        acc[l] -= static_cast<float>(dec.imin16(2 * l) * s[2 * l] + dec.imin16(2 * l + 1) * s[2 * l + 1]) * scale_m;
                }
            }
            const float* v = acc;
            out[t * ldo + r] = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
        }
}

#endif

// Single-row decode reads one weight row at a time, as matmul_q8_0 (kDecodeW).
constexpr int kTileXK = 4, kTileWK = 2;

template <class Dec>
void matmul_k_rows(ThreadPool& pool, const BlockQ8Act* xq, const ActSumsQ8* xs,
                   std::vector<std::vector<DecodedKBlock>>& decoded, int n, const WeightView& w, float* out) {
    const int64_t K = w.cols, N = w.rows, nb = K / 32, nb8 = K / 256;
    const size_t row_bytes = dtype_row_bytes(w.dtype, K);
    const auto* rows = static_cast<const uint8_t*>(w.data);
    const int tile_w = n == 1 ? kDecodeW : kTileWK;
    const TileTasks tasks(N, tile_w, pool.size());
    if (n > 1) reserve_per_thread(decoded, pool, static_cast<size_t>(kTileWK * nb8));  // one tile's rows decoded
    for_each_tile(pool, tasks, n, [&](int64_t tile_index, int x0, int nx, int thread) {
        const int64_t r0 = tile_index * tile_w;
        const int nw = static_cast<int>(std::min<int64_t>(tile_w, N - r0));
        const BlockQ8Act* x = xq + static_cast<size_t>(x0) * nb;
        const ActSumsQ8* s = xs + static_cast<size_t>(x0) * nb8;
        const uint8_t* wr = rows + r0 * row_bytes;
        float* o = out + static_cast<size_t>(x0) * N + r0;
        if (n == 1) {  // each block once: decoded in registers
            const DirectRows<Dec> direct{wr, row_bytes};
            static_assert(kDecodeW == 1);
            tile_k<DirectRows<Dec>, 1, 1>(x, s, nb8, direct, o, N);
            return;
        }
        // Several x rows: the tile's weight rows decoded once, then every x tile reads them.
        DecodedKBlock* g = decoded[thread].data();
        decode_rows<Dec>(wr, row_bytes, nw, nb8, g);
        const DecodedRows<Dec> rows_d{g, nb8};
        with_constant<kTileWK>(nw, [&](auto NW) {
            int t = 0;
            for (; t + kTileXK <= nx; t += kTileXK)
                tile_k<DecodedRows<Dec>, kTileXK, NW()>(x + t * nb, s + t * nb8, nb8, rows_d, o + t * N, N);
            if (t < nx)
                with_constant<kTileXK>(nx - t, [&](auto MX) {
                    tile_k<DecodedRows<Dec>, MX(), NW()>(x + t * nb, s + t * nb8, nb8, rows_d, o + t * N, N);
                });
        });
    });
}

}  // namespace

void matmul_q8_0(ThreadPool& pool, std::vector<BlockQ8Act>& xq, std::vector<float>& x_sums, std::vector<int32_t>& x_isums,
                 std::vector<std::vector<BlockQ8_0>>& unpacked, const float* x, int n, const WeightView& w, float* out) {
    const int64_t K = w.cols, N = w.rows, nb = K / 32;
    if (xq.size() < static_cast<size_t>(n * nb)) xq.resize(static_cast<size_t>(n * nb));
    // Per activation block, sum(q_x): Q4_0 / Q5_0 interleaved by 8 subtract 8 / 16 times it, Q4_1 / Q5_1 add
    // their min times d_x times it.
    const bool x8 = w.layout == WeightLayout::rows_x8;  // the 32-value types interleaved by 8 (matmul_x8.h)
    const bool int_sums = x8 && (w.dtype == DType::Q4_0 || w.dtype == DType::Q5_0), min_sums = has_block_mins(w.dtype);
    if (int_sums && x_isums.size() < static_cast<size_t>(n * nb)) x_isums.resize(static_cast<size_t>(n * nb));
    if (min_sums && x_sums.size() < static_cast<size_t>(n * nb)) x_sums.resize(static_cast<size_t>(n * nb));
    pool.run(n, [&](int64_t t, int) {
        quantize_activations_q8(x + t * K, xq.data() + t * nb, K);
        for (int64_t b = t * nb; int_sums && b < (t + 1) * nb; ++b) x_isums[b] = block_sum(xq[b]);
        for (int64_t b = t * nb; min_sums && b < (t + 1) * nb; ++b)
            x_sums[b] = activation_block_sum_q8_1(x + b * 32, xq[b]);
    });
    if (x8) {
        matmul_x8_b32(pool, xq.data(), x_isums.data(), x_sums.data(), n, w, out);
        return;
    }
    // Single-row decode reads every type's blocks in place where the set has q8_values.h (each block is used
    // once: unpacking it to scratch first cost a store and a load per block, and Q4_0 ran at a fifth of the
    // bandwidth); prefill unpacks a tile's rows once for all its x tiles.
#if defined(__AVX2__)
    const bool in_place = w.dtype == DType::Q8_0 || n == 1 || has_block_mins(w.dtype);
#else
    const bool in_place = w.dtype == DType::Q8_0;
#endif
    if (has_block_mins(w.dtype) && !kQ8TileMins)
        throw std::invalid_argument("matmul_q8_0: this kernel set's tile does not add " + std::string(dtype_name(w.dtype)) + "'s mins");
    const size_t row_bytes = dtype_row_bytes(w.dtype, K);
    const int tile_w = n == 1 ? kDecodeW : kTileW;
    if (!in_place) reserve_per_thread(unpacked, pool, static_cast<size_t>(tile_w * nb));  // one tile's rows as Q8_0
    for_each_tile(pool, TileTasks(N, tile_w, pool.size()), n, [&](int64_t tile_index, int x0, int nx, int thread) {
        const int64_t r0 = tile_index * tile_w;
        const int nw = static_cast<int>(std::min<int64_t>(tile_w, N - r0));
        const BlockQ8Act* xs = xq.data() + static_cast<size_t>(x0) * nb;
        const void* rows = static_cast<const uint8_t*>(w.data) + r0 * row_bytes;
        float* o = out + static_cast<size_t>(x0) * N + r0;
        if (in_place && (n == 1 || w.dtype != DType::Q8_0)) {
            // Rows of any such block type in place: a row at a time (decode), or in tiles (Q4_1 / Q5_1, whose
            // mins have no place in an unpacked Q8_0 block).
            auto run = [&](auto block_tag) {
                using Block = decltype(block_tag);
                const BlockRows<Block> wr{static_cast<const Block*>(rows), nb, xq.data(), x_sums.data()};
                if (n == 1)
                    decode_tile(xs, nb, wr, nw, o);
                else
                    with_constant<kTileW>(nw, [&](auto NW) { tile_rows_nw<NW()>(xs, nx, nb, wr, o, N); });
            };
            switch (w.dtype) {
            case DType::Q8_0: run(BlockQ8_0{}); break;
#if defined(__AVX2__)
            case DType::Q4_0: run(BlockQ4_0{}); break;
            case DType::Q5_0: run(BlockQ5_0{}); break;
            case DType::IQ4_NL: run(BlockIQ4_NL{}); break;
#if !defined(KVSCOPE_Q8_TILE_VNNI)
            case DType::Q4_1: run(BlockQ4_1{}); break;
            case DType::Q5_1: run(BlockQ5_1{}); break;
#endif
#endif
            default: throw std::invalid_argument("matmul_q8_0: " + std::string(dtype_name(w.dtype)) + " does not unpack to Q8_0");
            }
            return;
        }
        const BlockQ8_0* ws = static_cast<const BlockQ8_0*>(rows);
        if (!in_place) {  // Q4_0 / Q5_0 / IQ4_NL: the tile's rows as Q8_0 blocks, the same values
            BlockQ8_0* u = unpacked[thread].data();
            for (int r = 0; r < nw; ++r)
                unpack_row_q8_0(w.dtype, static_cast<const uint8_t*>(rows) + r * row_bytes, u + r * nb, K);
            ws = u;
        }
        if (n == 1) {  // sets without q8_values.h: unpacked rows
            decode_tile(xs, nb, BlockRows<BlockQ8_0>{ws, nb}, nw, o);
            return;
        }
        with_constant<kTileW>(nw, [&](auto NW) { tile_rows_nw<NW()>(xs, nx, nb, BlockRows<BlockQ8_0>{ws, nb}, o, N); });
    });
}

}  // namespace KVSCOPE_CPU_NAMESPACE

namespace KVSCOPE_CPU_NAMESPACE {

void matmul_q8_k(ThreadPool& pool, std::vector<BlockQ8Act>& xq, std::vector<ActSumsQ8>& sums,
                 std::vector<std::vector<DecodedKBlock>>& decoded, const float* x, int n, const WeightView& w, float* out) {
    const int64_t K = w.cols, nb = K / 32, nb8 = K / 256;
    if (xq.size() < static_cast<size_t>(n * nb)) xq.resize(static_cast<size_t>(n * nb));
    if (sums.size() < static_cast<size_t>(n * nb8)) sums.resize(static_cast<size_t>(n * nb8));
    pool.run(n, [&](int64_t t, int) {
        BlockQ8Act* q = xq.data() + t * nb;
        quantize_activations_q8_k(x + t * K, q, K);
        for (int64_t b = 0; b < nb; ++b) {
            ActSumsQ8& a = sums[t * nb8 + b / 8];
            // Sums of q_x per 32 values (isum: Q4_K / Q5_K's mins) and per 16 (isum16: Q2_K's mins, interleaved
            // Q6_K / Q3_K's offsets, matmul_x8.h), and 32 times each pair's (offset32_pairs: row-major Q6_K).
#if defined(__AVX2__)
            const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[b].qs)));
            _mm256_store_si256(reinterpret_cast<__m256i*>(a.offset32_pairs[b % 8]), _mm256_slli_epi16(pairs, 5));
            // Per 128-bit half (values 0-15, 16-31): its four sums of 4 added up, in every dword of the half.
            __m256i h = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
            h = _mm256_add_epi32(h, _mm256_shuffle_epi32(h, 0x4E));
            h = _mm256_add_epi32(h, _mm256_shuffle_epi32(h, 0xB1));
            const int32_t lo = _mm256_cvtsi256_si32(h), hi = _mm256_extract_epi32(h, 4);
#else
            int32_t lo = 0, hi = 0;
            for (int i = 0; i < 16; ++i) {
                const int32_t pair = q[b].qs[2 * i] + q[b].qs[2 * i + 1];
                a.offset32_pairs[b % 8][i] = static_cast<int16_t>(32 * pair);
                (i < 8 ? lo : hi) += pair;
            }
#endif
            a.isum16[2 * (b % 8)] = static_cast<int16_t>(lo);
            a.isum16[2 * (b % 8) + 1] = static_cast<int16_t>(hi);
            a.isum[b % 8] = static_cast<int16_t>(lo + hi);
        }
    });
    if (w.layout == WeightLayout::rows_x8) {
        matmul_x8_k(pool, xq.data(), sums.data(), n, w, out);
        return;
    }
    switch (w.dtype) {
    case DType::Q4_K: matmul_k_rows<Q4KDecoder>(pool, xq.data(), sums.data(), decoded, n, w, out); break;
    case DType::Q5_K: matmul_k_rows<Q5KDecoder>(pool, xq.data(), sums.data(), decoded, n, w, out); break;
    case DType::Q6_K: matmul_k_rows<Q6KDecoder>(pool, xq.data(), sums.data(), decoded, n, w, out); break;
    case DType::Q2_K: matmul_k_rows<Q2KDecoder>(pool, xq.data(), sums.data(), decoded, n, w, out); break;
    case DType::Q3_K: matmul_k_rows<Q3KDecoder>(pool, xq.data(), sums.data(), decoded, n, w, out); break;
    case DType::IQ4_XS: matmul_k_rows<IQ4XSDecoder>(pool, xq.data(), sums.data(), decoded, n, w, out); break;
    default: throw std::invalid_argument("matmul_q8_k: " + std::string(dtype_name(w.dtype)) + " is not a K type");
    }
}

}  // namespace KVSCOPE_CPU_NAMESPACE
