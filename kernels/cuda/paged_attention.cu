// Paged attention kernels (vLLM's unified varlen attention, FlashAttention's online softmax): F32 queries
// and outputs over an F32, F16 or BF16 cache.
//
// Work split. A thread block owns one "tile" (up to queries_per_tile consecutive query tokens of one
// sequence) x one kv head x one context split. Its rows are (token, query head of the kv head's group)
// pairs, at most kRows, so every K/V tile it loads from the paged cache serves the whole GQA group and
// every query token of the tile: a decode token reads its context once per kv head; a prefill chunk
// reads it once per tile of queries_per_tile tokens.
// Tiles are numbered without any host-side knowledge of query_start_loc (vLLM's trick): sequence s owns
// tiles [qsl[s] / QT + s, qsl[s] / QT + s + ceil(len_s / QT)), and qsl[s] / QT + s is strictly increasing,
// so a binary search finds a tile's sequence; the few tiles in the gaps exit at once. The grid's upper
// bound is num_tokens / QT + num_seqs tiles.
//
// Per key tile (kKeys keys): K and V rows are copied into shared memory with cp.async (K first, so the
// scores start while V lands), in the cache's own type (a half cache stages half the bytes, and is widened
// to F32 as it is read), each lane of a warp scores one key for each of the warp's rows, the warp
// updates the row's online softmax (max m, sum l) and accumulates p * V with lanes owning output dims.
// Keys past the row's causal limit, or before its sliding window, score -inf; rows whose every key so far
// is masked keep m = -inf and contribute nothing (no inf - inf). Under a sliding window a tile starts at
// its first token's window, and a split wholly before a row's window is skipped by the merge.
//
// Shared memory K/V rows are padded by 16 bytes (head_dim + 4 floats, or + 8 halves): 16-byte aligned for
// cp.async and 16-byte reads, and 8 consecutive keys' 16-byte chunks fall in 8 distinct groups of 4 banks
// (conflict-free per quarter warp). Shared memory is dynamic (attention_smem_bytes): head_dim 256 (Gemma)
// needs 81 KB with an F32 cache and 49 KB with a half one, past the 48 KB a static allocation may hold;
// launches above 48 KB raise the kernel's limit first (every GPU of KVSCOPE_CUDA_ARCHITECTURES, sm_80 and
// later, allows at least 99 KB per block).
#include "cuda/paged_attention.cuh"

#include "cuda/cuda_common.cuh"

#include <cuda_pipeline_primitives.h>

#include <algorithm>
#include <iterator>
#include <string>

namespace kvscope::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kRowsPerWarp = 4;
constexpr int kRows = kWarps * kRowsPerWarp;  // 16 (token, head) rows per thread block
constexpr int kKeys = kWarpSize;              // keys per shared-memory tile: one per lane
constexpr int kMinSplitLen = 256;             // keys; shorter splits cost more in merging than they gain
constexpr int kMaxSplits = 64;

// Device-side copy of everything a launch needs (passed by value as the kernel parameter).
struct AttnParams {
    const float* q;                  // [num_tokens, num_heads, D]
    float* out;                      // [num_tokens, num_heads, D]
    const void* k_cache;             // cache + offset(layer, K, 0, 0, 0), elements of the cache's type
    const void* v_cache;             // cache + offset(layer, V, 0, 0, 0)
    const int32_t* query_start_loc;  // [num_seqs + 1]
    const int32_t* seq_lens;         // [num_seqs]
    const int32_t* block_tables;     // [num_seqs, max_blocks_per_seq]
    float* part_acc;                 // [num_tokens, num_heads, num_splits, D]   (num_splits > 1)
    float* part_max;                 // [num_tokens, num_heads, num_splits]
    float* part_sum;                 // [num_tokens, num_heads, num_splits]
    int64_t block_stride;            // elements between blocks of one layer's K (or V)
    int64_t head_stride;             // elements between kv heads of one block (block_size * D)
    int max_blocks_per_seq;
    int block_size;
    int num_tokens;
    int num_seqs;
    int num_heads;
    int num_kv_heads;
    int queries_per_tile;
    int num_splits;
    int split_len;
    float scale;
    int sliding_window;   // 0: none
    float logit_softcap;  // 0: none
};

// The first key that query position `pos` sees (0 without a sliding window).
__device__ __forceinline__ int first_key(int pos, int sliding_window) {
    return sliding_window > 0 ? max(0, pos + 1 - sliding_window) : 0;
}

