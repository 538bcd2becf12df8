#include "cpu/matmul_q8.h"

#include "cpu/simd.h"

#include <algorithm>
#include <cmath>

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

// Register tiles per kernel set: kTileX activation rows by kTileW weight rows; single-row decode takes
// kDecodeW weight rows per tile, so that each x block's loads serve more rows. AVX2 and the baseline hold
// 6 accumulators and the operands of 3 x 2 block dots in 16 registers (measured best of 2x2 to 4x2).
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
constexpr int kTileX = 4;
constexpr int kTileW = 4;
#else
constexpr int kTileX = 3;
constexpr int kTileW = 2;
#endif
constexpr int kDecodeW = 8;

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512DQ__)

// Two consecutive 32-byte blocks in one register: block b in the low half, b + 1 (or zeros) in the high.
inline __m512i pair_i8(const int8_t* lo, const int8_t* hi) {
    const __m512i l = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo)));
    return hi ? _mm512_inserti64x4(l, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi)), 1) : l;
}
inline __m512 pair_f32(float lo, float hi) {
    return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

// out[t * ldo + r] for t < MX, r < NW. A pair of blocks at a time: vpdpbusd multiplies unsigned by
// signed bytes, so x goes in offset by +128 and the accumulator starts at -128 * sum(w), leaving the
// exact int32 sum of x * w per 4 bytes; 8 lanes per block are then scaled by d_w * d_x and accumulated
// in F32. Every output takes exactly these steps in this order, whatever MX and NW: batch invariant.
template <int MX, int NW>
void tile(const BlockQ8Act* x, int64_t nb, const BlockQ8_0* w, int64_t wstride, float* out, int64_t ldo) {
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
            xu[t] = _mm512_xor_si512(pair_i8(xb[0].qs, two ? xb[1].qs : nullptr), offset);
            xs[t] = pair_f32(xb[0].d, two ? xb[1].d : 0.0f);
        }
        // Decode streams the weights once from memory: fetch the next tile's rows a tile ahead (the
        // hardware prefetchers alone left the lm head at about half the bandwidth).
        if constexpr (MX == 1)
            for (int r = 0; r < NW; ++r) {
                __builtin_prefetch(w + (NW + r) * wstride + b);
                __builtin_prefetch(w + (NW + r) * wstride + b + 1);
            }
        for (int r = 0; r < NW; ++r) {
            const BlockQ8_0* wb = w + r * wstride + b;
            const __m512i wv = pair_i8(wb[0].qs, two ? wb[1].qs : nullptr);
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
template <int MX, int NW>
void tile(const BlockQ8Act* x, int64_t nb, const BlockQ8_0* w, int64_t wstride, float* out, int64_t ldo) {
    __m256 acc[MX][NW];
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) acc[t][r] = _mm256_setzero_ps();
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
            for (int r = 0; r < NW; ++r) __builtin_prefetch(w + (NW + r) * wstride + b);
        for (int r = 0; r < NW; ++r) {
            const BlockQ8_0& wb = w[r * wstride + b];
            const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.qs));
            const __m256i w_abs = _mm256_sign_epi8(wq, wq);
            const __m256 wd = _mm256_set1_ps(f16_scale(wb.d));
            for (int t = 0; t < MX; ++t) {
                const __m256 dot = _mm256_cvtepi32_ps(block_dot(w_abs, wq, xq[t]));
                acc[t][r] = _mm256_fmadd_ps(dot, _mm256_mul_ps(wd, xd[t]), acc[t][r]);
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
            for (int r = 0; r < NW; ++r) out[t * ldo + r] = sums[t * NW + r];
    } else {
        for (int t = 0; t < MX; ++t)
            for (int r = 0; r < NW; ++r) {
                __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[t][r]), _mm256_extractf128_ps(acc[t][r], 1));
                s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                out[t * ldo + r] = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
            }
    }
}

#elif defined(__SSSE3__) && KVSCOPE_CPU_LANES == 4

// The AVX2 path in two 16-byte halves: each half's products summed as in block_dot above, the halves
// added in int32 (exact), 4 lanes per block scaled and accumulated (multiply, then add: no FMA here).
inline __m128i half_dot(__m128i w_abs, __m128i w, __m128i x) {
    return _mm_madd_epi16(_mm_maddubs_epi16(w_abs, _mm_sign_epi8(x, w)), _mm_set1_epi16(1));
}

