#include "cpu/attention.h"

#include "cpu/simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvscope::cpu {

void write_kv(ThreadPool& pool, const float* k, const float* v, const int64_t* slot_mapping, int n,
              const KvCacheLayout& layout, float* kv_cache, int layer) {
    const int H = layout.num_kv_heads, D = layout.head_dim, B = layout.block_size;
    for (int t = 0; t < n; ++t) {
        const int64_t slot = slot_mapping[t];
        if (slot < 0) continue;  // a padding token owns no slot
        const int block = static_cast<int>(slot / B), off = static_cast<int>(slot % B);
        for (int h = 0; h < H; ++h) {
            std::memcpy(kv_cache + layout.offset(layer, 0, block, h, off), k + (t * H + h) * D, D * sizeof(float));
            std::memcpy(kv_cache + layout.offset(layer, 1, block, h, off), v + (t * H + h) * D, D * sizeof(float));
        }
    }
}

namespace {

// Head dims that are multiples of 16 (64, 128) take 16-lane vectors; others (stories260K's 8) stay scalar.
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

// One query token against one kv head, for the group of query heads sharing that kv head (GQA): each
// K and V row is loaded once for the whole group. scores: [group, ctx] scratch. Any head_dim.
void attend_group(const float* q, int kv_head, int group, int ctx, const int32_t* block_table,
                  const KvCacheLayout& layout, const float* kv_cache, int layer, float scale, float* scores,
                  float* out) {
    const int D = layout.head_dim, B = layout.block_size;
    const int h0 = kv_head * group;
    for (int b = 0, j0 = 0; j0 < ctx; ++b, j0 += B) {
        const int nb = std::min(B, ctx - j0);
        const float* kb = kv_cache + layout.offset(layer, 0, block_table[b], kv_head, 0);
        for (int t = 0; t < nb; ++t)
            for (int g = 0; g < group; ++g) scores[g * ctx + j0 + t] = dot(q + (h0 + g) * D, kb + t * D, D) * scale;
    }
    softmax_rows(scores, group, ctx);
    for (int g = 0; g < group; ++g) std::memset(out + (h0 + g) * D, 0, D * sizeof(float));
    for (int b = 0, j0 = 0; j0 < ctx; ++b, j0 += B) {
        const int nb = std::min(B, ctx - j0);
        const float* vb = kv_cache + layout.offset(layer, 1, block_table[b], kv_head, 0);
        for (int t = 0; t < nb; ++t)
            for (int g = 0; g < group; ++g) axpy(scores[g * ctx + j0 + t], vb + t * D, out + (h0 + g) * D, D);
    }
}

// Walks a sequence's K or V rows of one kv head in order, across its blocks (never past the last one).
struct RowCursor {
    const KvCacheLayout& layout;
    const float* kv_cache;
    const int32_t* block_table;
    int layer, kv, kv_head;
    int block = -1, offset = 0;
    const float* base = nullptr;
    const float* next() {
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
template <int D>
struct RowPrefetcher {
    static constexpr int kAhead = 32;  // rows: two blocks of 16
    RowCursor cursor;
    int remaining;
    RowPrefetcher(const RowCursor& c, int ctx) : cursor(c), remaining(ctx) {
        for (int j = 0; j < kAhead; ++j) step();
    }
    void step() {
        if (remaining == 0) return;
        --remaining;
        const char* row = reinterpret_cast<const char*>(cursor.next());
        for (size_t b = 0; b < D * sizeof(float); b += 64) __builtin_prefetch(row + b);  // cache lines
    }
};

// The V pass for G query heads of the group at once: each V row is read once for all of them.
template <int NV, int G>
void weighted_values(const float* scores, int ctx, RowCursor values, float* out) {
    constexpr int D = NV * 16;
    RowPrefetcher<D> ahead(values, ctx);
    v16f o[G][NV] = {};
    for (int j = 0; j < ctx; ++j) {
        const float* vrow = values.next();
        ahead.step();
        for (int g = 0; g < G; ++g) {
            const v16f pj = splat16(scores[g * ctx + j]);
            for (int v = 0; v < NV; ++v) o[g][v] += pj * load16(vrow + 16 * v);
        }
    }
    for (int g = 0; g < G; ++g)
        for (int v = 0; v < NV; ++v) store16(out + g * D + 16 * v, o[g][v]);
}

// attend_group for head_dim = 16 * NV: q and the output rows stay in registers, and the scores of 16
// keys are reduced together (hsum16x16) instead of one horizontal sum per key.
template <int NV>
void attend_group_v(const float* q, int kv_head, int group, int ctx, const int32_t* block_table,
                    const KvCacheLayout& layout, const float* kv_cache, int layer, float scale, float* scores,
                    float* out) {
    constexpr int D = NV * 16;
    const int h0 = kv_head * group;
    RowCursor keys{layout, kv_cache, block_table, layer, 0, kv_head};
    RowPrefetcher<D> ahead(keys, ctx);
    for (int j0 = 0; j0 < ctx; j0 += 16) {
        const int nk = std::min(16, ctx - j0);
        const float* krow[16];
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
                    for (int v = 0; v < NV; ++v) acc[j] += qv[v] * load16(krow[j] + 16 * v);
            }
            float s[16];
            store16(s, hsum16x16(acc) * scale);
            std::memcpy(scores + g * ctx + j0, s, nk * sizeof(float));
        }
    }
    softmax_rows(scores, group, ctx);
    // Up to 16 accumulator registers of output rows per V pass (4 heads of 64, 2 of 128).
    constexpr int kMaxG = std::clamp(16 / NV, 1, 4);
    const RowCursor values{layout, kv_cache, block_table, layer, 1, kv_head};
    for (int g = 0; g < group; g += kMaxG) {
        const float* p = scores + g * ctx;
        float* o = out + (h0 + g) * D;
        switch (std::min(kMaxG, group - g)) {
        case 4: weighted_values<NV, std::min(4, kMaxG)>(p, ctx, values, o); break;
        case 3: weighted_values<NV, std::min(3, kMaxG)>(p, ctx, values, o); break;
        case 2: weighted_values<NV, std::min(2, kMaxG)>(p, ctx, values, o); break;
        default: weighted_values<NV, 1>(p, ctx, values, o); break;
        }
    }
}

using AttendFn = void (*)(const float*, int, int, int, const int32_t*, const KvCacheLayout&, const float*, int, float,
                          float*, float*);

AttendFn pick_attend(int head_dim) {
    switch (head_dim) {
    case 32: return attend_group_v<2>;
    case 64: return attend_group_v<4>;
    case 80: return attend_group_v<5>;
    case 96: return attend_group_v<6>;
    case 128: return attend_group_v<8>;
    default: return attend_group;
    }
}

}  // namespace

