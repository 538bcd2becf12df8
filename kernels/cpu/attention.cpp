#include "cpu/attention.h"

#include "cpu/simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

// The KV cache's element types: how 16 stored values become F32 lanes, and how a value is stored.
struct KvF32 {
    using T = float;
    static v16f load(const T* p) { return load16(p); }
    static float get(T x) { return x; }
    static T put(float x) { return x; }
};
struct KvF16 {
    using T = uint16_t;
    static v16f load(const T* p) { return load16_f16(p); }
    static float get(T x) { return f16_to_f32(x); }
    static T put(float x) { return f32_to_f16(x); }
};
struct KvBF16 {
    using T = uint16_t;
    static v16f load(const T* p) { return load16_bf16(p); }
    static float get(T x) { return bf16_to_f32(x); }
    static T put(float x) { return f32_to_bf16(x); }
};

template <class KV>
void write_kv_as(const float* k, const float* v, const int64_t* slot_mapping, int n, const KvCacheLayout& layout,
                 typename KV::T* kv_cache, int layer) {
    const int H = layout.num_kv_heads, D = layout.head_dim, B = layout.block_size;
    for (int t = 0; t < n; ++t) {
        const int64_t slot = slot_mapping[t];
        if (slot < 0) continue;  // a padding token owns no slot
        const int block = static_cast<int>(slot / B), off = static_cast<int>(slot % B);
        for (int h = 0; h < H; ++h) {
            const float* kh = k + (t * H + h) * D;
            const float* vh = v + (t * H + h) * D;
            typename KV::T* kd = kv_cache + layout.offset(layer, 0, block, h, off);
            typename KV::T* vd = kv_cache + layout.offset(layer, 1, block, h, off);
            for (int d = 0; d < D; ++d) {
                kd[d] = KV::put(kh[d]);
                vd[d] = KV::put(vh[d]);
            }
        }
    }
}

}  // namespace

void write_kv(ThreadPool&, const float* k, const float* v, const int64_t* slot_mapping, int n,
              const KvCacheLayout& layout, void* kv_cache, int layer) {
    switch (layout.kv_dtype) {
    case DType::F16: return write_kv_as<KvF16>(k, v, slot_mapping, n, layout, static_cast<uint16_t*>(kv_cache), layer);
    case DType::BF16: return write_kv_as<KvBF16>(k, v, slot_mapping, n, layout, static_cast<uint16_t*>(kv_cache), layer);
    case DType::F32: return write_kv_as<KvF32>(k, v, slot_mapping, n, layout, static_cast<float*>(kv_cache), layer);
    default: throw std::invalid_argument("cpu write_kv: no KV cache of " + std::string(dtype_name(layout.kv_dtype)));
    }
}

namespace {

// Softmax of each of the group's score rows in place, 16 lanes at a time (the tail through a padded
// copy, so every score takes the same arithmetic).                              scores [group, ctx]
void softmax_rows(float* scores, int group, int ctx) {
    const int cv = ctx / 16 * 16;
    for (int g = 0; g < group; ++g) {
        float* s = scores + g * ctx;
        v16f mv = splat16(s[0]);
        for (int j = 0; j < cv; j += 16) {
            const v16f x = load16(s + j);
            mv = x > mv ? x : mv;
        }
        float mx = s[0];
        for (int l = 0; l < 16; ++l) mx = std::max(mx, mv[l]);
        for (int j = cv; j < ctx; ++j) mx = std::max(mx, s[j]);
        v16f sumv{};
        for (int j = 0; j < cv; j += 16) {
            const v16f e = exp16(load16(s + j) - mx);
            store16(s + j, e);
            sumv += e;
        }
        if (cv < ctx) {
            float tail[16];
            std::fill(tail, tail + 16, -1e30f);
            std::copy(s + cv, s + ctx, tail);
            const v16f e = exp16(load16(tail) - mx);
            store16(tail, e);
            std::copy(tail, tail + (ctx - cv), s + cv);
            for (int l = 0; l < ctx - cv; ++l) sumv[l] += tail[l];
        }
        const v16f inv = splat16(1.0f / hsum16(sumv));
        for (int j = 0; j < cv; j += 16) store16(s + j, load16(s + j) * inv);
        for (int j = cv; j < ctx; ++j) s[j] *= inv[0];
    }
}

}  // namespace

