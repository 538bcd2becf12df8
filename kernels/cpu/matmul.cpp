#include "cpu/matmul.h"

#include "cpu/matmul_q8.h"
#include "cpu/panel_matmul.h"
#include "cpu/quant.h"
#include "cpu/simd.h"
#include "cpu/tile_tasks.h"

#include <algorithm>
#include <cmath>

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

// Register tiles per kernel set: kTileX x rows by kTileW weight rows, one accumulator vector each, plus
// the x vectors of a k step. AVX-512: 4 x 6 (24 zmm); AVX2: 3 x 4 (12 ymm + 3 x); baseline: 2 x 4.
#if KVSCOPE_CPU_LANES == 16
constexpr int kTileX = 4;
constexpr int kTileW = 6;
#elif KVSCOPE_CPU_LANES == 8
constexpr int kTileX = 3;
constexpr int kTileW = 4;
#else
constexpr int kTileX = 2;
constexpr int kTileW = 4;
#endif

// Weight rows as the tile kernel reads them: kLanes values at k (k a multiple of kLanes) as F32, and
// single values for the tail. Each loader turns stored values into exactly the same floats as
// dequantize_row.
struct F32Rows {
    const float* base;
    size_t stride;  // floats between rows
    vf load(int r, int64_t k) const { return loadv(base + r * stride + k); }
    float at(int r, int64_t k) const { return base[r * stride + k]; }
};
struct F16Rows {
    const uint16_t* base;
    size_t stride;
    vf load(int r, int64_t k) const { return loadv_f16(base + r * stride + k); }
    float at(int r, int64_t k) const { return f16_to_f32(base[r * stride + k]); }
};
struct BF16Rows {
    const uint16_t* base;
    size_t stride;
    vf load(int r, int64_t k) const { return loadv_bf16(base + r * stride + k); }
    float at(int r, int64_t k) const { return bf16_to_f32(base[r * stride + k]); }
};

// out[t * ldo + r] for t < MX, r < NW: the dot products of x rows with weight rows. MX and NW are
// compile-time, so the MX x NW accumulators live in registers (a runtime bound spills them to memory).
template <int MX, int NW, class Rows>
inline void tile(const float* x, int64_t K, const Rows& w, float* out, int64_t ldo) {
    vf acc[MX][NW];
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) acc[t][r] = vf{};
    const int64_t kv = K / kLanes * kLanes;
    for (int64_t k = 0; k < kv; k += kLanes) {
        vf xv[MX];
        for (int t = 0; t < MX; ++t) xv[t] = loadv(x + t * K + k);
        for (int r = 0; r < NW; ++r) {
            vf wv = w.load(r, k);
            // Keep wv in a register: left alone, GCC folds the load into each of the MX fmas (a memory
            // operand each), so the loop issued MX times the weight loads and ran load-bound at a third
            // of the FMA peak. With one x row the folded load is the better code.
            if constexpr (MX > 1) keep_in_register(wv);
            for (int t = 0; t < MX; ++t) acc[t][r] = fmav(wv, xv[t], acc[t][r]);
        }
    }
    float sums[kTileSums<MX, NW>];
    tile_sums(acc, sums);
    for (int t = 0; t < MX; ++t)
        for (int r = 0; r < NW; ++r) {
            float s = sums[t * NW + r];
            // Explicit fma: left to contraction, the compiler fused this in some tile shapes and not in
            // others, and a row's result depended on the batch it ran in.
            for (int64_t k = kv; k < K; ++k) s = std::fma(w.at(r, k), x[t * K + k], s);
            out[t * ldo + r] = s;
        }
}

template <int NW, class Rows>
inline void tile_rows_nw(const float* x, int n, int64_t K, const Rows& w, float* out, int64_t ldo) {
    int t = 0;
    for (; t + kTileX <= n; t += kTileX) tile<kTileX, NW>(x + t * K, K, w, out + t * ldo, ldo);
    if (t < n) with_constant<kTileX>(n - t, [&](auto MX) { tile<MX(), NW>(x + t * K, K, w, out + t * ldo, ldo); });
}

