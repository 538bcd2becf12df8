#include "cpu/matmul_q8.h"

#include "cpu/simd.h"

#include <algorithm>
#include <cmath>

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

constexpr int kTileX = 4;  // activation rows per register tile
constexpr int kTileW = 4;  // weight rows per register tile

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
    constexpr int kAcc = MX * NW, kPadded = (kAcc + 15) / 16 * 16;
    v16f flat[kPadded];
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) flat[t * NW + r] = reinterpret_cast<v16f>(acc[t][r]);
    for (int i = kAcc; i < kPadded; ++i) flat[i] = v16f{};
    float sums[kPadded];
    for (int i = 0; i < kPadded; i += 16) store16(sums + i, hsum16x16(flat + i));
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
    switch (n - t) {
    case 3: tile<3, NW>(x + t * nb, nb, w, wstride, out + t * ldo, ldo); break;
    case 2: tile<2, NW>(x + t * nb, nb, w, wstride, out + t * ldo, ldo); break;
    case 1: tile<1, NW>(x + t * nb, nb, w, wstride, out + t * ldo, ldo); break;
    default: break;
    }
}

}  // namespace

void matmul_q8_0(ThreadPool& pool, std::vector<BlockQ8Act>& xq, const float* x, int n, const WeightView& w,
                 float* out) {
    const int64_t K = w.cols, N = w.rows, nb = K / 32;
    if (xq.size() < static_cast<size_t>(n * nb)) xq.resize(static_cast<size_t>(n * nb));
    pool.run(n, [&](int64_t t, int) { quantize_activations_q8(x + t * K, xq.data() + t * nb, K); });
    const auto* rows = static_cast<const BlockQ8_0*>(w.data);
    // Single-row decode: tiles of 8 weight rows, so each x block's loads serve twice as many rows.
    const int tile_w = n == 1 ? 8 : kTileW;
    const int64_t num_tiles = (N + tile_w - 1) / tile_w;
    const int64_t tiles_per_task = std::max<int64_t>(1, num_tiles / (pool.size() * 8));
    const int64_t num_tasks = (num_tiles + tiles_per_task - 1) / tiles_per_task;
    // Activation rows in chunks that stay in L2 while the task's weight rows pass over them.
    constexpr int kChunkX = 64;
    pool.run(num_tasks, [&](int64_t task, int) {
        const int64_t end = std::min(num_tiles, (task + 1) * tiles_per_task);
        for (int x0 = 0; x0 < n; x0 += kChunkX) {
            const int nx = std::min(kChunkX, n - x0);
            for (int64_t tile_index = task * tiles_per_task; tile_index < end; ++tile_index) {
                const int64_t r0 = tile_index * tile_w;
                const int nw = static_cast<int>(std::min<int64_t>(tile_w, N - r0));
                const BlockQ8Act* xs = xq.data() + static_cast<size_t>(x0) * nb;
                const BlockQ8_0* ws = rows + r0 * nb;
                float* o = out + static_cast<size_t>(x0) * N + r0;
                switch (nw) {
                case 8: tile<1, 8>(xs, nb, ws, nb, o, N); break;  // only with n == 1
                case 4: tile_rows_nw<4>(xs, nx, nb, ws, nb, o, N); break;
                case 3: tile_rows_nw<3>(xs, nx, nb, ws, nb, o, N); break;
                case 2: tile_rows_nw<2>(xs, nx, nb, ws, nb, o, N); break;
                default:  // a last tile of 1, or 5-7 rows of an 8-row tiling: row by row
                    for (int r = 0; r < nw; ++r) tile_rows_nw<1>(xs, nx, nb, ws + r * nb, nb, o + r, N);
                    break;
                }
            }
        }
    });
}

}  // namespace KVSCOPE_CPU_NAMESPACE
