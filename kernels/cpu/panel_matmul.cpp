#include "cpu/panel_matmul.h"

#include "cpu/simd.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

constexpr int kTileX = 6;       // x rows per register tile
constexpr int kTilePanels = 4;  // panels per register tile: 6 x 4 = 24 accumulators, 64 output columns

int64_t num_panels(int64_t rows) { return (rows + kPanelRows - 1) / kPanelRows; }
size_t elem_bytes(DType dt) { return dt == DType::F32 ? 4 : 2; }  // the panel_packable types

// Loaders: load<Odd>(p, k) gives the 16 weights of panel p at k as F32; Odd is k's parity, known at
// compile time in the kernel. F32 or F16 (T = uint16_t) panels: 16 consecutive values per k.
template <class T>
struct PlainPanels {
    static constexpr bool kPairs = false;
    const T* base;
    int64_t K;
    template <int Odd>
    v16f load(int64_t p, int64_t k) const {
        const T* v = base + (p * K + k) * kPanelRows;
        if constexpr (std::is_same_v<T, float>)
            return load16(v);
        else
            return load16_f16(v);
    }
};

// BF16 panels hold k in pairs: word j of pair q is w[j][2q] in the low half and w[j][2q+1] in the high
// half. Widening is then one shift (even k) or one mask (odd k) per vector; the plain layout needed a
// zero-extension and a shift, which held BF16 about 25% below F16.
struct BF16Panels {
    static constexpr bool kPairs = true;
    const uint32_t* base;
    int64_t pairs;  // per panel: K / 2 rounded up
    template <int Odd>
    v16f load(int64_t p, int64_t k) const {
        v16u32 word;
        std::memcpy(&word, base + (p * pairs + k / 2) * kPanelRows, sizeof word);
        word = Odd ? (word & 0xffff0000u) : (word << 16);
        v16f f;
        std::memcpy(&f, &word, sizeof f);
        return f;
    }
};

// out[t * ldo + c] for t < MX, c < cols (cols <= 16 * NP): x rows t against panels p0 .. p0 + NP - 1.
// MX and NP are compile-time so the accumulators live in registers.
template <int MX, int NP, class Panels>
void tile(const float* x, int64_t K, const Panels& w, int64_t p0, float* out, int64_t ldo, int64_t cols) {
    v16f acc[MX][NP];
    for (int t = 0; t < MX; ++t)
        for (int p = 0; p < NP; ++p) acc[t][p] = v16f{};
    auto step = [&]<int Odd>(int64_t k) {
        v16f wv[NP];
        for (int p = 0; p < NP; ++p) wv[p] = w.template load<Odd>(p0 + p, k);
        for (int t = 0; t < MX; ++t) {
            v16f xb = splat16(x[t * K + k]);
            // Keep the broadcast in a register: GCC would otherwise fold it into each of the NP fmas as a
            // memory operand, NP broadcast loads instead of one (the same trap as matmul.h's weight loads).
            if constexpr (NP > 1) keep_in_register(xb);
            for (int p = 0; p < NP; ++p) acc[t][p] += xb * wv[p];
        }
    };
    int64_t k = 0;
    if constexpr (Panels::kPairs)  // parity known at compile time (unrolling F16 this way slowed it)
        for (; k + 1 < K; k += 2) {
            step.template operator()<0>(k);
            step.template operator()<1>(k + 1);
        }
    for (; k < K; ++k) step.template operator()<0>(k);  // BF16: at most the even last k of an odd K
    for (int t = 0; t < MX; ++t)
        for (int p = 0; p < NP; ++p) {
            const int64_t c = int64_t{p} * kPanelRows, valid = std::min<int64_t>(kPanelRows, cols - c);
            if (valid == kPanelRows) {
                store16(out + t * ldo + c, acc[t][p]);
            } else if (valid > 0) {  // the last panel's rows past w.rows are padding
                float tmp[kPanelRows];
                store16(tmp, acc[t][p]);
                // A loop: with memcpy, GCC 12 compiling for AVX2 or the baseline warns of a negative length
                // (-Wstringop-overflow) on a path that valid > 0 rules out.
                for (int64_t j = 0; j < valid; ++j) out[t * ldo + c + j] = tmp[j];
            }
        }
}

template <int NP, class Panels>
void tile_x(const float* x, int mx, int64_t K, const Panels& w, int64_t p0, float* out, int64_t ldo, int64_t cols) {
    switch (mx) {
    case 6: tile<6, NP>(x, K, w, p0, out, ldo, cols); break;
    case 5: tile<5, NP>(x, K, w, p0, out, ldo, cols); break;
    case 4: tile<4, NP>(x, K, w, p0, out, ldo, cols); break;
    case 3: tile<3, NP>(x, K, w, p0, out, ldo, cols); break;
    case 2: tile<2, NP>(x, K, w, p0, out, ldo, cols); break;
    default: tile<1, NP>(x, K, w, p0, out, ldo, cols); break;
    }
}

template <class Panels>
void tile_any(const float* x, int mx, int64_t K, const Panels& w, int64_t p0, int np, float* out, int64_t ldo,
              int64_t cols) {
    switch (np) {
    case 4: tile_x<4>(x, mx, K, w, p0, out, ldo, cols); break;
    case 3: tile_x<3>(x, mx, K, w, p0, out, ldo, cols); break;
    case 2: tile_x<2>(x, mx, K, w, p0, out, ldo, cols); break;
    default: tile_x<1>(x, mx, K, w, p0, out, ldo, cols); break;
    }
}

