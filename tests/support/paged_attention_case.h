// One paged-attention case, as the op suites run it on any backend: sequences of (cached tokens, new
// tokens) whose blocks are scattered at random over thousands of blocks, a KV cache that is NaN wherever no
// token was placed, the new tokens' K/V for write_kv, and the reference output (cpu/reference.h over each
// sequence's dense K/V, rounded to the cache's element type as the cache holds them). With a sliding
// window, cached tokens that no query's window reaches are never placed (NaN, as if their blocks had been
// freed): a kernel that reads outside the window produces NaN.
#pragma once

#include "op_checks.h"

#include "backend.h"
#include "cpu/quant.h"
#include "cpu/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace kvscope::test {

// What a row of the case tables asks for: decode (one new token per sequence), chunked prefill (chunks on
// top of cached tokens, a fresh prompt, chunks that straddle block boundaries), or long contexts (decode
// over 10k+ tokens next to a prefill chunk over a long prefix: the GPU's context splits).
// single_stream: one sequence decoding one token.
enum class AttentionKind { decode, prefill, long_context, single_stream };

// A float as a cache of element type t holds it.
inline float kv_round(DType t, float x) {
    switch (t) {
    case DType::F16: return f16_to_f32(f32_to_f16(x));
    case DType::BF16: return bf16_to_f32(f32_to_bf16(x));
    default: return x;
    }
}

// A host copy of a KV cache in a float buffer, holding layout.kv_dtype elements: F32, or F16/BF16 in the
// first half of the bytes. Unwritten elements are NaN in the cache's own type.
struct KvCacheView {
    float* buffer;
    KvCacheLayout layout;
    KvCacheView(float* b, const KvCacheLayout& l) : buffer(b), layout(l) {}
    void* data() const { return buffer; }
    size_t bytes() const { return layout.total_bytes(); }
    uint16_t* halves() const { return reinterpret_cast<uint16_t*>(buffer); }
    void fill_nan() const {
        if (layout.kv_dtype == DType::F32)
            std::fill_n(buffer, layout.total_elems(), kNaN);
        else
            std::fill_n(halves(), layout.total_elems(), layout.kv_dtype == DType::F16 ? uint16_t{0x7e00} : uint16_t{0x7fc0});
    }
    float at(size_t e) const {
        switch (layout.kv_dtype) {
        case DType::F16: return f16_to_f32(halves()[e]);
        case DType::BF16: return bf16_to_f32(halves()[e]);
        default: return buffer[e];
        }
    }
    bool stored_equals(size_t e, float x) const {
        const float a = at(e), b = kv_round(layout.kv_dtype, x);
        return std::memcmp(&a, &b, sizeof a) == 0;
    }
    int64_t count_written() const {
        int64_t n = 0;
        for (size_t e = 0; e < layout.total_elems(); ++e) n += !std::isnan(at(e));
        return n;
    }
};

struct PagedAttentionCase {
    KvCacheLayout layout;
    int layer = 1;  // of two: the layer offset is exercised
    int num_heads = 0;
    AttentionParams params;  // scale, sliding window, soft-cap
    std::vector<std::pair<int, int>> seqs;  // (cached tokens, new tokens)
    std::vector<int32_t> block_tables;      // [num_seqs, max_blocks_per_seq]
    int max_blocks_per_seq = 0, max_seq_len = 0;
    std::vector<int32_t> query_start_loc, seq_lens;
    std::vector<std::vector<float>> k_dense, v_dense;  // per sequence [seq_len, Hkv, D]
    std::vector<float> q;                               // [num_tokens, H, D]
    std::vector<float> k_new, v_new;                    // this step's tokens [num_tokens, Hkv, D]
    std::vector<int64_t> slot_mapping;                  // [num_tokens]

    int num_seqs() const { return static_cast<int>(seqs.size()); }
    int num_tokens() const { return query_start_loc.back(); }
    int64_t total_tokens() const { return std::accumulate(seq_lens.begin(), seq_lens.end(), int64_t{0}); }
    // The first cached position of sequence s that a query's window reaches (0 without a window).
    int first_placed(int s) const {
        return params.sliding_window > 0 ? std::min(seqs[s].first, std::max(0, seqs[s].first + 1 - params.sliding_window)) : 0;
    }
    // Tokens in the cache once the step's K/V are written: the placed cached ones and the new ones.
    int64_t placed_tokens() const {
        int64_t n = 0;
        for (int s = 0; s < num_seqs(); ++s) n += seq_lens[s] - first_placed(s);
        return n;
    }
    const int32_t* table(int s) const { return block_tables.data() + static_cast<size_t>(s) * max_blocks_per_seq; }

    // Into a host cache that is NaN: the tokens cached before this step.
    void scatter_cached(void* cache) const {
        for (int s = 0; s < num_seqs(); ++s)
            cpu::scatter_kv_ref(k_dense[s].data(), v_dense[s].data(), first_placed(s), seqs[s].first - first_placed(s),
                                table(s), layout, cache, layer);
    }

    // The metadata over the backend's copies of the index arrays.
    AttentionMetadata metadata(const int32_t* query_start_loc_d, const int32_t* seq_lens_d, const int32_t* block_tables_d,
                               const int64_t* slot_mapping_d) const {
        AttentionMetadata meta;
        meta.num_tokens = num_tokens();
        meta.num_seqs = num_seqs();
        meta.query_start_loc = query_start_loc_d;
        meta.seq_lens = seq_lens_d;
        meta.block_tables = block_tables_d;
        meta.max_blocks_per_seq = max_blocks_per_seq;
        meta.slot_mapping = slot_mapping_d;
        meta.max_seq_len = max_seq_len;
        return meta;
    }

