// out[n, N] = x[n, K] @ w[N, K]^T (+ bias), F32 activations, weights in any supported type.
//
// Batch invariance: every output element is computed in the same order whatever the number of rows n
// and wherever its row sits in the batch (the set's vector lanes over k, k ascending, a fixed reduction
// tree, then a scalar tail). So a request's logits do not depend on what else is in the step, and greedy outputs
// alone and batched are identical (vLLM needs a special mode for that; here it is the only mode).
//
// Tiles of up to 4 x rows by 6 weight rows (AVX-512; 3 x 4 with AVX2, 2 x 4 in the baseline), dot
// products along k. With a single x tile (decode) weights
// are converted in registers as they stream from memory; with more, each weight tile is converted
// (F32: copied) once to F32 in per-thread scratch and reused by every x tile; past 64 rows (prefill) a task
// converts all its weight rows once and reuses them for each 64-row x chunk. Parallel over weight rows.
// Other block-quantized weights (Q4_1, Q5_1, Q2_K, Q3_K, IQ4_XS) are always dequantized a tile at a
// time into scratch, then dotted as F32. Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_K, Q5_K and Q6_K weights take the int8 paths of matmul_q8.h instead, and weights the backend repacked at load
// (WeightLayout::panels16: what the engine uses for F32/F16/BF16) the outer-product path of panel_matmul.h;
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and Q8_0 repacked 8 rows at a time (WeightLayout::rows_x8, AVX2 sets) the int8 paths of matmul_x8.h.
#pragma once

#include "backend.h"
#include "cpu/kernel_set.h"
#include "cpu/matmul_q8.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"

#include <vector>

KVSCOPE_CPU_KERNEL_SET_ONLY("cpu/matmul.h");

namespace KVSCOPE_CPU_NAMESPACE {

struct MatmulScratch {
    std::vector<std::vector<float>> per_thread;  // dequantized weight tiles
    std::vector<BlockQ8Act> activations_q8;      // int8 path (Q8_0 ...): the quantized x rows
    std::vector<std::vector<BlockQ8_0>> unpacked_q8;  // int8 path, Q4_0 / Q5_0 / IQ4_NL: a weight tile per thread
    std::vector<ActSumsQ8> activation_sums;           // int8 path, K types: the x blocks' sums
    std::vector<float> activation_block_sums;         // int8 path, Q4_1 / Q5_1: d_x * sum(q_x) per x block (F16)
    std::vector<int32_t> activation_block_isums;      // int8 path, Q4_0 interleaved by 8: sum(q_x) per x block
    std::vector<std::vector<DecodedKBlock>> decoded_k; // int8 path, K types: a weight tile per thread, decoded
    std::vector<float> activations_rounded;           // F16 / BF16: x rounded to the weight's type (Q4_1 / Q5_1 off
                                                      // the int8 path: as it quantizes x)
    std::vector<double> min_rounding;                 // Q4_1 / Q5_1 off the int8 path: quant.h q8_1_sum_rounding
};

void matmul(ThreadPool& pool, MatmulScratch& scratch, const float* x, int n, const WeightView& w,
            const float* bias, float* out);

}  // namespace KVSCOPE_CPU_NAMESPACE
