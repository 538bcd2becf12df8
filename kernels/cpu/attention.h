// CPU kernels of the paged KV cache: write a step's K/V through slot_mapping, and causal paged
// attention that reads K/V through block tables (decode tokens and prefill chunks alike). The cost of a
// query token grows with the context it attends to, never with max_model_len.
#pragma once

#include "backend.h"
#include "cpu/kernel_set.h"
#include "cpu/thread_pool.h"

#include <vector>

KVSCOPE_CPU_KERNEL_SET_ONLY("cpu/attention.h");

namespace KVSCOPE_CPU_NAMESPACE {

// The cache holds layout.kv_dtype (F32, F16 or BF16); F32 K/V are rounded to it on the way in, and
// widened back to F32 as attention reads them.
//                                                k, v [n, num_kv_heads * head_dim]; slot_mapping [n]
void write_kv(ThreadPool& pool, const float* k, const float* v, const int64_t* slot_mapping, int n,
              const KvCacheLayout& layout, void* kv_cache, int layer);

// A query token's keys [first, end) of its sequence seq, attended in parts partitions of part_keys.
struct QueryKeys {
    int seq, first, end, parts, part_keys;
};

// What paged_attention keeps between calls, grown on demand.
struct AttentionScratch {
    std::vector<std::vector<float>> per_thread;  // a task's scores (and widened K / V rows)
    std::vector<QueryKeys> tokens;               // per query token
    std::vector<int64_t> part_start;             // per query token: its first partition, and the count at the end
    std::vector<float> partials;                 // per kv head and partition: output rows and softmax stats
};

// With a sliding window, a query reads only the rows of its window: its cursors start at the window's
// first position, so blocks before it are never touched (they may have been freed).
//                                                q, out [num_tokens, num_heads * head_dim]
void paged_attention(ThreadPool& pool, AttentionScratch& scratch, const float* q,
                     const AttentionMetadata& meta, const KvCacheLayout& layout, const void* kv_cache, int layer,
                     int num_heads, const AttentionParams& params, float* out);

}  // namespace KVSCOPE_CPU_NAMESPACE