namespace {

// Head dims that are multiples of 16 take 16-lane vectors; others (stories260K's 8) stay scalar.
inline float dot(const float* __restrict a, const float* __restrict b, int d) {
    int i = 0;
    float s = 0;
    if (d >= 16) {
        v16f acc{};
        for (; i + 16 <= d; i += 16) acc += load16(a + i) * load16(b + i);
        s = hsum16(acc);
    }
    for (; i < d; ++i) s += a[i] * b[i];
    return s;
}

inline void axpy(float a, const float* __restrict x, float* __restrict y, int d) {
    int i = 0;
    const v16f av = splat16(a);
    for (; i + 16 <= d; i += 16) store16(y + i, load16(y + i) + av * load16(x + i));
    for (; i < d; ++i) y[i] += a * x[i];
}

// One query token against one kv head, for the group of query heads sharing that kv head (GQA): each
// K and V row is loaded once for the whole group. Any head_dim; a half-precision row is widened once into
// an F32 copy. scores: [group, ctx] scratch.
template <class KV>
void attend_group(const float* q, int kv_head, int group, int ctx, const int32_t* block_table,
                  const KvCacheLayout& layout, const typename KV::T* kv_cache, int layer, float scale, float* scores,
                  float* out) {
    using T = typename KV::T;
    const int D = layout.head_dim, B = layout.block_size;
    const int h0 = kv_head * group;
    float stack_row[256];
    std::vector<float> heap_row(std::is_same_v<T, float> || D <= 256 ? 0 : D);
    float* const row = heap_row.empty() ? stack_row : heap_row.data();
    auto as_f32 = [&](const T* p) -> const float* {
        if constexpr (std::is_same_v<T, float>) {
            return p;
        } else {
            for (int d = 0; d < D; ++d) row[d] = KV::get(p[d]);
            return row;
        }
    };
    for (int b = 0, j0 = 0; j0 < ctx; ++b, j0 += B) {
        const int nb = std::min(B, ctx - j0);
        const T* kb = kv_cache + layout.offset(layer, 0, block_table[b], kv_head, 0);
        for (int t = 0; t < nb; ++t) {
            const float* k = as_f32(kb + t * D);
            for (int g = 0; g < group; ++g) scores[g * ctx + j0 + t] = dot(q + (h0 + g) * D, k, D) * scale;
        }
    }
    softmax_rows(scores, group, ctx);
    for (int g = 0; g < group; ++g) std::memset(out + (h0 + g) * D, 0, D * sizeof(float));
    for (int b = 0, j0 = 0; j0 < ctx; ++b, j0 += B) {
        const int nb = std::min(B, ctx - j0);
        const T* vb = kv_cache + layout.offset(layer, 1, block_table[b], kv_head, 0);
        for (int t = 0; t < nb; ++t) {
            const float* v = as_f32(vb + t * D);
            for (int g = 0; g < group; ++g) axpy(scores[g * ctx + j0 + t], v, out + (h0 + g) * D, D);
        }
    }
}

// Walks a sequence's K or V rows of one kv head in order, across its blocks (never past the last one).
template <class T>
struct RowCursor {
    const KvCacheLayout& layout;
    const T* kv_cache;
    const int32_t* block_table;
    int layer, kv, kv_head;
    int block = -1, offset = 0;
    const T* base = nullptr;
    const T* next() {
        if (block < 0 || offset == layout.block_size) {
            base = kv_cache + layout.offset(layer, kv, block_table[++block], kv_head, 0);
            offset = 0;
        }
        return base + (offset++) * layout.head_dim;
    }
};

// Prefetches rows a fixed distance ahead of a RowCursor. Blocks are scattered over the pool, so the
// hardware prefetcher loses the stream at every block boundary; without this, decode attention over a
// pool larger than the caches ran at about half the bandwidth the weight matmuls get.
template <int D, class T>
struct RowPrefetcher {
    static constexpr int kAhead = 32;  // rows: two blocks of 16
    RowCursor<T> cursor;
    int remaining;
    RowPrefetcher(const RowCursor<T>& c, int ctx) : cursor(c), remaining(ctx) {
        for (int j = 0; j < kAhead; ++j) step();
    }
    void step() {
        if (remaining == 0) return;
        --remaining;
        const char* row = reinterpret_cast<const char*>(cursor.next());
        for (size_t b = 0; b < D * sizeof(T); b += 64) __builtin_prefetch(row + b);  // cache lines
    }
};

// The V pass for G query heads of the group at once: each V row is read once for all of them.
template <int NV, int G, class KV>
void weighted_values(const float* scores, int ctx, RowCursor<typename KV::T> values, float* out) {
    constexpr int D = NV * 16;
    RowPrefetcher<D, typename KV::T> ahead(values, ctx);
    v16f o[G][NV] = {};
    for (int j = 0; j < ctx; ++j) {
        const typename KV::T* vrow = values.next();
        ahead.step();
        v16f vv[NV];
        for (int v = 0; v < NV; ++v) vv[v] = KV::load(vrow + 16 * v);
        for (int g = 0; g < G; ++g) {
            const v16f pj = splat16(scores[g * ctx + j]);
            for (int v = 0; v < NV; ++v) o[g][v] += pj * vv[v];
        }
    }
    for (int g = 0; g < G; ++g)
        for (int v = 0; v < NV; ++v) store16(out + g * D + 16 * v, o[g][v]);
}

// attend_group for head_dim = 16 * NV: q and the output rows stay in registers, and the scores of 16
// keys are reduced together (hsum16x16) instead of one horizontal sum per key. Each stored K row is
// widened to F32 once for the whole group.
template <int NV, class KV>
void attend_group_v(const float* q, int kv_head, int group, int ctx, const int32_t* block_table,
                    const KvCacheLayout& layout, const typename KV::T* kv_cache, int layer, float scale,
                    float* scores, float* out) {
    using T = typename KV::T;
    constexpr int D = NV * 16;
    const int h0 = kv_head * group;
    RowCursor<T> keys{layout, kv_cache, block_table, layer, 0, kv_head};
    RowPrefetcher<D, T> ahead(keys, ctx);
    for (int j0 = 0; j0 < ctx; j0 += 16) {
        const int nk = std::min(16, ctx - j0);
        const T* krow[16];
        for (int j = 0; j < nk; ++j) {
            krow[j] = keys.next();
            ahead.step();
        }
        for (int g = 0; g < group; ++g) {
            v16f qv[NV];
            for (int v = 0; v < NV; ++v) qv[v] = load16(q + (h0 + g) * D + 16 * v);
            v16f acc[16];
            for (int j = 0; j < 16; ++j) {
                acc[j] = v16f{};
                if (j < nk)
                    for (int v = 0; v < NV; ++v) acc[j] += qv[v] * KV::load(krow[j] + 16 * v);
            }
            float s[16];
            store16(s, hsum16x16(acc) * scale);
            std::memcpy(scores + g * ctx + j0, s, nk * sizeof(float));
        }
    }
    softmax_rows(scores, group, ctx);
    // Up to 16 accumulator registers of output rows per V pass (4 heads of 64, 2 of 128).
    constexpr int kMaxG = std::clamp(16 / NV, 1, 4);
    const RowCursor<T> values{layout, kv_cache, block_table, layer, 1, kv_head};
    for (int g = 0; g < group; g += kMaxG) {
        const float* p = scores + g * ctx;
        float* o = out + (h0 + g) * D;
        switch (std::min(kMaxG, group - g)) {
        case 4: weighted_values<NV, std::min(4, kMaxG), KV>(p, ctx, values, o); break;
        case 3: weighted_values<NV, std::min(3, kMaxG), KV>(p, ctx, values, o); break;
        case 2: weighted_values<NV, std::min(2, kMaxG), KV>(p, ctx, values, o); break;
        default: weighted_values<NV, 1, KV>(p, ctx, values, o); break;
        }
    }
}

template <class KV>
using AttendFn = void (*)(const float*, int, int, int, const int32_t*, const KvCacheLayout&, const typename KV::T*,
                          int, float, float*, float*);

template <class KV>
AttendFn<KV> pick_attend(int head_dim) {
    switch (head_dim) {
    case 32: return attend_group_v<2, KV>;
    case 64: return attend_group_v<4, KV>;
    case 80: return attend_group_v<5, KV>;
    case 96: return attend_group_v<6, KV>;
    case 128: return attend_group_v<8, KV>;
    default: return attend_group<KV>;
    }
}

template <class KV>
void paged_attention_as(ThreadPool& pool, std::vector<std::vector<float>>& scratch, const float* q,
                        const AttentionMetadata& meta, const KvCacheLayout& layout, const typename KV::T* kv_cache,
                        int layer, int num_heads, float scale, float* out) {
    const int Hkv = layout.num_kv_heads, D = layout.head_dim;
    const int group = num_heads / Hkv;
    const size_t need = static_cast<size_t>(group) * std::max(1, meta.max_seq_len);
    if (scratch.size() < static_cast<size_t>(pool.size())) scratch.resize(pool.size());
    for (auto& s : scratch)
        if (s.size() < need) s.resize(need);

    const AttendFn<KV> attend = pick_attend<KV>(D);
    pool.run(static_cast<int64_t>(meta.num_tokens) * Hkv, [&](int64_t task, int thread) {
        const int i = static_cast<int>(task / Hkv), kv_head = static_cast<int>(task % Hkv);
        // The sequence that owns token i: query_start_loc is sorted.
        const int s = static_cast<int>(std::upper_bound(meta.query_start_loc, meta.query_start_loc + meta.num_seqs + 1, i) -
                                       meta.query_start_loc) - 1;
        const int pos = meta.seq_lens[s] - (meta.query_start_loc[s + 1] - i);
        attend(q + static_cast<size_t>(i) * num_heads * D, kv_head, group, pos + 1,
               meta.block_tables + static_cast<size_t>(s) * meta.max_blocks_per_seq, layout, kv_cache, layer, scale,
               scratch[thread].data(), out + static_cast<size_t>(i) * num_heads * D);
    });
}

}  // namespace

void paged_attention(ThreadPool& pool, std::vector<std::vector<float>>& scratch, const float* q,
                     const AttentionMetadata& meta, const KvCacheLayout& layout, const void* kv_cache, int layer,
                     int num_heads, float scale, float* out) {
    switch (layout.kv_dtype) {
    case DType::F16:
        return paged_attention_as<KvF16>(pool, scratch, q, meta, layout, static_cast<const uint16_t*>(kv_cache), layer,
                                         num_heads, scale, out);
    case DType::BF16:
        return paged_attention_as<KvBF16>(pool, scratch, q, meta, layout, static_cast<const uint16_t*>(kv_cache), layer,
                                          num_heads, scale, out);
    case DType::F32:
        return paged_attention_as<KvF32>(pool, scratch, q, meta, layout, static_cast<const float*>(kv_cache), layer,
                                         num_heads, scale, out);
    default:
        throw std::invalid_argument("cpu paged_attention: no KV cache of " + std::string(dtype_name(layout.kv_dtype)));
    }
}

}  // namespace KVSCOPE_CPU_NAMESPACE