    // Per sequence over its dense K/V as the cache holds them.
    std::vector<float> reference() const {
        const int H = num_heads, Hkv = layout.num_kv_heads, D = layout.head_dim;
        std::vector<float> ref(static_cast<size_t>(num_tokens()) * H * D);
        auto held = [&](const std::vector<float>& v) {
            std::vector<float> r(v.size());
            std::transform(v.begin(), v.end(), r.begin(), [&](float x) { return kv_round(layout.kv_dtype, x); });
            return r;
        };
        for (int s = 0; s < num_seqs(); ++s) {
            const size_t q0 = static_cast<size_t>(query_start_loc[s]) * H * D;
            const std::vector<float> k = held(k_dense[s]), v = held(v_dense[s]);
            cpu::attention_ref(q.data() + q0, seqs[s].second, k.data(), v.data(), seq_lens[s], H, Hkv, D, params,
                               ref.data() + q0);
        }
        return ref;
    }
};

// sliding_window, logit_softcap: AttentionParams' (0 = off).
inline PagedAttentionCase make_paged_attention_case(int D, int gqa, int B, DType kv_dtype, AttentionKind kind,
                                                    std::mt19937_64& rng, int sliding_window = 0,
                                                    float logit_softcap = 0.0f, int num_kv_heads = 2) {
    PagedAttentionCase c;
    const int Hkv = num_kv_heads;
    c.num_heads = Hkv * gqa;
    c.params = {1.0f / std::sqrt(static_cast<float>(D)), sliding_window, logit_softcap};
    // 4096 blocks, fewer for big blocks so that the cache holds at most 16384 slots (64 MiB at D=128; each
    // case moves it to the backend and back), 65536 for long contexts (28k tokens at most).
    const int num_blocks = std::min(4096, (kind == AttentionKind::long_context ? 65536 : 16384) / B);
    c.layout = KvCacheLayout{/*num_layers=*/2, num_blocks, B, Hkv, D, kv_dtype};

    if (kind == AttentionKind::single_stream) {
        c.seqs = {{random_int(rng, 1, 700), 1}};
    } else if (kind == AttentionKind::decode) {
        for (int cached : {0, B - 1, B, random_int(rng, 1, 700), random_int(rng, 1, 1500), random_int(rng, 1, 64)})
            c.seqs.push_back({cached, 1});
    } else if (kind == AttentionKind::prefill) {
        c.seqs = {{0, random_int(rng, 1, 40)},
                  {random_int(rng, 1, 300), 1},
                  {random_int(rng, 1, 300), random_int(rng, 2, 64)},
                  {B, 17},
                  {B - 1, random_int(rng, 2, 33)}};
    } else {
        c.seqs = {{random_int(rng, 10000, 15000), 1}, {random_int(rng, 2000, 4000), 1}, {31, 1},
                  {random_int(rng, 6000, 9000), random_int(rng, 20, 70)}};
    }

    // Block tables: a shuffled permutation of every block. Block perm[0] is never written (it stays NaN) and
    // pads every table, so a kernel that reads past a sequence's blocks produces NaN.
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (auto [cached, chunk] : c.seqs) {
        c.max_blocks_per_seq = std::max(c.max_blocks_per_seq, (cached + chunk + B - 1) / B + 1);
        c.max_seq_len = std::max(c.max_seq_len, cached + chunk);
    }
    c.block_tables.assign(static_cast<size_t>(c.num_seqs()) * c.max_blocks_per_seq, perm[0]);
    int next_block = 1;
    for (int s = 0; s < c.num_seqs(); ++s)
        for (int b = 0; b < (c.seqs[s].first + c.seqs[s].second + B - 1) / B; ++b) {
            if (next_block >= num_blocks) qFatal("paged attention case: not enough blocks");
            c.block_tables[static_cast<size_t>(s) * c.max_blocks_per_seq + b] = perm[next_block++];
        }

    // Dense K/V per sequence; queries sharper than K so that the softmax is not flat.
    c.query_start_loc = {0};
    c.k_dense.resize(c.num_seqs());
    c.v_dense.resize(c.num_seqs());
    for (int s = 0; s < c.num_seqs(); ++s) {
        const int len = c.seqs[s].first + c.seqs[s].second;
        c.k_dense[s] = random_floats(rng, static_cast<size_t>(len) * Hkv * D);
        c.v_dense[s] = random_floats(rng, static_cast<size_t>(len) * Hkv * D);
        c.seq_lens.push_back(len);
        c.query_start_loc.push_back(c.query_start_loc.back() + c.seqs[s].second);
    }
    c.q = random_floats(rng, static_cast<size_t>(c.num_tokens()) * c.num_heads * D, -3.0f, 3.0f);

    // The new tokens, in query order, and their slots.
    const size_t row = static_cast<size_t>(Hkv) * D;
    c.k_new.resize(static_cast<size_t>(c.num_tokens()) * row);
    c.v_new.resize(c.k_new.size());
    for (int s = 0; s < c.num_seqs(); ++s) {
        const auto [cached, chunk] = c.seqs[s];
        for (int p = cached; p < cached + chunk; ++p) {
            const size_t dst = c.slot_mapping.size() * row;
            std::copy_n(c.k_dense[s].data() + static_cast<size_t>(p) * row, row, c.k_new.data() + dst);
            std::copy_n(c.v_dense[s].data() + static_cast<size_t>(p) * row, row, c.v_new.data() + dst);
            c.slot_mapping.push_back(static_cast<int64_t>(c.table(s)[p / B]) * B + p % B);
        }
    }
    return c;
}

}  // namespace kvscope::test