template <class Rows>
inline void tile_rows(const float* x, int n, int64_t K, const Rows& w, int nw, float* out, int64_t ldo) {
    with_constant<kTileW>(nw, [&](auto NW) { tile_rows_nw<NW()>(x, n, K, w, out, ldo); });
}

// Weight rows [r0, r0 + nw) against every x row.
void weight_tile(const float* x, int n, const WeightView& w, int64_t r0, int nw, float* scratch, float* out) {
    const int64_t K = w.cols, N = w.rows;
    const size_t row_bytes = dtype_row_bytes(w.dtype, K);
    const uint8_t* rows = static_cast<const uint8_t*>(w.data) + r0 * row_bytes;
    float* o = out + r0;
    // F32 rows too are copied into the tile when several x tiles reuse them: reading them in place
    // (six strided rows) ran about 20% slower from 32 rows up (kvscope-kernel-bench, layer table).
    if (w.dtype == DType::F32 && n <= kTileX) {
        tile_rows(x, n, K, F32Rows{reinterpret_cast<const float*>(rows), static_cast<size_t>(K)}, nw, o, N);
        return;
    }
    if (n > kTileX || dtype_is_quantized(w.dtype)) {
        // Convert (or copy) the tile once; every x tile reuses it from L1. Block types always: their
        // blocks do not split into kLanes-wide loads.
        for (int r = 0; r < nw; ++r) dequantize_row(w.dtype, rows + r * row_bytes, scratch + r * K, K);
        tile_rows(x, n, K, F32Rows{scratch, static_cast<size_t>(K)}, nw, o, N);
        return;
    }
    switch (w.dtype) {
    case DType::F16:
        tile_rows(x, n, K, F16Rows{reinterpret_cast<const uint16_t*>(rows), static_cast<size_t>(K)}, nw, o, N);
        break;
    case DType::BF16:
        tile_rows(x, n, K, BF16Rows{reinterpret_cast<const uint16_t*>(rows), static_cast<size_t>(K)}, nw, o, N);
        break;
    default: break;
    }
}

// Every type but the int8 path's: dot-product tiles over F32 (converted) weight rows.
void matmul_dot_tiles(ThreadPool& pool, MatmulScratch& scratch, const float* x, int n, const WeightView& w, float* out) {
    if (w.layout != WeightLayout::row_major)
        throw std::logic_error("matmul: no F32 path reads " + std::string(dtype_name(w.dtype)) + " weights in a repacked layout");
    const int64_t N = w.rows, K = w.cols;
    const TileTasks tasks(N, kTileW, pool.size());
    // With several x chunks (prefill), a task converts its weight rows once for all chunks instead of once
    // per chunk (dequantize_row was 7% of an F16 prefill), when they fit in L2 alongside an x chunk.
    const size_t task_floats = static_cast<size_t>(tasks.tiles_per_task) * kTileW * K;
    const bool convert_once = n > kChunkX && task_floats * sizeof(float) <= (512u << 10);
    // Per-thread scratch grows on first use only.
    const size_t need = convert_once ? task_floats : static_cast<size_t>(kTileW) * K;
    reserve_per_thread(scratch.per_thread, pool, need);
    const size_t row_bytes = dtype_row_bytes(w.dtype, K);
    for_each_tile(pool, tasks, n, [&](int64_t tile, int x0, int nx, int thread) {
        float* s = scratch.per_thread[thread].data();
        const int64_t r = tile * kTileW;
        const int nw = static_cast<int>(std::min<int64_t>(kTileW, N - r));
        const float* xc = x + static_cast<size_t>(x0) * K;
        float* o = out + static_cast<size_t>(x0) * N;
        if (!convert_once) {
            weight_tile(xc, nx, w, r, nw, s, o);
            return;
        }
        const int64_t task_r0 = tasks.first(tile / tasks.tiles_per_task) * kTileW;
        if (tile * kTileW == task_r0 && x0 == 0) {  // the task's first call: its rows, converted once
            const int64_t r1 = std::min(N, task_r0 + tasks.tiles_per_task * kTileW);
            for (int64_t q = task_r0; q < r1; ++q)
                dequantize_row(w.dtype, static_cast<const uint8_t*>(w.data) + q * row_bytes, s + (q - task_r0) * K, K);
        }
        tile_rows(xc, nx, K, F32Rows{s + (r - task_r0) * K, static_cast<size_t>(K)}, nw, o + r, N);
    });
}

