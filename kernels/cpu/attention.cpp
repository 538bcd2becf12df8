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

// One query token against one kv head, for the group of query heads sharing that kv head (GQA): each
// K and V row is loaded once for the whole group. scores: [group, ctx] scratch.
void attend_group(const float* q, int num_heads, int kv_head, int group, int ctx, const int32_t* block_table,
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
    for (int g = 0; g < group; ++g) {
        float* s = scores + g * ctx;
        float mx = s[0];
        for (int j = 1; j < ctx; ++j) mx = std::max(mx, s[j]);
        float sum = 0;
        for (int j = 0; j < ctx; ++j) {
            s[j] = std::exp(s[j] - mx);
            sum += s[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < ctx; ++j) s[j] *= inv;
        std::memset(out + (h0 + g) * D, 0, D * sizeof(float));
    }
    for (int b = 0, j0 = 0; j0 < ctx; ++b, j0 += B) {
        const int nb = std::min(B, ctx - j0);
        const float* vb = kv_cache + layout.offset(layer, 1, block_table[b], kv_head, 0);
        for (int t = 0; t < nb; ++t)
            for (int g = 0; g < group; ++g) axpy(scores[g * ctx + j0 + t], vb + t * D, out + (h0 + g) * D, D);
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

    pool.run(static_cast<int64_t>(meta.num_tokens) * Hkv, [&](int64_t task, int thread) {
        const int i = static_cast<int>(task / Hkv), kv_head = static_cast<int>(task % Hkv);
        // The sequence that owns token i: query_start_loc is sorted.
        const int s = static_cast<int>(std::upper_bound(meta.query_start_loc, meta.query_start_loc + meta.num_seqs + 1, i) -
                                       meta.query_start_loc) - 1;
        const int pos = meta.seq_lens[s] - (meta.query_start_loc[s + 1] - i);
        attend_group(q + static_cast<size_t>(i) * num_heads * D, num_heads, kv_head, group, pos + 1,
                     meta.block_tables + static_cast<size_t>(s) * meta.max_blocks_per_seq, layout, kv_cache, layer,
                     scale, scratch[thread].data(), out + static_cast<size_t>(i) * num_heads * D);
    });
}

}  // namespace kvscope::cpu
