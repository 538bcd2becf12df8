#include "cpu/panel_matmul.h"

#include "cpu/simd.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

// Register tiles per kernel set: up to kTileX x rows by up to 4 panels of 16 columns, at most
// kTileAccumulators accumulator registers. AVX-512: 6 x 4 panels (24 zmm, 10 loads per 24 FMAs). AVX2: 6
// x 1 panel (12 ymm: the classic 6 x 16 AVX2 kernel, 8 loads per 12 FMAs; 3 x 2 panels measured slower).
// The baseline: 2 x 1 panel (8 xmm; no FMA, so each product needs a temporary as well; 3 x 1 and 4 x 1
// measured slower). Tiles of fewer x rows (decode, a chunk's last rows) take more panels, up to the same
// accumulator count: independent FMA chains, and each x broadcast serves more columns.
#if KVSCOPE_CPU_LANES == 16
constexpr int kTileX = 6;
constexpr int kTileAccumulators = 24;
#elif KVSCOPE_CPU_LANES == 8
constexpr int kTileX = 6;
constexpr int kTileAccumulators = 12;
#else
constexpr int kTileX = 2;
constexpr int kTileAccumulators = 8;
#endif
constexpr int kPanelVectors = kPanelRows / kLanes;  // vectors per panel and k
static_assert(kPanelRows % kLanes == 0);

constexpr int kGroupPanels = 4;  // the most panels per tile; tasks take whole groups of them (64 columns)

// Panels per tile of mx x rows.
constexpr int tile_panels(int mx) { return std::clamp(kTileAccumulators / (mx * kPanelVectors), 1, kGroupPanels); }
static_assert(tile_panels(kTileX) * kTileX * kPanelVectors <= kTileAccumulators);

// Single-row decode (run_decode): the most panels one tile reads side by side, and how far ahead of each
// panel's stream it prefetches. bench-135m's F16 matrices (K = 576 or 1536: panels of 18 or 48 KiB) streamed
// from memory at 40-65% of the read bandwidth with 4 panels a tile and tasks of whole groups (the two threads'
// shares as unequal as 5 to 4, or 2 to 1 for the k/v projections); with 8 panels, tasks balanced per thread
// and 1 KiB ahead, 56-74% (Zen 5, 2 threads, alternating rounds; without the prefetch 46-67%; 12 or 16 panels,
// or 512 or 2048 bytes ahead, no better), and bench-135m's F16 and BF16 tg128 rose 12-25% (F32: within the
// noise). Sets with 16 registers keep tile_panels(1).
constexpr int kDecodePanels = kVectorRegisters == 32 ? 8 : tile_panels(1);
constexpr int kPrefetchBytes = 1024;
// Long panels (K x 16 x element bytes, from 64 KiB: F16 / BF16 from K = 2048) go 4 to a tile: 8 long streams
// per thread read slower than 4 on the Zen 5. bench-1b-f16 tg64 (K = 2048 and 8192), alternating pairs:
// 20.6 / 21.9 / 22.2 / 20.5 t/s with 8 -> 25.6 / 24.4 / 24.9 / 23.8 with 4 (67-73% of the read -> 75-87%).
// Short ones keep 8: bench-135m-f16 (K = 576, 18 KiB) fell 8% with 4, and bench-135m-f32 (36 KiB) ran no
// better with 4 at a 32 KiB threshold.
constexpr int64_t kLongPanelBytes = int64_t{64} << 10;
constexpr int kLongPanelDecodePanels = std::min(4, kDecodePanels);

int64_t num_panels(int64_t rows) { return (rows + kPanelRows - 1) / kPanelRows; }
size_t elem_bytes(DType dt) { return dt == DType::F32 ? 4 : 2; }  // the panel_packable types