template <int MX, int NW>
void tile(const BlockQ8Act* x, int64_t nb, const BlockQ8_0* w, int64_t wstride, float* out, int64_t ldo) {
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
            for (int r = 0; r < NW; ++r) __builtin_prefetch(w + (NW + r) * wstride + b);
        for (int r = 0; r < NW; ++r) {
            const BlockQ8_0& wb = w[r * wstride + b];
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
template <int MX, int NW>
void tile(const BlockQ8Act* x, int64_t nb, const BlockQ8_0* w, int64_t wstride, float* out, int64_t ldo) {
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) {
            float s = 0;
            for (int64_t b = 0; b < nb; ++b) {
                const BlockQ8Act& xb = x[t * nb + b];
                const BlockQ8_0& wb = w[r * wstride + b];
                int32_t dot = 0;
                for (int j = 0; j < 32; ++j) dot += int32_t{xb.qs[j]} * int32_t{wb.qs[j]};
                s = std::fma(static_cast<float>(dot), f16_scale(wb.d) * xb.d, s);
            }
            out[t * ldo + r] = s;
        }
}

#endif

template <int NW>
void tile_rows_nw(const BlockQ8Act* x, int n, int64_t nb, const BlockQ8_0* w, int64_t wstride, float* out, int64_t ldo) {
    int t = 0;
    for (; t + kTileX <= n; t += kTileX) tile<kTileX, NW>(x + t * nb, nb, w, wstride, out + t * ldo, ldo);
    if (t < n)
        with_constant<kTileX>(n - t, [&](auto MX) { tile<MX(), NW>(x + t * nb, nb, w, wstride, out + t * ldo, ldo); });
}

}  // namespace

void matmul_q8_0(ThreadPool& pool, std::vector<BlockQ8Act>& xq, std::vector<std::vector<BlockQ8_0>>& unpacked,
                 const float* x, int n, const WeightView& w, float* out) {
    const int64_t K = w.cols, N = w.rows, nb = K / 32;
    if (xq.size() < static_cast<size_t>(n * nb)) xq.resize(static_cast<size_t>(n * nb));
    pool.run(n, [&](int64_t t, int) { quantize_activations_q8(x + t * K, xq.data() + t * nb, K); });
    const bool in_place = w.dtype == DType::Q8_0;
    const auto* rows = static_cast<const BlockQ8_0*>(w.data);
    const size_t row_bytes = dtype_row_bytes(w.dtype, K);
    // Single-row decode: tiles of kDecodeW weight rows, so that each x block's loads serve more rows.
    const int tile_w = n == 1 ? kDecodeW : kTileW;
    if (!in_place) {  // per-thread room for one tile's rows unpacked to Q8_0
        if (unpacked.size() < static_cast<size_t>(pool.size())) unpacked.resize(pool.size());
        for (auto& u : unpacked)
            if (u.size() < static_cast<size_t>(kDecodeW * nb)) u.resize(static_cast<size_t>(kDecodeW * nb));
    }
    const int64_t num_tiles = (N + tile_w - 1) / tile_w;
    const int64_t tiles_per_task = std::max<int64_t>(1, num_tiles / (pool.size() * 8));
    const int64_t num_tasks = (num_tiles + tiles_per_task - 1) / tiles_per_task;
    // Activation rows in chunks that stay in L2 while the task's weight rows pass over them.
    constexpr int kChunkX = 64;
    pool.run(num_tasks, [&](int64_t task, int thread) {
        const int64_t end = std::min(num_tiles, (task + 1) * tiles_per_task);
        for (int x0 = 0; x0 < n; x0 += kChunkX) {
            const int nx = std::min(kChunkX, n - x0);
            for (int64_t tile_index = task * tiles_per_task; tile_index < end; ++tile_index) {
                const int64_t r0 = tile_index * tile_w;
                const int nw = static_cast<int>(std::min<int64_t>(tile_w, N - r0));
                const BlockQ8Act* xs = xq.data() + static_cast<size_t>(x0) * nb;
                const BlockQ8_0* ws = rows + r0 * nb;
                if (!in_place) {  // Q4_0 / Q5_0 / IQ4_NL: the tile's rows as Q8_0 blocks, the same values
                    BlockQ8_0* u = unpacked[thread].data();
                    for (int r = 0; r < nw; ++r)
                        unpack_row_q8_0(w.dtype, static_cast<const uint8_t*>(w.data) + (r0 + r) * row_bytes, u + r * nb, K);
                    ws = u;
                }
                float* o = out + static_cast<size_t>(x0) * N + r0;
                if (n == 1 && nw == kDecodeW)
                    tile<1, kDecodeW>(xs, nb, ws, nb, o, N);
                else if (nw <= kTileW)
                    with_constant<kTileW>(nw, [&](auto NW) { tile_rows_nw<NW()>(xs, nx, nb, ws, nb, o, N); });
                else  // the last tile of a decode tiling, past kTileW rows: row by row
                    for (int r = 0; r < nw; ++r) tile_rows_nw<1>(xs, nx, nb, ws + r * nb, nb, o + r, N);
            }
        }
    });
}

}  // namespace KVSCOPE_CPU_NAMESPACE
