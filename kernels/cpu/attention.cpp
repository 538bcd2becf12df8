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

// The KV cache's element types: how kLanes stored values become F32 lanes, and how a value is stored.
struct KvF32 {
    using T = float;
    static vf load(const T* p) { return loadv(p); }
    static float get(T x) { return x; }
    static T put(float x) { return x; }
    static void store(T* p, vf v) { storev(p, v); }
};
struct KvF16 {
    using T = uint16_t;
    static vf load(const T* p) { return loadv_f16(p); }
    static float get(T x) { return f16_to_f32(x); }
    static T put(float x) { return f32_to_f16(x); }
    static void store(T* p, vf v) { storev_f16(p, v); }
};
struct KvBF16 {
    using T = uint16_t;
    static vf load(const T* p) { return loadv_bf16(p); }
    static float get(T x) { return bf16_to_f32(x); }
    static T put(float x) { return f32_to_bf16(x); }
    static void store(T* p, vf v) { storev_bf16(p, v); }
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
            // kLanes at a time: through the scalar conversions one token's write took 3,100-3,200 cycles of each
            // bench-135m decode layer, against 930-1,080 this way.
            int d = 0;
            for (; d + kLanes <= D; d += kLanes) {
                KV::store(kd + d, loadv(kh + d));
                KV::store(vd + d, loadv(vh + d));
            }
            for (; d < D; ++d) {
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

// Gemma 2's soft-capping of the group's score rows in place: s = cap * tanh(s / cap). Scalar tanh: only
// soft-capped models pay for it.                                                scores [group, ctx]
void softcap_rows(float* scores, int group, int ctx, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t j = 0; j < static_cast<int64_t>(group) * ctx; ++j) scores[j] = cap * std::tanh(scores[j] * inv);
}

// Softmax of each of the group's score rows in place, kLanes at a time (the tail through a padded
// copy, so every score takes the same arithmetic). With stats, each row's max and sum of exponentials
// go to stats[2 g] and stats[2 g + 1]: a context partition's share in merge_partitions.
//                                                          scores [group, ctx]; stats [group, 2] or null
void softmax_rows(float* scores, int group, int ctx, float* stats) {
    const int cv = ctx / kLanes * kLanes;
    for (int g = 0; g < group; ++g) {
        float* s = scores + g * ctx;
        vf mv = splatv(s[0]);
        for (int j = 0; j < cv; j += kLanes) {
            const vf x = loadv(s + j);
            mv = x > mv ? x : mv;
        }
        float mx = s[0];
        for (int l = 0; l < kLanes; ++l) mx = std::max(mx, mv[l]);
        for (int j = cv; j < ctx; ++j) mx = std::max(mx, s[j]);
        vf sumv{};
        for (int j = 0; j < cv; j += kLanes) {
            const vf e = expv(loadv(s + j) - mx);
            storev(s + j, e);
            sumv += e;
        }
        if (cv < ctx) {
            float tail[kLanes];
            std::fill(tail, tail + kLanes, -1e30f);
            std::copy(s + cv, s + ctx, tail);
            const vf e = expv(loadv(tail) - mx);
            storev(tail, e);
            std::copy(tail, tail + (ctx - cv), s + cv);
            for (int l = 0; l < ctx - cv; ++l) sumv[l] += tail[l];
        }
        const float sum = hsumv(sumv);
        if (stats) {
            stats[2 * g] = mx;
            stats[2 * g + 1] = sum;
        }
        const vf inv = splatv(1.0f / sum);
        for (int j = 0; j < cv; j += kLanes) storev(s + j, loadv(s + j) * inv);
        for (int j = cv; j < ctx; ++j) s[j] *= inv[0];
    }
}

}  // namespace