// Loaders: panel(p) is panel p's first element; load<Odd>(panel, k, v) gives weights kLanes * v ..
// kLanes * (v + 1) - 1 of that panel at k as F32; Odd is k's parity, known at compile time in the kernel.
// The tile takes each panel's pointer once, before its k loop: computed from p, k / 2 and the panel
// size at every load, the address arithmetic (imul, sar, shl, lea) outnumbered the BF16 decode loop's
// vector instructions.
// F32 or F16 (T = uint16_t) panels: 16 consecutive values per k.
template <class T>
struct PlainPanels {
    static constexpr bool kPairs = false;
    const T* base;
    int64_t K;
    const T* panel(int64_t p) const { return base + p * K * kPanelRows; }
    template <int Odd>
    static vf load(const T* panel, int64_t k, int v) {
        const T* ptr = panel + k * kPanelRows + v * kLanes;
        if constexpr (std::is_same_v<T, float>)
            return loadv(ptr);
        else
            return loadv_f16(ptr);
    }
};

// BF16 panels hold k in pairs: word j of pair q is w[j][2q] in the low half and w[j][2q+1] in the high
// half. Widening is then one shift (even k) or one mask (odd k) per vector; the plain layout needed a
// zero-extension and a shift, which held BF16 about 25% below F16.
struct BF16Panels {
    static constexpr bool kPairs = true;
    const uint32_t* base;
    int64_t pairs;  // per panel: K / 2 rounded up
    const uint32_t* panel(int64_t p) const { return base + p * pairs * kPanelRows; }
    static vu32 words(const uint32_t* panel, int64_t k, int v) {
        vu32 word;
        std::memcpy(&word, panel + (k >> 1) * kPanelRows + v * kLanes, sizeof word);
        return word;
    }
    static vf even(vu32 word) { return bit_cast_vector<vf>(word << 16); }
    static vf odd(vu32 word) { return bit_cast_vector<vf>(word & 0xffff0000u); }
    template <int Odd>
    static vf load(const uint32_t* panel, int64_t k, int v) {
        const vu32 word = words(panel, k, v);
        return Odd ? odd(word) : even(word);
    }
};

// out[t * ldo + c] for t < MX, c < cols (cols <= 16 * NP): x rows t against panels p0 .. p0 + NP - 1.
// MX and NP are compile-time so the accumulators live in registers.
template <int MX, int NP, class Panels>
void tile(const float* x, int64_t K, const Panels& w, int64_t p0, float* out, int64_t ldo, int64_t cols) {
    constexpr int NV = NP * kPanelVectors;  // accumulator vectors per x row
    vf acc[MX][NV];
    for (int t = 0; t < MX; ++t)
        for (int v = 0; v < NV; ++v) acc[t][v] = vf{};
    decltype(w.panel(0)) panel[NP];
    for (int p = 0; p < NP; ++p) panel[p] = w.panel(p0 + p);
    // Decode: each panel's stream kPrefetchBytes ahead, once per 64-byte line (a k holds 16 values of each
    // panel: 64 bytes of F32, 32 of F16 and BF16). The prefetches past a task's last k fetch its neighbour's
    // first lines, which the next task on this or the other thread reads.
    constexpr int64_t kStepBytes = kPanelRows * (std::is_same_v<std::remove_cvref_t<decltype(*panel[0])>, float> ? 4 : 2);
    auto prefetch = [&](int64_t k) {
        if constexpr (MX == 1)
            if ((k * kStepBytes) % 64 == 0)
                for (int p = 0; p < NP; ++p)
                    __builtin_prefetch(reinterpret_cast<const char*>(panel[p]) + k * kStepBytes + kPrefetchBytes, 0, 3);
    };
    auto step = [&]<int Odd>(int64_t k) {
        prefetch(k);
        if constexpr (kVectorRegisters == 16 && MX <= 2) {
            // Few x rows (decode) with 16 registers: the broadcasts first, then each weight vector used as
            // soon as it is loaded, so that NV loaded (and widened) weights are never live at once.
            vf xb[MX];
            for (int t = 0; t < MX; ++t) xb[t] = splatv(x[t * K + k]);
            for (int v = 0; v < NV; ++v) {
                const vf wv = Panels::template load<Odd>(panel[v / kPanelVectors], k, v % kPanelVectors);
                for (int t = 0; t < MX; ++t) acc[t][v] = fmav(xb[t], wv, acc[t][v]);
            }
            return;
        }
        vf wv[NV];
        for (int v = 0; v < NV; ++v) wv[v] = Panels::template load<Odd>(panel[v / kPanelVectors], k, v % kPanelVectors);
        for (int t = 0; t < MX; ++t) {
            vf xb = splatv(x[t * K + k]);
            // Keep the broadcast in a register: GCC would otherwise fold it into each of the NV fmas as a
            // memory operand, NV broadcast loads instead of one (the same trap as matmul.h's weight loads).
            if constexpr (NV > 1) keep_in_register(xb);
            for (int v = 0; v < NV; ++v) acc[t][v] = fmav(xb, wv[v], acc[t][v]);
        }
    };
    int64_t k = 0;
#if defined(__AVX512BF16__) && KVSCOPE_CPU_LANES == 16
    if constexpr (Panels::kPairs) {
        // AVX512-BF16 (Zen 4 and later, Sapphire Rapids and later): one vdpbf16ps takes a k pair of every lane,
        // where the FMA path below widens each half and issues two FMAs. matmul rounds BF16's activations to
        // BF16 first (round_activations_for), so their top halves are exact, and a product of two BF16 is exact
        // in F32: the sums differ from the FMA path's in order only (the instruction adds the odd k's product
        // first), and are the same for every MX, so decode rows still equal prefill's. An odd K's last pair
        // has zeros in its high half, weights and x.
        for (; k < K; k += 2) {
            prefetch(k);
            vu32 wv[NV];
            for (int v = 0; v < NV; ++v) wv[v] = Panels::words(panel[v / kPanelVectors], k, v % kPanelVectors);
            for (int t = 0; t < MX; ++t) {
                uint32_t lo, hi = 0;
                std::memcpy(&lo, x + t * K + k, sizeof lo);
                if (k + 1 < K) std::memcpy(&hi, x + t * K + k + 1, sizeof hi);
                const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>((lo >> 16) | (hi & 0xffff0000u)));
                for (int v = 0; v < NV; ++v) acc[t][v] = (vf)_mm512_dpbf16_ps((__m512)acc[t][v], xb, (__m512bh)wv[v]);
            }
        }
    }
