// Writes a step's K and V into the paged KV cache through slot_mapping (KvCacheLayout's one layout:
// [layers][2][num_blocks][kv_heads][block_size][head_dim], F32, F16 or BF16).
#pragma once

#include "backend.h"

#include <cuda_runtime.h>

namespace kvscope::cuda {

// k, v [n, num_kv_heads * head_dim]; slot_mapping [n] (slot = block_id * block_size + offset; -1 = padding,
// skipped); kv_cache [layout.total_elems()] of layout.kv_dtype (values rounded to nearest even). Throws
// std::invalid_argument for another cache type or a layer out of range.
void write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n, const KvCacheLayout& layout,
              void* kv_cache, int layer, cudaStream_t stream);

}  // namespace kvscope::cuda