namespace {

// Head dims that are multiples of kLanes take vectors; others (stories260K's 8 on wider sets) stay scalar.
inline float dot(const float* __restrict a, const float* __restrict b, int d) {
    int i = 0;
    float s = 0;
    if (d >= kLanes) {
        vf acc{};
        for (; i + kLanes <= d; i += kLanes) acc += loadv(a + i) * loadv(b + i);
        s = hsumv(acc);
    }
    for (; i < d; ++i) s += a[i] * b[i];
    return s;
}

inline void axpy(float a, const float* __restrict x, float* __restrict y, int d) {
    int i = 0;
    const vf av = splatv(a);
    for (; i + kLanes <= d; i += kLanes) storev(y + i, loadv(y + i) + av * loadv(x + i));
    for (; i < d; ++i) y[i] += a * x[i];
}

// One query token against one kv head, for the group of query heads sharing that kv head (GQA): each
// K and V row is loaded once for the whole group. Any head_dim; a half-precision row is widened once into
// an F32 copy. Keys [first, ctx) of the sequence (first > 0 under a sliding window, or a partition's start).
// q, out: the group's rows [group, D]; scores: [group, ctx - first] scratch; stats: as softmax_rows'.
template <class KV>
void attend_group(const float* q, int kv_head, int group, int first, int ctx, const int32_t* block_table,
                  const KvCacheLayout& layout, const typename KV::T* kv_cache, int layer, const AttentionParams& params,
                  float* scores, float* stats, float* out) {
    using T = typename KV::T;
    const int D = layout.head_dim, B = layout.block_size;
    const int n = ctx - first;
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
    auto row_at = [&](int kv, int j) {
        return kv_cache + layout.offset(layer, kv, block_table[j / B], kv_head, j % B);
    };
    for (int j = first; j < ctx; ++j) {
        const float* k = as_f32(row_at(0, j));
        for (int g = 0; g < group; ++g) scores[g * n + j - first] = dot(q + g * D, k, D) * params.scale;
    }
    if (params.logit_softcap > 0) softcap_rows(scores, group, n, params.logit_softcap);
    softmax_rows(scores, group, n, stats);
    for (int g = 0; g < group; ++g) std::memset(out + g * D, 0, D * sizeof(float));
    for (int j = first; j < ctx; ++j) {
        const float* v = as_f32(row_at(1, j));
        for (int g = 0; g < group; ++g) axpy(scores[g * n + j - first], v, out + g * D, D);
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
    // The next row is the sequence's position `first` (a sliding window's first key).
    RowCursor& from(int first) {
        block = first / layout.block_size;
        offset = first % layout.block_size;
        base = kv_cache + layout.offset(layer, kv, block_table[block], kv_head, 0);
        return *this;
    }
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
    constexpr int D = NV * kLanes;
    RowPrefetcher<D, typename KV::T> ahead(values, ctx);
    vf o[G][NV] = {};
    for (int j = 0; j < ctx; ++j) {
        const typename KV::T* vrow = values.next();
        ahead.step();
        vf vv[NV];
        for (int v = 0; v < NV; ++v) vv[v] = KV::load(vrow + kLanes * v);
        for (int g = 0; g < G; ++g) {
            const vf pj = splatv(scores[g * ctx + j]);
            for (int v = 0; v < NV; ++v) o[g][v] += pj * vv[v];
        }
    }
    for (int g = 0; g < G; ++g)
        for (int v = 0; v < NV; ++v) storev(out + g * D + kLanes * v, o[g][v]);
}

// attend_group for head_dim = kLanes * NV: q and the output rows stay in registers, and the scores of
// kLanes keys are reduced together (hsum_lanes) instead of one horizontal sum per key. Stored K and V
// rows are widened as they are loaded, for each query head of the group (cheap with F16C; without it, F16
// caches go through attend_group_widened below).
template <int NV, class KV>
void attend_group_v(const float* q, int kv_head, int group, int first, int ctx, const int32_t* block_table,
                    const KvCacheLayout& layout, const typename KV::T* kv_cache, int layer,
                    const AttentionParams& params, float* scores, float* stats, float* out) {
    using T = typename KV::T;
    constexpr int D = NV * kLanes;
    RowCursor<T> keys = RowCursor<T>{layout, kv_cache, block_table, layer, 0, kv_head}.from(first);
    ctx -= first;  // from here on, ctx counts the keys read and scores index them from the window's start
    RowPrefetcher<D, T> ahead(keys, ctx);
    for (int j0 = 0; j0 < ctx; j0 += kLanes) {
        const int nk = std::min(kLanes, ctx - j0);
        const T* krow[kLanes];
        for (int j = 0; j < nk; ++j) {
            krow[j] = keys.next();
            ahead.step();
        }
        for (int g = 0; g < group; ++g) {
            vf qv[NV];
            for (int v = 0; v < NV; ++v) qv[v] = loadv(q + g * D + kLanes * v);
            vf acc[kLanes];
            for (int j = 0; j < kLanes; ++j) {
                acc[j] = vf{};
                if (j < nk)
                    for (int v = 0; v < NV; ++v) acc[j] += qv[v] * KV::load(krow[j] + kLanes * v);
            }
            float s[kLanes];
            storev(s, hsum_lanes(acc) * params.scale);
            std::memcpy(scores + g * ctx + j0, s, nk * sizeof(float));
        }
    }
    if (params.logit_softcap > 0) softcap_rows(scores, group, ctx, params.logit_softcap);
    softmax_rows(scores, group, ctx, stats);
    // Output rows of up to 4 heads per V pass, in at most half the vector registers (AVX-512: 4 heads of
    // 64, 2 of 128; AVX2: 1 head of 64).
    constexpr int kMaxG = std::clamp(kVectorRegisters / 2 / NV, 1, 4);
    const RowCursor<T> values = RowCursor<T>{layout, kv_cache, block_table, layer, 1, kv_head}.from(first);
    for (int g = 0; g < group; g += kMaxG) {
        const float* p = scores + g * ctx;
        float* o = out + g * D;
        with_constant<kMaxG>(std::min(kMaxG, group - g),
                             [&](auto G) { weighted_values<NV, G(), KV>(p, ctx, values, o); });
    }
}

// Sets without F16C widen F16 in integer lanes, several instructions per vector. There the vector path
// widens the sequence's K and V rows of the kv head once, into scratch after the scores ([2][ctx][D]),
// and attends over that F32 copy: attend_group_v widens a K row once per query head of the group and a
// V row once per pass. Same values, so the same results.
#if defined(__F16C__) || defined(__AVX512F__)
constexpr bool kWidenF16Kv = false;
#else
constexpr bool kWidenF16Kv = true;
#endif

template <int NV>
void attend_group_widened(const float* q, int kv_head, int group, int first, int ctx, const int32_t* block_table,
                          const KvCacheLayout& layout, const uint16_t* kv_cache, int layer,
                          const AttentionParams& params, float* scores, float* stats, float* out) {
    constexpr int D = NV * kLanes;
    ctx -= first;  // the window's keys only
    float* const rows = scores + static_cast<size_t>(group) * ctx;
    for (int kv = 0; kv < 2; ++kv) {
        const RowCursor<uint16_t> from = RowCursor<uint16_t>{layout, kv_cache, block_table, layer, kv, kv_head}.from(first);
        RowCursor<uint16_t> cursor = from;
        RowPrefetcher<D, uint16_t> ahead(from, ctx);
        float* dst = rows + static_cast<size_t>(kv) * ctx * D;
        for (int j = 0; j < ctx; ++j, dst += D) {
            const uint16_t* src = cursor.next();
            ahead.step();
            for (int d = 0; d < D; d += kLanes) storev(dst + d, loadv_f16(src + d));
        }
    }
    // The copy as a cache of one layer, one kv head and one block of ctx slots.
    const KvCacheLayout widened{1, 1, ctx, 1, D, DType::F32};
    const int32_t block0 = 0;
    attend_group_v<NV, KvF32>(q, 0, group, 0, ctx, &block0, widened, rows, 0, params, scores, stats, out);
}

template <class KV>
using AttendFn = void (*)(const float*, int, int, int, int, const int32_t*, const KvCacheLayout&,
                          const typename KV::T*, int, const AttentionParams&, float*, float*, float*);

template <class KV, int NV>
AttendFn<KV> vector_attend() {
    if constexpr (kWidenF16Kv && std::is_same_v<KV, KvF16>)
        return attend_group_widened<NV>;
    else
        return attend_group_v<NV, KV>;
}

template <class KV>
AttendFn<KV> pick_attend(int head_dim) {
    switch (head_dim) {  // multiples of 16: of every set's kLanes
    case 32: return vector_attend<KV, 32 / kLanes>();
    case 64: return vector_attend<KV, 64 / kLanes>();
    case 80: return vector_attend<KV, 80 / kLanes>();
    case 96: return vector_attend<KV, 96 / kLanes>();
    case 128: return vector_attend<KV, 128 / kLanes>();
    case 256: return vector_attend<KV, 256 / kLanes>();  // Gemma
    default: return attend_group<KV>;
    }
}

// Scratch floats per thread: the scores, and for attend_group_widened its copy of K and V.
template <class KV>
size_t attend_scratch(int group, int max_seq_len, int head_dim) {
    const size_t scores = static_cast<size_t>(group) * max_seq_len;
    if (kWidenF16Kv && std::is_same_v<KV, KvF16> && pick_attend<KV>(head_dim) != attend_group<KV>)
        return scores + 2 * static_cast<size_t>(max_seq_len) * head_dim;
    return scores;
}

// A decode token's keys in partitions, each its own task, merged after (flash-decoding, as vLLM's paged
// attention v2): a single sequence with fewer kv heads than threads attended on one thread (Gemma 3 1B has
// one kv head). A partition takes kPartitionKeys keys per kv head: as many tasks per token as 256-key
// partitions of a single head would make. A partition and its share of the merge cost a few microseconds,
// so with more kv heads they pay only at longer contexts (where a partition's scores also stay in L1):
// with 256 keys for every head count, 3 kv heads lost at ctx 512 (15.4 -> 18.5 us) and 8 kv heads x 4
// sequences at 512 - 2048 (0.91 - 0.94x). Decode, F16 cache, 2 threads, us per call, 3 alternating runs
// (Zen 5, medians, before -> after): 1 kv head (head_dim 256), 1 sequence: ctx 512 41 -> 21, 2048 175 ->
// 84, 8192 750 -> 314; 4 sequences: 2048 1.19x, 8192 1.29x. 3 kv heads (64), 1 sequence: 2048 1.11x, 8192
// 1.53x; 8 kv heads x 4 sequences, 8192: 1.29x; shorter contexts within 0.96 - 1.04x. The partitions depend
// on the token's key count and the model alone, never on the batch or the thread count: results stay
// batch-invariant. Prefill tokens keep one task per kv head (they are many; split, their partials would
// take memory per token).
constexpr int kPartitionKeys = 256;
constexpr int kMaxPartitions = 16;

QueryKeys query_keys(const AttentionMetadata& meta, int seq, int token, int num_kv_heads, const AttentionParams& params) {
    const int end = meta.seq_lens[seq] - (meta.query_start_loc[seq + 1] - token) + 1;  // the token's position + 1
    const int first = params.sliding_window > 0 ? std::max(0, end - params.sliding_window) : 0;
    const bool decode = meta.query_start_loc[seq + 1] - meta.query_start_loc[seq] == 1;
    const int n = end - first, keys = kPartitionKeys * num_kv_heads;
    const int parts = decode ? std::clamp((n + keys - 1) / keys, 1, kMaxPartitions) : 1;
    return {seq, first, end, parts, (n + parts - 1) / parts};
}

// A query token's output for one kv head's group from its partitions' normalised outputs and softmax
// stats (max, sum of exponentials): each weighted by its share of the whole softmax.
//                                   partial [parts] of {out [group, D], stats [group, 2]}; out [group, D]
void merge_partitions(const float* partial, int parts, int group, int D, float* out) {
    const size_t stride = static_cast<size_t>(group) * (D + 2);
    for (int g = 0; g < group; ++g) {
        float mx = -INFINITY;
        for (int p = 0; p < parts; ++p) mx = std::max(mx, partial[p * stride + group * D + 2 * g]);
        float total = 0;
        for (int d = 0; d < D; ++d) out[g * D + d] = 0;
        for (int p = 0; p < parts; ++p) {
            const float* stats = partial + p * stride + group * D + 2 * g;
            const float w = std::exp(stats[0] - mx) * stats[1];
            total += w;
            axpy(w, partial + p * stride + g * D, out + g * D, D);
        }
        const float inv = 1.0f / total;
        for (int d = 0; d < D; ++d) out[g * D + d] *= inv;
    }
}

template <class KV>
void paged_attention_as(ThreadPool& pool, AttentionScratch& scratch, const float* q, const AttentionMetadata& meta,
                        const KvCacheLayout& layout, const typename KV::T* kv_cache, int layer, int num_heads,
                        const AttentionParams& params, float* out) {
    const int Hkv = layout.num_kv_heads, D = layout.head_dim, T = meta.num_tokens;
    const int group = num_heads / Hkv;
    const size_t need = attend_scratch<KV>(group, std::max(1, meta.max_seq_len), D);
    reserve_per_thread(scratch.per_thread, pool, need);

    // Each token's keys and its first partition; query_start_loc is sorted.
    std::vector<QueryKeys>& tokens = scratch.tokens;
    std::vector<int64_t>& part_start = scratch.part_start;
    tokens.resize(T);
    part_start.resize(static_cast<size_t>(T) + 1);
    int64_t parts = 0;
    for (int i = 0, s = 0; i < T; ++i) {
        while (s + 1 < meta.num_seqs && meta.query_start_loc[s + 1] <= i) ++s;
        tokens[i] = query_keys(meta, s, i, Hkv, params);
        part_start[i] = parts;
        parts += tokens[i].parts;
    }
    part_start[T] = parts;
    const bool split = parts > T;
    const size_t partial_floats = static_cast<size_t>(group) * (D + 2);
    if (split && scratch.partials.size() < static_cast<size_t>(parts) * Hkv * partial_floats)
        scratch.partials.resize(static_cast<size_t>(parts) * Hkv * partial_floats);

    // Token i's q / out rows of kv head kv_head's group of query heads.
    auto group_rows = [&](int i, int kv_head) {
        return (static_cast<size_t>(i) * num_heads + static_cast<size_t>(kv_head) * group) * D;
    };
    const AttendFn<KV> attend = pick_attend<KV>(D);
    pool.run(parts * Hkv, [&](int64_t task, int thread) {
        const int64_t part = task / Hkv;
        const int kv_head = static_cast<int>(task % Hkv);
        const int i = static_cast<int>(std::upper_bound(part_start.begin(), part_start.begin() + T, part) - part_start.begin()) - 1;
        const QueryKeys& t = tokens[i];
        const size_t rows = group_rows(i, kv_head);
        const int32_t* table = meta.block_tables + static_cast<size_t>(t.seq) * meta.max_blocks_per_seq;
        if (t.parts == 1) {
            attend(q + rows, kv_head, group, t.first, t.end, table, layout, kv_cache, layer, params,
                   scratch.per_thread[thread].data(), nullptr, out + rows);
            return;
        }
        const int p = static_cast<int>(part - part_start[i]);
        float* partial = scratch.partials.data() + (static_cast<size_t>(kv_head) * parts + part) * partial_floats;
        const int first = t.first + p * t.part_keys;
        attend(q + rows, kv_head, group, first, std::min(t.end, first + t.part_keys), table, layout, kv_cache, layer,
               params, scratch.per_thread[thread].data(), partial + static_cast<size_t>(group) * D, partial);
    });
    if (!split) return;
    pool.run(static_cast<int64_t>(T) * Hkv, [&](int64_t task, int) {
        const int i = static_cast<int>(task / Hkv), kv_head = static_cast<int>(task % Hkv);
        if (tokens[i].parts == 1) return;
        merge_partitions(scratch.partials.data() + (static_cast<size_t>(kv_head) * parts + part_start[i]) * partial_floats,
                         tokens[i].parts, group, D, out + group_rows(i, kv_head));
    });
}

}  // namespace

void paged_attention(ThreadPool& pool, AttentionScratch& scratch, const float* q,
                     const AttentionMetadata& meta, const KvCacheLayout& layout, const void* kv_cache, int layer,
                     int num_heads, const AttentionParams& params, float* out) {
    switch (layout.kv_dtype) {
    case DType::F16:
        return paged_attention_as<KvF16>(pool, scratch, q, meta, layout, static_cast<const uint16_t*>(kv_cache), layer,
                                         num_heads, params, out);
    case DType::BF16:
        return paged_attention_as<KvBF16>(pool, scratch, q, meta, layout, static_cast<const uint16_t*>(kv_cache), layer,
                                          num_heads, params, out);
    case DType::F32:
        return paged_attention_as<KvF32>(pool, scratch, q, meta, layout, static_cast<const float*>(kv_cache), layer,
                                         num_heads, params, out);
    default:
        throw std::invalid_argument("cpu paged_attention: no KV cache of " + std::string(dtype_name(layout.kv_dtype)));
    }
}

}  // namespace KVSCOPE_CPU_NAMESPACE