#endif
    if constexpr (Panels::kPairs && MX == 1) {
        // One x row (single-stream decode): each word of a pair loaded once and widened both ways, k then
        // k + 1 into the same accumulator (the order of the other paths, so the same sums). Through step,
        // a word per k, the BF16 GEMV ran at 58 GB/s on one AVX2 core from L2 (F16: 88); this way 67.
        for (; k + 1 < K; k += 2) {
            prefetch(k);
            const vf x0 = splatv(x[k]), x1 = splatv(x[k + 1]);
            for (int v = 0; v < NV; ++v) {
                const vu32 word = Panels::words(panel[v / kPanelVectors], k, v % kPanelVectors);
                acc[0][v] = fmav(x0, Panels::even(word), acc[0][v]);
                acc[0][v] = fmav(x1, Panels::odd(word), acc[0][v]);
            }
        }
    } else if constexpr (Panels::kPairs) {  // parity known at compile time (unrolling F16 this way slowed it)
        for (; k + 1 < K; k += 2) {
            step.template operator()<0>(k);
            step.template operator()<1>(k + 1);
        }
    }
    for (; k < K; ++k) step.template operator()<0>(k);  // BF16: at most the even last k of an odd K
    for (int t = 0; t < MX; ++t)
        for (int p = 0; p < NP; ++p) {
            const int64_t c = int64_t{p} * kPanelRows, valid = std::min<int64_t>(kPanelRows, cols - c);
            if (valid == kPanelRows) {
                for (int v = 0; v < kPanelVectors; ++v)
                    storev(out + t * ldo + c + v * kLanes, acc[t][p * kPanelVectors + v]);
            } else if (valid > 0) {  // the last panel's rows past w.rows are padding
                float tmp[kPanelRows];
                for (int v = 0; v < kPanelVectors; ++v) storev(tmp + v * kLanes, acc[t][p * kPanelVectors + v]);
                // A loop: with memcpy, GCC 12 compiling for AVX2 or the baseline warns of a negative length
                // (-Wstringop-overflow) on a path that valid > 0 rules out.
                for (int64_t j = 0; j < valid; ++j) out[t * ldo + c + j] = tmp[j];
            }
        }
}