void paged_attention(ThreadPool& pool, std::vector<std::vector<float>>& scratch, const float* q,
                     const AttentionMetadata& meta, const KvCacheLayout& layout, const float* kv_cache, int layer,
                     int num_heads, float scale, float* out) {
    const int Hkv = layout.num_kv_heads, D = layout.head_dim;
    const int group = num_heads / Hkv;
    const size_t need = static_cast<size_t>(group) * std::max(1, meta.max_seq_len);
    if (scratch.size() < static_cast<size_t>(pool.size())) scratch.resize(pool.size());
    for (auto& s : scratch)
        if (s.size() < need) s.resize(need);

    const AttendFn attend = pick_attend(D);
    pool.run(static_cast<int64_t>(meta.num_tokens) * Hkv, [&](int64_t task, int thread) {
        const int i = static_cast<int>(task / Hkv), kv_head = static_cast<int>(task % Hkv);
        // The sequence that owns token i: query_start_loc is sorted.
        const int s = static_cast<int>(std::upper_bound(meta.query_start_loc, meta.query_start_loc + meta.num_seqs + 1, i) -
                                       meta.query_start_loc) - 1;
        const int pos = meta.seq_lens[s] - (meta.query_start_loc[s + 1] - i);
        attend(q + static_cast<size_t>(i) * num_heads * D, kv_head, group, pos + 1,
                     meta.block_tables + static_cast<size_t>(s) * meta.max_blocks_per_seq, layout, kv_cache, layer,
                     scale, scratch[thread].data(), out + static_cast<size_t>(i) * num_heads * D);
    });
}

}  // namespace kvscope::cpu
