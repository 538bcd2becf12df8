// Causal paged attention on the device over KvCacheLayout's one layout, for a varlen batch that mixes
// decode tokens and chunked-prefill chunks (AttentionMetadata), with grouped-query heads and a split-K
// variant for long contexts: the context is cut into splits, each split's partial softmax state
// (max, sum, unnormalised output) is written to scratch and a second kernel merges them.
#pragma once

#include "backend.h"

#include <cuda_runtime.h>

namespace kvscope::cuda {

// How one call is laid out on the device; made on the host from host-side sizes only (the metadata
// arrays stay on the device), so planning never synchronizes.
struct AttentionPlan {
    int queries_per_tile = 1;  // query tokens of one sequence per thread block (x group query heads = rows)
    int num_tiles = 0;         // grid.x: an upper bound of the tiles over every sequence
    int num_splits = 1;        // grid.z: context splits; 1 = output written directly
    int split_len = 0;         // keys per split (a multiple of the key tile)
    size_t scratch_floats = 0; // partial results when num_splits > 1
};

// Whether a model's attention shape has a compiled kernel: head_dim 8, 32, 64, 80, 96, 128 or 256, and
// num_heads a multiple of num_kv_heads with a GQA group of at most 16.
bool paged_attention_supports(int head_dim, int num_heads, int num_kv_heads);

// Throws std::invalid_argument for an unsupported head_dim, cache type, or GQA ratio (num_heads must be a
// multiple of num_kv_heads with num_heads / num_kv_heads <= 16). forced_splits > 0 overrides the split
// heuristic (tests); num_sms sizes the heuristic.
AttentionPlan plan_paged_attention(const AttentionMetadata& meta, const KvCacheLayout& layout, int num_heads,
                                   int num_sms, int forced_splits);

// q, out [num_tokens, num_heads * head_dim] F32; kv_cache [layout.total_elems()] of layout.kv_dtype (F32, F16
// or BF16); metadata arrays as
// AttentionMetadata documents (device memory); scratch >= plan.scratch_floats floats (may be null when 0).
// params: the scale, and a sliding window (key tiles wholly before a tile's windows are never loaded) and
// score soft-capping where set.
void paged_attention(const AttentionPlan& plan, const float* q, const AttentionMetadata& meta,
                     const KvCacheLayout& layout, const void* kv_cache, int layer, int num_heads,
                     const AttentionParams& params, float* out, float* scratch, cudaStream_t stream);

}  // namespace kvscope::cuda