// x rows [x, x + mx) against panels [p0, p1) (up to kGroupPanels of them), in tiles of tile_panels(mx)
// panels. w holds panel p at index p - wp0.
template <class Panels>
void tile_group(const float* x, int mx, int64_t K, const Panels& w, int64_t wp0, int64_t p0, int64_t p1, int64_t N,
                float* out) {
    with_constant<kTileX>(mx, [&](auto MX) {
        constexpr int NP = tile_panels(MX());
        for (int64_t p = p0; p < p1; p += NP) {
            const int64_t col0 = p * kPanelRows;
            with_constant<NP>(static_cast<int>(std::min<int64_t>(NP, p1 - p)), [&](auto np) {
                tile<MX(), np()>(x, K, w, p - wp0, out + col0, N, N - col0);
            });
        }
    });
}

// Sets without F16C widen F16 in integer lanes, several instructions per vector: when a group's panels
// serve more than one x tile, they are widened to F32 once, into per-thread scratch, and the F32 tiles
// run on that copy (the same values, so the same results as widening in the tile).
#if defined(__F16C__) || defined(__AVX512F__)
constexpr bool kWidenF16Groups = false;
#else
constexpr bool kWidenF16Groups = true;
#endif

// One x row: tasks of at most kDecodePanels panels (kLongPanelDecodePanels where panels are long), each read
// in one tile, their number a multiple of the threads' so that a small matrix's few tasks split evenly; a
// thread takes its own region's tasks first, so that its panels follow one another in memory. Every output
// is still one FMA chain over k.
template <class Panels>
void run_decode(ThreadPool& pool, const float* x, const WeightView& w, const Panels& panels, float* out) {
    const int64_t N = w.rows, K = w.cols, P = num_panels(N);
    if (P == 0) return;
    const int threads = pool.size();
    const int64_t tile_max = K * kPanelRows * elem_bytes(w.dtype) >= kLongPanelBytes ? kLongPanelDecodePanels : kDecodePanels;
    const int64_t wanted = std::max<int64_t>(threads, (P + tile_max - 1) / tile_max);
    const int64_t balanced = std::min(P, (wanted + threads - 1) / threads * threads);
    const int64_t panels_per_task = (P + balanced - 1) / balanced;
    const int64_t tasks = (P + panels_per_task - 1) / panels_per_task;
    pool.run(tasks, [&](int64_t t, int) {
        const int64_t p0 = t * panels_per_task, np = std::min(panels_per_task, P - p0);
        with_constant<kDecodePanels>(static_cast<int>(np), [&](auto NP) {
            tile<1, NP()>(x, K, panels, p0, out + p0 * kPanelRows, N, N - p0 * kPanelRows);
        });
    });
}

template <class Panels>
void run(ThreadPool& pool, const float* x, int n, const WeightView& w, const Panels& panels, float* out) {
    if (n == 1) return run_decode(pool, x, w, panels, out);
    const int64_t N = w.rows, K = w.cols;
    const int64_t groups = (num_panels(N) + kGroupPanels - 1) / kGroupPanels;  // 64 output columns each
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
                const int64_t p0 = g * kGroupPanels, p1 = std::min(num_panels(N), p0 + kGroupPanels);
                if constexpr (kWidenF16Groups && std::is_same_v<Panels, PlainPanels<uint16_t>>) {
                    if (c1 - c0 > kTileX) {
                        // Grows on first use only; the pool's threads live as long as the backend.
                        thread_local std::vector<float> widened;
                        const int64_t count = (p1 - p0) * K * kPanelRows;
                        if (widened.size() < static_cast<size_t>(count)) widened.resize(count);
                        const uint16_t* src = panels.base + p0 * K * kPanelRows;
                        for (int64_t i = 0; i < count; i += kLanes) storev(widened.data() + i, loadv_f16(src + i));
                        const PlainPanels<float> f32{widened.data(), K};
                        for (int64_t t = c0; t < c1; t += kTileX)
                            tile_group(x + t * K, static_cast<int>(std::min<int64_t>(kTileX, c1 - t)), K, f32, p0, p0,
                                       p1, N, out + t * N);
                        continue;
                    }
                }
                for (int64_t t = c0; t < c1; t += kTileX)
                    tile_group(x + t * K, static_cast<int>(std::min<int64_t>(kTileX, c1 - t)), K, panels, 0, p0, p1,
                               N, out + t * N);
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
