#include "cpu/matmul.h"

#include "cpu/quant.h"
#include "cpu/simd.h"

#include <algorithm>
#include <array>
#include <utility>

namespace kvscope::cpu {

namespace {

// ---- Fused dot path: each weight row is read once and dotted with every x row (T <= 4). ----

template <int T, class Load, class Scalar>
inline void dot_row(const float* x, int64_t K, Load load, Scalar scalar, float* res) {
    v16f acc0[T] = {}, acc1[T] = {};  // two chains hide FMA latency
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        const v16f w0 = load(k), w1 = load(k + 16);
        for (int t = 0; t < T; ++t) {
            acc0[t] += w0 * load16(x + t * K + k);
            acc1[t] += w1 * load16(x + t * K + k + 16);
        }
    }
    for (; k + 16 <= K; k += 16) {
        const v16f w0 = load(k);
        for (int t = 0; t < T; ++t) acc0[t] += w0 * load16(x + t * K + k);
    }
    for (int t = 0; t < T; ++t) res[t] = hsum16(acc0[t] + acc1[t]);
    for (; k < K; ++k)
        for (int t = 0; t < T; ++t) res[t] += scalar(k) * x[t * K + k];
}

template <int T>
inline void dot_row_q8_0(const float* x, int64_t K, const BlockQ8_0* blocks, float* res) {
    v16f acc0[T] = {}, acc1[T] = {};
    for (int64_t b = 0; b < K / 32; ++b) {
        const v16f d = splat16(f16_scale(blocks[b].d));
        const v16f w0 = load16_i8(blocks[b].qs) * d, w1 = load16_i8(blocks[b].qs + 16) * d;
        for (int t = 0; t < T; ++t) {
            acc0[t] += w0 * load16(x + t * K + b * 32);
            acc1[t] += w1 * load16(x + t * K + b * 32 + 16);
        }
    }
    for (int t = 0; t < T; ++t) res[t] = hsum16(acc0[t] + acc1[t]);
}

template <int T>
void dot_rows(const float* x, const WeightView& w, int64_t row_begin, int64_t row_end, float* row_buf,
              float* out, int64_t ldo) {
    const int64_t K = w.cols;
    const size_t row_bytes = dtype_row_bytes(w.dtype, K);
    for (int64_t r = row_begin; r < row_end; ++r) {
        const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * row_bytes;
        float res[T];
        switch (w.dtype) {
        case DType::F32: {
            const float* p = reinterpret_cast<const float*>(row);
            dot_row<T>(x, K, [p](int64_t k) { return load16(p + k); }, [p](int64_t k) { return p[k]; }, res);
            break;
        }
        case DType::F16: {
            const uint16_t* p = reinterpret_cast<const uint16_t*>(row);
            dot_row<T>(x, K, [p](int64_t k) { return load16_f16(p + k); },
                       [p](int64_t k) { return f16_to_f32(p[k]); }, res);
            break;
        }
        case DType::BF16: {
            const uint16_t* p = reinterpret_cast<const uint16_t*>(row);
            dot_row<T>(x, K, [p](int64_t k) { return load16_bf16(p + k); },
                       [p](int64_t k) { return bf16_to_f32(p[k]); }, res);
            break;
        }
        case DType::Q8_0: dot_row_q8_0<T>(x, K, reinterpret_cast<const BlockQ8_0*>(row), res); break;
        case DType::Q4_K: {  // dequantize once into the thread's buffer; compute dominates the row read
            dequantize_row(DType::Q4_K, row, row_buf, K);
            const float* p = row_buf;
            dot_row<T>(x, K, [p](int64_t k) { return load16(p + k); }, [p](int64_t k) { return p[k]; }, res);
            break;
        }
        }
        for (int t = 0; t < T; ++t) out[t * ldo + r] = res[t];
    }
}

void matmul_dot(ThreadPool& pool, MatmulScratch& scratch, const float* x, int n, const WeightView& w, float* out) {
    constexpr int64_t kRowsPerTask = 16;
    const int64_t N = w.rows;
    const int64_t num_tasks = (N + kRowsPerTask - 1) / kRowsPerTask;
    pool.run(num_tasks, [&](int64_t task, int thread) {
        float* row_buf = scratch.per_thread[thread].data();
        const int64_t r0 = task * kRowsPerTask, r1 = std::min(N, r0 + kRowsPerTask);
        switch (n) {
        case 1: dot_rows<1>(x, w, r0, r1, row_buf, out, N); break;
        case 2: dot_rows<2>(x, w, r0, r1, row_buf, out, N); break;
        case 3: dot_rows<3>(x, w, r0, r1, row_buf, out, N); break;
        default: dot_rows<4>(x, w, r0, r1, row_buf, out, N); break;
        }
    });
}

// ---- Packed path: a panel of kNR weight rows x kKC columns converted to F32, k-major. ----

constexpr int kNR = 32;    // two 16-lane vectors of output columns
constexpr int kMR = 12;    // rows of x per register tile: 24 accumulators + 2 panel vectors
constexpr int kKC = 1024;  // panel depth: 128 KiB, stays in L2 while every x tile passes over it

template <int MR>
void micro_kernel(const float* x, int64_t ldx, const float* panel, int kc, float* out, int64_t ldo, bool accumulate,
                  int nr) {
    v16f c0[MR], c1[MR];
    for (int m = 0; m < MR; ++m) c0[m] = c1[m] = v16f{};
    for (int k = 0; k < kc; ++k) {
        const v16f b0 = load16(panel + k * kNR), b1 = load16(panel + k * kNR + 16);
        for (int m = 0; m < MR; ++m) {
            const v16f a = splat16(x[m * ldx + k]);
            c0[m] += a * b0;
            c1[m] += a * b1;
        }
    }
    for (int m = 0; m < MR; ++m) {
        float* o = out + m * ldo;
        if (nr == kNR) {
            if (accumulate) {
                c0[m] += load16(o);
                c1[m] += load16(o + 16);
            }
            store16(o, c0[m]);
            store16(o + 16, c1[m]);
        } else {
            alignas(64) float tmp[kNR];
            store16(tmp, c0[m]);
            store16(tmp + 16, c1[m]);
            for (int j = 0; j < nr; ++j) o[j] = accumulate ? o[j] + tmp[j] : tmp[j];
        }
    }
}

using MicroKernel = void (*)(const float*, int64_t, const float*, int, float*, int64_t, bool, int);
template <size_t... I>
constexpr std::array<MicroKernel, sizeof...(I)> make_kernels(std::index_sequence<I...>) {
    return {&micro_kernel<static_cast<int>(I) + 1>...};
}
constexpr auto kMicroKernels = make_kernels(std::make_index_sequence<kMR>{});

void pack_panel(const WeightView& w, int64_t n0, int nr, int64_t k0, int kc, float* row_buf, float* panel) {
    const size_t row_bytes = dtype_row_bytes(w.dtype, w.cols);
    const size_t k0_bytes = dtype_row_bytes(w.dtype, k0);
    for (int j = 0; j < nr; ++j) {
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + (n0 + j) * row_bytes + k0_bytes;
        const float* row;
        if (w.dtype == DType::F32) {
            row = reinterpret_cast<const float*>(src);
        } else {
            dequantize_row(w.dtype, src, row_buf, kc);
            row = row_buf;
        }
        for (int k = 0; k < kc; ++k) panel[k * kNR + j] = row[k];
    }
    for (int j = nr; j < kNR; ++j)
        for (int k = 0; k < kc; ++k) panel[k * kNR + j] = 0.0f;
}

void matmul_packed(ThreadPool& pool, MatmulScratch& scratch, const float* x, int n, const WeightView& w, float* out) {
    const int64_t N = w.rows, K = w.cols;
    const int64_t num_panels = (N + kNR - 1) / kNR;
    pool.run(num_panels, [&](int64_t p, int thread) {
        float* panel = scratch.per_thread[thread].data();
        float* row_buf = panel + kKC * kNR;
        const int64_t n0 = p * kNR;
        const int nr = static_cast<int>(std::min<int64_t>(kNR, N - n0));
        for (int64_t k0 = 0; k0 < K; k0 += kKC) {
            const int kc = static_cast<int>(std::min<int64_t>(kKC, K - k0));
            pack_panel(w, n0, nr, k0, kc, row_buf, panel);
            for (int m0 = 0; m0 < n; m0 += kMR) {
                const int mr = std::min(kMR, n - m0);
                kMicroKernels[mr - 1](x + m0 * K + k0, K, panel, kc, out + m0 * N + n0, N, k0 > 0, nr);
            }
        }
    });
}

}  // namespace

void matmul(ThreadPool& pool, MatmulScratch& scratch, const float* x, int n, const WeightView& w, const float* bias,
            float* out) {
    if (n <= 0) return;
    // Per-thread scratch grows on first use only: a packed panel plus one dequantized row.
    const size_t need = static_cast<size_t>(kKC) * kNR + std::max<int64_t>(kKC, w.cols) + 64;
    if (scratch.per_thread.size() < static_cast<size_t>(pool.size())) scratch.per_thread.resize(pool.size());
    for (auto& s : scratch.per_thread)
        if (s.size() < need) s.resize(need);

    if (n <= kMatmulDotMaxRows)
        matmul_dot(pool, scratch, x, n, w, out);
    else
        matmul_packed(pool, scratch, x, n, w, out);
    if (bias)
        for (int t = 0; t < n; ++t)
            for (int64_t r = 0; r < w.rows; ++r) out[t * w.rows + r] += bias[r];
}

}  // namespace kvscope::cpu