// The sequence that owns query token t: the largest s with query_start_loc[s] <= t.
__device__ __forceinline__ int seq_of_token(const int32_t* qsl, int num_seqs, int t) {
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (qsl[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// The sequence that owns tile j: the largest s with qsl[s] / QT + s <= j.
__device__ __forceinline__ int seq_of_tile(const int32_t* qsl, int num_seqs, int qt, int j) {
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (qsl[mid] / qt + mid <= j) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// The dot product of 16 bytes of a K row with the matching query values q (16-byte aligned F32): 4 floats,
// or 8 halves widened in pairs.
__device__ __forceinline__ float dot_chunk(const float* q, const float* k) {
    const float4 a = *reinterpret_cast<const float4*>(q), b = *reinterpret_cast<const float4*>(k);
    return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
__device__ __forceinline__ float2 to_float2(__half2 v) { return __half22float2(v); }
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
template <class Pair, class T>
__device__ __forceinline__ float dot_chunk_pairs(const float* q, const T* k) {
    const uint4 raw = *reinterpret_cast<const uint4*>(k);
    const Pair* h = reinterpret_cast<const Pair*>(&raw);
    const float4 a = reinterpret_cast<const float4*>(q)[0], b = reinterpret_cast<const float4*>(q)[1];
    const float2 k0 = to_float2(h[0]), k1 = to_float2(h[1]), k2 = to_float2(h[2]), k3 = to_float2(h[3]);
    return (a.x * k0.x + a.y * k0.y + a.z * k1.x + a.w * k1.y) + (b.x * k2.x + b.y * k2.y + b.z * k3.x + b.w * k3.y);
}
__device__ __forceinline__ float dot_chunk(const float* q, const __half* k) { return dot_chunk_pairs<__half2>(q, k); }
__device__ __forceinline__ float dot_chunk(const float* q, const __nv_bfloat16* k) {
    return dot_chunk_pairs<__nv_bfloat162>(q, k);
}

}  // namespace

// Dynamic shared memory of one block at head size D over a cache of elem-byte elements: q_s [kRows][D]
// floats, k_s and v_s [kKeys][D + 16 / elem] elements (F32: 42 KB at D = 128, 81 KB at D = 256; half: 25 KB
// and 49 KB).
constexpr size_t attention_smem_bytes(int D, size_t elem) {
    return static_cast<size_t>(kRows) * D * sizeof(float) + 2 * static_cast<size_t>(kKeys) * (D + 16 / elem) * elem;
}

// grid (plan.num_tiles, num_kv_heads, plan.num_splits), block kThreads, dynamic shared memory
// attention_smem_bytes(D, sizeof(T)); T is the cache's element type (float, __half, __nv_bfloat16).
template <int D, class T>
static __global__ void __launch_bounds__(kThreads) paged_attention_kernel(const AttnParams p) {
    constexpr int kChunkElems = 16 / sizeof(T);  // elements per 16-byte chunk (cp.async and score reads)
    static_assert(D % kChunkElems == 0 && D <= 8 * kWarpSize,
                  "head_dim must be a whole number of 16-byte chunks (4 floats, 8 halves), at most 256");
    constexpr int kStride = D + kChunkElems;     // padded shared row, elements
    constexpr int kChunks = D / kChunkElems;     // 16-byte chunks per K/V row
    constexpr int kDimsPerLane = (D + kWarpSize - 1) / kWarpSize;
    extern __shared__ __align__(16) float smem[];
    // Each array starts 16-byte aligned: kRows * D floats and kKeys * kStride elements are multiples of 16 bytes.
    float(*q_s)[D] = reinterpret_cast<float(*)[D]>(smem);
    T(*k_s)[kStride] = reinterpret_cast<T(*)[kStride]>(smem + kRows * D);
    T(*v_s)[kStride] = reinterpret_cast<T(*)[kStride]>(reinterpret_cast<T*>(smem + kRows * D) + kKeys * kStride);
    const T* k_cache = static_cast<const T*>(p.k_cache);
    const T* v_cache = static_cast<const T*>(p.v_cache);

    const int kv_head = blockIdx.y, split = blockIdx.z;
    const int group = p.num_heads / p.num_kv_heads;
    const int qt = p.queries_per_tile;

    // ---- This tile's sequence and query tokens [t0, t1).
    const int s = seq_of_tile(p.query_start_loc, p.num_seqs, qt, blockIdx.x);
    const int q_begin = p.query_start_loc[s], q_end = p.query_start_loc[s + 1];
    const int t0 = q_begin + (static_cast<int>(blockIdx.x) - (q_begin / qt + s)) * qt;
    if (t0 >= q_end) return;  // a gap tile (uniform over the block)
    const int t1 = min(t0 + qt, q_end);
    const int seq_len = p.seq_lens[s];
    // Query token t sits at position seq_len - (q_end - t) and sees keys [0, position]. The tile's last
    // token sees the most; this split covers keys [key_begin, key_end).
    const int tile_ctx = seq_len - (q_end - (t1 - 1)) + 1;
    // The last split runs to the end, so a max_seq_len below a true length costs time, never keys.
    const int split_begin = split * p.split_len;
    const int key_end = split == p.num_splits - 1 ? tile_ctx : min(split_begin + p.split_len, tile_ctx);
    // The tile's first token has the earliest window: no row sees a key before it. Key tiles start there.
    const int key_begin = max(split_begin, first_key(seq_len - (q_end - t0), p.sliding_window));
    if (key_begin >= key_end) return;  // uniform over the block; the merge skips this split for these rows
    const int num_rows = (t1 - t0) * group;  // <= qt * group <= kRows (checked by the planner)
    const int32_t* block_table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;

    // ---- Scaled queries into shared memory; rows past num_rows are zero.
    for (int idx = threadIdx.x; idx < kRows * D; idx += kThreads) {
        const int r = idx / D, d = idx % D;
        float val = 0.0f;
        if (r < num_rows) {
            const int t = t0 + r / group, h = kv_head * group + r % group;
            val = p.q[(static_cast<int64_t>(t) * p.num_heads + h) * D + d] * p.scale;
        }
        q_s[r][d] = val;
    }

    // ---- Per-warp row state. Warp w owns rows w, w + kWarps, ... (decode rows spread over warps).
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDimsPerLane];
    int row_ctx[kRowsPerWarp];    // keys the row may see (causal limit); 0 for rows past num_rows
    int row_first[kRowsPerWarp];  // its first visible key (sliding window)
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
        const int r = i * kWarps + warp;
        row_ctx[i] = r < num_rows ? seq_len - (q_end - (t0 + r / group)) + 1 : 0;
        row_first[i] = first_key(row_ctx[i] - 1, p.sliding_window);
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < kDimsPerLane; ++c) acc[i][c] = 0.0f;
    }

    for (int kt0 = key_begin; kt0 < key_end; kt0 += kKeys) {
        const int nk = min(kKeys, key_end - kt0);  // valid keys in this tile (uniform)
        // ---- Async copies: K rows (group 1), then V rows (group 2); rows past nk are zero-filled.
        for (int c = threadIdx.x; c < kKeys * kChunks; c += kThreads) {
            const int j = c / kChunks, part = c % kChunks;
            T* dst = &k_s[j][part * kChunkElems];
            if (j < nk) {
                const int key = kt0 + j;
                const int64_t off = static_cast<int64_t>(block_table[key / p.block_size]) * p.block_stride +
                                    kv_head * p.head_stride + static_cast<int64_t>(key % p.block_size) * D +
                                    part * kChunkElems;
                __pipeline_memcpy_async(dst, k_cache + off, 16);
            } else {
                *reinterpret_cast<float4*>(dst) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
        __pipeline_commit();
        for (int c = threadIdx.x; c < kKeys * kChunks; c += kThreads) {
            const int j = c / kChunks, part = c % kChunks;
            T* dst = &v_s[j][part * kChunkElems];
            if (j < nk) {
                const int key = kt0 + j;
                const int64_t off = static_cast<int64_t>(block_table[key / p.block_size]) * p.block_stride +
                                    kv_head * p.head_stride + static_cast<int64_t>(key % p.block_size) * D +
                                    part * kChunkElems;
                __pipeline_memcpy_async(dst, v_cache + off, 16);
            } else {
                *reinterpret_cast<float4*>(dst) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
        __pipeline_commit();
        __pipeline_wait_prior(1);  // this thread's K copies landed
        __syncthreads();           // ... and everyone's (also publishes q_s on the first tile)

        // ---- Scores and online softmax: lane j scores key kt0 + j for each of the warp's rows.
        float prob[kRowsPerWarp];
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
            prob[i] = 0.0f;
            const int r = i * kWarps + warp;
            if (r >= num_rows) continue;  // uniform over the warp
            const int key = kt0 + lane;
            float score = -INFINITY;
            if (lane < nk && key < row_ctx[i] && key >= row_first[i]) {
                float dot = 0.0f;
#pragma unroll
                for (int c = 0; c < kChunks; ++c) dot += dot_chunk(&q_s[r][c * kChunkElems], &k_s[lane][c * kChunkElems]);
                score = p.logit_softcap > 0.0f ? p.logit_softcap * tanhf(dot / p.logit_softcap) : dot;
            }
            const float m_new = fmaxf(m[i], warp_max(score));
            float pr = 0.0f, alpha = 1.0f;
            if (m_new != -INFINITY) {  // else: every key so far is masked for this row
                pr = expf(score - m_new);   // 0 for masked keys
                alpha = expf(m[i] - m_new); // 0 on the row's first visible key
            }
            l[i] = l[i] * alpha + warp_sum(pr);
            m[i] = m_new;
#pragma unroll
            for (int c = 0; c < kDimsPerLane; ++c) acc[i][c] *= alpha;
            prob[i] = pr;
        }

        __pipeline_wait_prior(0);  // V landed
        __syncthreads();

        // ---- acc += p * V: lane owns dims lane, lane + 32, ...; p of key j comes from lane j.
        for (int j = 0; j < nk; ++j) {
            float vv[kDimsPerLane];
#pragma unroll
            for (int c = 0; c < kDimsPerLane; ++c) {
                const int d = lane + c * kWarpSize;
                vv[c] = d < D ? to_float(v_s[j][d]) : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < kRowsPerWarp; ++i) {
                if (i * kWarps + warp >= num_rows) continue;  // uniform over the warp
                const float pj = __shfl_sync(0xffffffffu, prob[i], j);
#pragma unroll
                for (int c = 0; c < kDimsPerLane; ++c) acc[i][c] += pj * vv[c];
            }
        }
        __syncthreads();  // everyone is done with k_s / v_s before the next tile overwrites them
    }

    // ---- Results: final rows, or this split's partial state for the merge.
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
        const int r = i * kWarps + warp;
        if (r >= num_rows) continue;
        const int t = t0 + r / group, h = kv_head * group + r % group;
        const int64_t th = static_cast<int64_t>(t) * p.num_heads + h;
        if (p.num_splits == 1) {
            const float inv = 1.0f / l[i];  // l > 0: a row always sees its own position
#pragma unroll
            for (int c = 0; c < kDimsPerLane; ++c) {
                const int d = lane + c * kWarpSize;
                if (d < D) p.out[th * D + d] = acc[i][c] * inv;
            }
        } else {
            // The row sees no key of this split: the merge skips it.
            if (row_ctx[i] <= split_begin || row_first[i] >= key_end) continue;
            const int64_t ps = th * p.num_splits + split;
#pragma unroll
            for (int c = 0; c < kDimsPerLane; ++c) {
                const int d = lane + c * kWarpSize;
                if (d < D) p.part_acc[ps * D + d] = acc[i][c];
            }
            if (lane == 0) {
                p.part_max[ps] = m[i];
                p.part_sum[ps] = l[i];
            }
        }
    }
}

// Merges the splits of each (token, head): out = sum_i e^(m_i - M) acc_i / sum_i e^(m_i - M) l_i over the
// splits that hold keys of the token (from the one holding its window's first key up to
// min(num_splits, ceil(ctx / split_len)), the last one running to the end of the context; the others were
// never written).
// grid (num_tokens, num_heads), block kMergeThreads.
constexpr int kMergeThreads = 128;
static __global__ void __launch_bounds__(kMergeThreads) merge_splits_kernel(const AttnParams p, int head_dim) {
    const int t = blockIdx.x, h = blockIdx.y;
    const int s = seq_of_token(p.query_start_loc, p.num_seqs, t);
    const int ctx = p.seq_lens[s] - (p.query_start_loc[s + 1] - t) + 1;
    const int n = min(p.num_splits, (ctx + p.split_len - 1) / p.split_len);
    const int i0 = min(n - 1, first_key(ctx - 1, p.sliding_window) / p.split_len);
    const int64_t th = static_cast<int64_t>(t) * p.num_heads + h;
    const int64_t ps = th * p.num_splits;
    float mx = -INFINITY;
    for (int i = i0; i < n; ++i) mx = fmaxf(mx, p.part_max[ps + i]);
    float denom = 0.0f;
    for (int i = i0; i < n; ++i) denom += expf(p.part_max[ps + i] - mx) * p.part_sum[ps + i];
    const float inv = 1.0f / denom;
    for (int d = threadIdx.x; d < head_dim; d += kMergeThreads) {
        float num = 0.0f;
        for (int i = i0; i < n; ++i) num += expf(p.part_max[ps + i] - mx) * p.part_acc[(ps + i) * head_dim + d];
        p.out[th * head_dim + d] = num * inv;
    }
}

// Head sizes with a compiled kernel, as the launch's switch below instantiates them; any multiple of 8 up to
// 256 would compile (a half cache's 16-byte chunk is 8 values).
constexpr int kHeadDims[] = {8, 32, 64, 80, 96, 128, 256};
static bool paged_attention_supports_head_dim(int head_dim) {
    return std::find(std::begin(kHeadDims), std::end(kHeadDims), head_dim) != std::end(kHeadDims);
}
static std::string unsupported_head_dim(int head_dim) {
    std::string sizes;
    for (int d : kHeadDims) sizes += (sizes.empty() ? "" : ", ") + std::to_string(d);
    return "cuda paged_attention: head_dim " + std::to_string(head_dim) + " is not supported (" + sizes + ")";
}

bool paged_attention_supports(int head_dim, int num_heads, int num_kv_heads) {
    return paged_attention_supports_head_dim(head_dim) && num_kv_heads > 0 && num_heads > 0 && num_heads % num_kv_heads == 0 &&
           num_heads / num_kv_heads <= kRows;
}

AttentionPlan plan_paged_attention(const AttentionMetadata& meta, const KvCacheLayout& layout, int num_heads,
                                   int num_sms, int forced_splits) {
    const int D = layout.head_dim, Hkv = layout.num_kv_heads;
    if (layout.kv_dtype != DType::F32 && layout.kv_dtype != DType::F16 && layout.kv_dtype != DType::BF16)
        throw std::invalid_argument("cuda paged_attention: KV cache type " + std::string(dtype_name(layout.kv_dtype)) +
                                    " is not supported (F32, F16, BF16)");
    if (!paged_attention_supports_head_dim(D))
        throw std::invalid_argument(unsupported_head_dim(D));
    if (Hkv <= 0 || num_heads <= 0 || num_heads % Hkv != 0 || num_heads / Hkv > kRows)
        throw std::invalid_argument("cuda paged_attention: " + std::to_string(num_heads) + " query heads over " +
                                    std::to_string(Hkv) + " kv heads is not supported (a whole group of at most " +
                                    std::to_string(kRows) + ")");
    if (layout.block_size <= 0)
        throw std::invalid_argument("cuda paged_attention: block_size " + std::to_string(layout.block_size));
    const int group = num_heads / Hkv;
    AttentionPlan plan;
    plan.queries_per_tile = kRows / group;
    plan.num_tiles = meta.num_tokens / plan.queries_per_tile + meta.num_seqs;
    const int max_len = std::max(1, meta.max_seq_len);
    int splits = 1;
    if (forced_splits > 0) {
        splits = forced_splits;
    } else if (max_len >= 2 * kMinSplitLen) {
        // Split long contexts until the device has about 8 blocks per SM to stream K/V with.
        const int64_t blocks = static_cast<int64_t>(plan.num_tiles) * Hkv;
        const int64_t want = ceil_div(8LL * std::max(1, num_sms), blocks);
        splits = static_cast<int>(std::min<int64_t>({want, max_len / kMinSplitLen, kMaxSplits}));
        splits = std::max(1, splits);
    }
    plan.split_len = static_cast<int>(ceil_div(ceil_div(max_len, splits), kKeys) * kKeys);
    plan.num_splits = static_cast<int>(ceil_div(max_len, plan.split_len));
    if (plan.num_splits > 1)
        plan.scratch_floats = static_cast<size_t>(meta.num_tokens) * num_heads * plan.num_splits * (D + 2);
    return plan;
}

template <int D, class T>
static void launch_paged_attention(const AttentionPlan& plan, const AttnParams& p, cudaStream_t stream) {
    const dim3 grid(plan.num_tiles, p.num_kv_heads, plan.num_splits);
    constexpr size_t smem = attention_smem_bytes(D, sizeof(T));
    // Above the default 48 KB the kernel must opt in. Per launch, as FlashAttention does: cheap, valid during
    // graph capture, and right for whichever device is current.
    if constexpr (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(paged_attention_kernel<D, T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
    paged_attention_kernel<D, T><<<grid, kThreads, smem, stream>>>(p);
    CUDA_CHECK_LAUNCH("paged_attention_kernel");
}

// The kernel for the head size, over a cache of T.
template <class T>
static void launch_for_head_dim(int D, const AttentionPlan& plan, const AttnParams& p, cudaStream_t stream) {
    switch (D) {
    case 8: return launch_paged_attention<8, T>(plan, p, stream);
    case 32: return launch_paged_attention<32, T>(plan, p, stream);
    case 64: return launch_paged_attention<64, T>(plan, p, stream);
    case 80: return launch_paged_attention<80, T>(plan, p, stream);  // Phi-2
    case 96: return launch_paged_attention<96, T>(plan, p, stream);  // Phi-3 / Phi-3.5-mini
    case 128: return launch_paged_attention<128, T>(plan, p, stream);
    case 256: return launch_paged_attention<256, T>(plan, p, stream);
    default: throw std::invalid_argument(unsupported_head_dim(D));
    }
}

void paged_attention(const AttentionPlan& plan, const float* q, const AttentionMetadata& meta,
                     const KvCacheLayout& layout, const void* kv_cache, int layer, int num_heads,
                     const AttentionParams& params, float* out, float* scratch, cudaStream_t stream) {
    if (layer < 0 || layer >= layout.num_layers)
        throw std::invalid_argument("cuda paged_attention: layer " + std::to_string(layer) + " out of range [0, " +
                                    std::to_string(layout.num_layers) + ")");
    if (meta.num_tokens <= 0 || meta.num_seqs <= 0) return;
    if (plan.num_splits > 65535 || layout.num_kv_heads > 65535)
        throw std::invalid_argument("cuda paged_attention: grid too large");
    const int D = layout.head_dim;
    AttnParams p{};
    p.q = q;
    p.out = out;
    const char* cache = static_cast<const char*>(kv_cache);
    p.k_cache = cache + layout.offset(layer, 0, 0, 0, 0) * layout.elem_bytes();
    p.v_cache = cache + layout.offset(layer, 1, 0, 0, 0) * layout.elem_bytes();
    p.query_start_loc = meta.query_start_loc;
    p.seq_lens = meta.seq_lens;
    p.block_tables = meta.block_tables;
    const size_t partials = static_cast<size_t>(meta.num_tokens) * num_heads * plan.num_splits;
    if (plan.num_splits > 1) {
        if (!scratch) throw std::invalid_argument("cuda paged_attention: split-K needs scratch");
        p.part_acc = scratch;
        p.part_max = scratch + partials * D;
        p.part_sum = p.part_max + partials;
    }
    p.block_stride = static_cast<int64_t>(layout.block_stride());
    p.head_stride = static_cast<int64_t>(layout.head_stride());
    p.max_blocks_per_seq = meta.max_blocks_per_seq;
    p.block_size = layout.block_size;
    p.num_tokens = meta.num_tokens;
    p.num_seqs = meta.num_seqs;
    p.num_heads = num_heads;
    p.num_kv_heads = layout.num_kv_heads;
    p.queries_per_tile = plan.queries_per_tile;
    p.num_splits = plan.num_splits;
    p.split_len = plan.split_len;
    p.scale = params.scale;
    p.sliding_window = params.sliding_window;
    p.logit_softcap = params.logit_softcap;
    switch (layout.kv_dtype) {
    case DType::F32: launch_for_head_dim<float>(D, plan, p, stream); break;
    case DType::F16: launch_for_head_dim<__half>(D, plan, p, stream); break;
    case DType::BF16: launch_for_head_dim<__nv_bfloat16>(D, plan, p, stream); break;
    default:
        throw std::invalid_argument("cuda paged_attention: KV cache type " + std::string(dtype_name(layout.kv_dtype)) +
                                    " is not supported (F32, F16, BF16)");
    }
    if (plan.num_splits > 1) {
        merge_splits_kernel<<<dim3(meta.num_tokens, num_heads), kMergeThreads, 0, stream>>>(p, D);
        CUDA_CHECK_LAUNCH("merge_splits_kernel");
    }
}

}  // namespace kvscope::cuda