// Q4_1 / Q5_1 multiplied in F32: their mins met d_x * sum(q_x) as is; add what the int8 path's sums, rounded as
// llama.cpp's Q8_1 (quant.h activation_block_sum_q8_1), change: sum_b m_b * c_b per row and activation row.
void add_q8_1_sum_rounding(ThreadPool& pool, MatmulScratch& scratch, const float* x, int n, const WeightView& w, float* out) {
    const int64_t N = w.rows, nb = w.cols / 32;
    const size_t row_bytes = dtype_row_bytes(w.dtype, w.cols);
    std::vector<double>& c = scratch.min_rounding;
    if (c.size() < static_cast<size_t>(n * nb)) c.resize(static_cast<size_t>(n * nb));
    for (int t = 0; t < n; ++t) q8_1_sum_rounding(x + t * w.cols, w.cols, c.data() + t * nb);
    constexpr int64_t kRows = 64;
    pool.run((N + kRows - 1) / kRows, [&](int64_t task, int) {
        for (int64_t r = task * kRows; r < std::min(N, (task + 1) * kRows); ++r) {
            const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * row_bytes;
            for (int t = 0; t < n; ++t) {
                double sum = 0;
                for (int64_t b = 0; b < nb; ++b) sum += block_min(w.dtype, row, b) * c[t * nb + b];
                out[t * N + r] += static_cast<float>(sum);
            }
        }
    });
}

}  // namespace

void matmul(ThreadPool& pool, MatmulScratch& scratch, const float* x, int n, const WeightView& w, const float* bias,
            float* out) {
    if (n <= 0) return;
    const int64_t N = w.rows;
    const float* const x_in = x;
    // Q4_1 / Q5_1 take the int8 path where its tile adds their mins, and always once interleaved by 8 (the AVX-512
    // set packs them as the AVX2 one does, but its own tile has no mins); else F32 dots (matmul_dot_tiles, which
    // reads row-major weights only).
    const bool int8_mins = has_block_mins(w.dtype) && (kQ8TileMins || w.layout == WeightLayout::rows_x8);
    if (matmul_rounds_activations(w.dtype)) {
        const size_t count = static_cast<size_t>(n) * w.cols;
        if (scratch.activations_rounded.size() < count) scratch.activations_rounded.resize(count);
        round_activations_for(w.dtype, x, scratch.activations_rounded.data(), static_cast<int64_t>(count));
        x = scratch.activations_rounded.data();
    } else if (has_block_mins(w.dtype) && !int8_mins) {  // F32 dots on the activations the int8 path uses
        const size_t count = static_cast<size_t>(n) * w.cols;
        if (scratch.activations_rounded.size() < count) scratch.activations_rounded.resize(count);
        dequantized_activations(w.dtype, x, scratch.activations_rounded.data(), static_cast<int64_t>(count));
        x = scratch.activations_rounded.data();
    }
    if (w.layout == WeightLayout::panels16) {
        matmul_panels(pool, x, n, w, out);
    } else if (matmul_runs_k_int8(w.dtype)) {
        matmul_q8_k(pool, scratch.activations_q8, scratch.activation_sums, scratch.decoded_k, x, n, w, out);
    } else if (unpacks_to_q8_0(w.dtype) || int8_mins) {
        matmul_q8_0(pool, scratch.activations_q8, scratch.activation_block_sums, scratch.activation_block_isums,
                    scratch.unpacked_q8, x, n, w, out);
    } else {
        matmul_dot_tiles(pool, scratch, x, n, w, out);
    }
    if (has_block_mins(w.dtype) && !int8_mins) add_q8_1_sum_rounding(pool, scratch, x_in, n, w, out);
    if (bias)
        for (int t = 0; t < n; ++t)
            for (int64_t r = 0; r < N; ++r) out[t * N + r] += bias[r];
}

}  // namespace KVSCOPE_CPU_NAMESPACE
