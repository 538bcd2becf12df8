// Writes a step's K and V into the paged KV cache through slot_mapping (KvCacheLayout's one layout:
// [layers][2][num_blocks][kv_heads][block_size][head_dim], F32).
#pragma once

#include "backend.h"

#include <cuda_runtime.h>

namespace kvscope::cuda {

// k, v [n, num_kv_heads * head_dim]; slot_mapping [n] (slot = block_id * block_size + offset; -1 = padding,
// skipped); kv_cache [layout.total_elems()] F32. Throws std::invalid_argument for a non-F32 cache or a layer
// out of range.
void write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n, const KvCacheLayout& layout,
              float* kv_cache, int layer, cudaStream_t stream);

}  // namespace kvscope::cuda