template <class Panels>
void run(ThreadPool& pool, const float* x, int n, const WeightView& w, const Panels& panels, float* out) {
    const int64_t N = w.rows, K = w.cols;
    const int64_t groups = (num_panels(N) + kTilePanels - 1) / kTilePanels;  // 64 output columns each
    const int threads = pool.size();
    // Enough tasks for balance, few enough that each streams a good run of weight panels.
    const int64_t group_tasks = std::min<int64_t>(groups, threads * 8);
    const int64_t groups_per_task = (groups + group_tasks - 1) / group_tasks;
    // Narrow weights (k/v projections: 3 groups) leave threads idle: split the x rows as well.
    const int64_t x_parts = group_tasks >= 2 * threads ? 1 : std::min<int64_t>((n + kTileX - 1) / kTileX, 2 * threads);
    const int64_t rows_per_part = ((n + x_parts - 1) / x_parts + kTileX - 1) / kTileX * kTileX;
    // x rows in chunks that stay in L2 (about 384 KiB) while a group's panels pass over them.
    const int64_t chunk_rows = std::max<int64_t>(kTileX, (384 << 10) / (K * 4) / kTileX * kTileX);
    pool.run(group_tasks * x_parts, [&](int64_t task, int) {
        const int64_t g0 = task / x_parts * groups_per_task, g1 = std::min(groups, g0 + groups_per_task);
        const int64_t r0 = task % x_parts * rows_per_part, r1 = std::min<int64_t>(n, r0 + rows_per_part);
        for (int64_t c0 = r0; c0 < r1; c0 += chunk_rows) {
            const int64_t c1 = std::min(r1, c0 + chunk_rows);
            for (int64_t g = g0; g < g1; ++g) {
                const int64_t p0 = g * kTilePanels, col0 = p0 * kPanelRows;
                const int np = static_cast<int>(std::min<int64_t>(kTilePanels, num_panels(N) - p0));
                for (int64_t t = c0; t < c1; t += kTileX)
                    tile_any(x + t * K, static_cast<int>(std::min<int64_t>(kTileX, c1 - t)), K, panels, p0, np,
                             out + t * N + col0, N, N - col0);
            }
        }
    });
}

// Copies w's rows into panels of panel_elems values each (zeros where no row is): value (j, k) of panel p
// goes to slot(j, k) in it.
template <class T, class Slot>
void pack(ThreadPool& pool, const WeightView& w, T* dst, int64_t panel_elems, Slot slot) {
    const T* src = static_cast<const T*>(w.data);
    const int64_t K = w.cols;
    pool.run(num_panels(w.rows), [&](int64_t p, int) {
        T* panel = dst + static_cast<size_t>(p) * panel_elems;
        std::fill(panel, panel + panel_elems, T{});
        for (int j = 0; j < kPanelRows && p * kPanelRows + j < w.rows; ++j) {
            const T* row = src + static_cast<size_t>(p * kPanelRows + j) * K;
            for (int64_t k = 0; k < K; ++k) panel[slot(j, k)] = row[k];
        }
    });
}

}  // namespace

size_t panel_bytes(const WeightView& w) {
    const int64_t K = w.dtype == DType::BF16 ? (w.cols + 1) / 2 * 2 : w.cols;  // BF16 pairs k
    return static_cast<size_t>(num_panels(w.rows)) * kPanelRows * K * elem_bytes(w.dtype);
}

WeightView pack_panels(ThreadPool& pool, const WeightView& w, void* dst) {
    const int64_t K = w.cols;
    auto plain = [](int j, int64_t k) { return k * kPanelRows + j; };
    if (w.dtype == DType::F32)
        pack(pool, w, static_cast<float*>(dst), K * kPanelRows, plain);
    else if (w.dtype == DType::F16)
        pack(pool, w, static_cast<uint16_t*>(dst), K * kPanelRows, plain);
    else  // BF16: k in pairs (see BF16Panels); after an odd K's last value the high half stays zero
        pack(pool, w, static_cast<uint16_t*>(dst), (K + 1) / 2 * 2 * kPanelRows,
             [](int j, int64_t k) { return k / 2 * 2 * kPanelRows + 2 * j + (k & 1); });
    WeightView out = w;
    out.data = dst;
    out.layout = WeightLayout::panels16;
    return out;
}

void matmul_panels(ThreadPool& pool, const float* x, int n, const WeightView& w, float* out) {
    switch (w.dtype) {
    case DType::F32: run(pool, x, n, w, PlainPanels<float>{static_cast<const float*>(w.data), w.cols}, out); break;
    case DType::F16: run(pool, x, n, w, PlainPanels<uint16_t>{static_cast<const uint16_t*>(w.data), w.cols}, out); break;
    case DType::BF16: run(pool, x, n, w, BF16Panels{static_cast<const uint32_t*>(w.data), (w.cols + 1) / 2}, out); break;
    default: break;  // pack_panels never makes other types
    }
}

}  // namespace KVSCOPE_CPU_NAMESPACE
