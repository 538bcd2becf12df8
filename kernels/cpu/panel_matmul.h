// The CPU matmul over weights repacked once at load ("panels"), as oneDNN and llama.cpp's CPU repack do.
//
// A panel is 16 consecutive output rows of the weight interleaved along k: panel p holds, for each k, the
// 16 values w[16p .. 16p+15][k] side by side (rows past w.rows are zero). The microkernel is an outer
// product: 16 weights (one zmm, two ymm or four xmm) times a broadcast x value, accumulated over k for a
// register tile of x rows by panels sized per kernel set (AVX-512: 6 x rows by 4 panels, 24 accumulators,
// 10 loads per 24 FMAs; AVX2: 6 by 1, 12 ymm; no horizontal sums). The dot-product tiles of matmul.h pay a
// horizontal reduction per output and hold only a few weight rows per pass; this runs near the FMA peak.
// Single-row decode reads up to 8 panels side by side (AVX-512), each prefetched ahead, in tasks split
// evenly over the threads: a step is bound by how fast the panels stream from memory.
//
// Batch invariance holds as in matmul.h, by a simpler argument: every output is one FMA chain over
// k = 0, 1, ..., K-1 from zero, whatever the tile shape or the number of rows in the batch.
// F32, F16 and BF16 weights keep their type in the panels and are widened as they are loaded (BF16 panels
// interleave k in pairs, so that widening is one instruction per vector; without F16C a group of F16
// panels is widened once per x chunk into scratch when several x tiles reuse it).
#pragma once

#include "backend.h"
#include "cpu/kernel_set.h"
#include "cpu/thread_pool.h"

#include <cstddef>
#include <cstdint>

KVSCOPE_CPU_KERNEL_SET_ONLY("cpu/panel_matmul.h");

namespace KVSCOPE_CPU_NAMESPACE {

constexpr int kPanelRows = 16;

inline bool panel_packable(DType dt) { return dt == DType::F32 || dt == DType::F16 || dt == DType::BF16; }

// Bytes of w packed as panels.
size_t panel_bytes(const WeightView& w);

// Packs w (row-major, a panel_packable type) into dst (panel_bytes(w) bytes) and returns the view of it.
WeightView pack_panels(ThreadPool& pool, const WeightView& w, void* dst);

// out[n, N] = x[n, K] @ w^T for w packed by pack_panels.
void matmul_panels(ThreadPool& pool, const float* x, int n, const WeightView& w, float* out);

}  // namespace KVSCOPE_CPU_NAMESPACE
