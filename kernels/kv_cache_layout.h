// The one KV cache layout, shared by every backend (and by the engine's memory accounting).
// One buffer: [num_layers][2 (K, V)][num_blocks][num_kv_heads][block_size][head_dim], element kv_dtype.
// A head's keys of one block are contiguous, so decode attention streams block_size x head_dim values
// per (block, kv head); a token's slot is block_id * block_size + offset (vLLM's slot_mapping).
#pragma once

#include "dtype.h"

#include <cstddef>
#include <cstdint>

namespace kvscope {

struct KvCacheLayout {
    int num_layers = 0;
    int num_blocks = 0;
    int block_size = 0;
    int num_kv_heads = 0;
    int head_dim = 0;
    DType kv_dtype = DType::F32;  // F32, F16 or BF16 (Backend::supports_kv_dtype)

    size_t elem_bytes() const { return static_cast<size_t>(dtype_block_bytes(kv_dtype)); }
    // Elements between consecutive slots / heads / blocks / K-V halves / layers.
    size_t head_stride() const { return static_cast<size_t>(block_size) * head_dim; }
    size_t block_stride() const { return head_stride() * num_kv_heads; }
    size_t kv_stride() const { return block_stride() * num_blocks; }
    size_t layer_stride() const { return kv_stride() * 2; }
    size_t total_elems() const { return layer_stride() * num_layers; }
    size_t total_bytes() const { return total_elems() * elem_bytes(); }

    // Element offset of (layer, K=0/V=1, block, kv head, offset in block, dim 0).
    size_t offset(int layer, int kv, int block, int head, int slot_in_block) const {
        return layer * layer_stride() + kv * kv_stride() + static_cast<size_t>(block) * block_stride() +
               head * head_stride() + static_cast<size_t>(slot_in_block) * head_dim;
    }

    // Bytes of one block over all layers, K and V: 2 x layers x kv_heads x head_dim x block_size x dtype.
    static size_t bytes_per_block(int num_layers, int num_kv_heads, int head_dim, int block_size, DType dt) {
        return 2ull * num_layers * num_kv_heads * head_dim * block_size * static_cast<size_t>(dtype_block_bytes(dt));
    }
};

}  // namespace kvscope
