#include "cpu/cpu_backend.h"

#include "cpu/attention.h"
#include "cpu/cpu_features.h"
#include "cpu/matmul_x8.h"
#include "cpu/panel_matmul.h"
#include "cpu/quant.h"
#include "cpu/simd.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace KVSCOPE_CPU_NAMESPACE {

namespace {
// Elementwise work below this many values runs on the calling thread: waking workers costs more.
constexpr int64_t kParallelMinElems = 1 << 15;

template <class Fn>
void parallel_chunks(ThreadPool& pool, int64_t n, Fn&& fn) {
    if (n < kParallelMinElems) {
        fn(0, n);
        return;
    }
    const int64_t chunks = pool.size() * 4;
    const int64_t step = (n + chunks - 1) / chunks;
    pool.run(chunks, [&](int64_t c, int) {
        const int64_t b = c * step, e = std::min(n, b + step);
        if (b < e) fn(b, e);
    });
}
}  // namespace

#define KVSCOPE_STRINGIFY(x) #x
#define KVSCOPE_NAME_OF(x) KVSCOPE_STRINGIFY(x)

std::unique_ptr<Backend> make_cpu_backend(int num_threads) { return std::make_unique<CpuBackend>(num_threads); }

uint32_t compiled_cpu_features() { return cpu_features_of_this_translation_unit(); }

CpuBackend::CpuBackend(int num_threads) : pool_(num_threads) {}

std::string CpuBackend::kernel_set() const { return KVSCOPE_NAME_OF(KVSCOPE_CPU_KERNEL_SET); }

CpuBackend::~CpuBackend() {
    for (void* p : packed_chunks_) deallocate(p);
}

void* CpuBackend::packed_memory(size_t bytes) {
    // Each matrix on its own 4 KiB pages, as small ones were (allocate() gives 2 MiB pages from 2 MiB up),
    // decode paid a TLB miss per page of every stream: most of bench-135m's matrices are 60 KB - 1.8 MB.
    // In chunks of 64 MiB they share 2 MiB pages, and lie in the order the forward pass reads them.
    constexpr size_t kChunk = size_t{64} << 20;
    bytes = (bytes + 63) / 64 * 64;
    if (packed_chunks_.empty() || chunk_used_ + bytes > chunk_size_) {
        chunk_size_ = std::max(bytes, kChunk);
        packed_chunks_.push_back(allocate(chunk_size_));
        chunk_used_ = 0;
    }
    void* p = static_cast<uint8_t*>(packed_chunks_.back()) + chunk_used_;
    chunk_used_ += bytes;
    return p;
}

WeightView CpuBackend::repack_matmul_weight(const WeightView& w) {
    if (x8_packable(w)) return pack_x8(pool_, w, packed_memory(dtype_row_bytes(w.dtype, w.cols) * static_cast<size_t>(w.rows)));
    if (w.layout != WeightLayout::row_major || !panel_packable(w.dtype) || w.rows == 0 || w.cols == 0) return w;
    return pack_panels(pool_, w, packed_memory(panel_bytes(w)));
}

WeightView CpuBackend::weight_rows(const WeightView& w, int64_t first, int64_t count) const {
    switch (w.layout) {
    case WeightLayout::row_major: return row_range(w, first, count);
    case WeightLayout::rows_x8:  // groups of 8 rows take the bytes of 8 rows
        if (first % 8 != 0 || count % 8 != 0) return {};
        return row_range(w, first, count);
    case WeightLayout::panels16: {
        if (first % kPanelRows != 0) return {};
        WeightView out = w;
        out.data = static_cast<const uint8_t*>(w.data) + first / kPanelRows * panel_bytes({nullptr, w.dtype, kPanelRows, w.cols});
        out.rows = count;
        return out;
    }
    }
    return {};
}

void* CpuBackend::allocate(size_t bytes) {
    // Big buffers (the KV pool) on 2 MiB pages where the kernel allows it: decode attention jumps from
    // block to scattered block, and with 4 KiB pages nearly every block was a TLB miss.
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t align = bytes >= kHuge ? kHuge : 64;
    void* p = std::aligned_alloc(align, (bytes + align - 1) / align * align);
    if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == kHuge) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: ignore failure
#endif
    return p;
}
void CpuBackend::deallocate(void* ptr) { std::free(ptr); }
void CpuBackend::copy_to_device(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void CpuBackend::embedding(const WeightView& table, const int32_t* ids, int n, float* out) {
    const size_t row_bytes = dtype_row_bytes(table.dtype, table.cols);
    for (int t = 0; t < n; ++t)
        dequantize_row(table.dtype, static_cast<const uint8_t*>(table.data) + ids[t] * row_bytes,
                       out + static_cast<size_t>(t) * table.cols, table.cols);
}

void CpuBackend::rms_norm(const float* x, const float* weight, int n, int dim, float eps, float* out) {
    auto rows = [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            const float* xr = x + t * dim;
            float* o = out + t * dim;
            // The sum of squares in 4 x kLanes partial sums: one scalar chain of dependent adds took about 800
            // cycles of a 576-wide row, twice in each decode layer while the other threads wait.
            vf acc[4] = {};
            int i = 0;
            for (; i + 4 * kLanes <= dim; i += 4 * kLanes)
                for (int a = 0; a < 4; ++a) {
                    const vf v = loadv(xr + i + a * kLanes);
                    acc[a] += v * v;
                }
            for (; i + kLanes <= dim; i += kLanes) {
                const vf v = loadv(xr + i);
                acc[0] += v * v;
            }
            float ss = hsumv((acc[0] + acc[1]) + (acc[2] + acc[3]));
            for (; i < dim; ++i) ss += xr[i] * xr[i];
            const float inv = 1.0f / std::sqrt(ss / dim + eps);
            const vf inv_v = splatv(inv);
            i = 0;
            for (; i + kLanes <= dim; i += kLanes) storev(o + i, loadv(xr + i) * inv_v * loadv(weight + i));
            for (; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
        }
    };
    if (static_cast<int64_t>(n) * dim < kParallelMinElems)
        rows(0, n);
    else
        pool_.run(n, [&](int64_t t, int) { rows(t, t + 1); });
}

void CpuBackend::matmul(const float* x, int n, const WeightView& w, const float* bias, float* out) {
    cpu::matmul(pool_, matmul_scratch_, x, n, w, bias, out);
}

void CpuBackend::rope(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads,
                      const RopeParams& p) {
    const int half = p.rotary_dim / 2, D = p.head_dim;
    auto rotate = [&](float* head, const float* cs, const float* sn) {
        for (int i = 0; i < half; ++i) {
            const int a = p.neox ? i : 2 * i, b = p.neox ? i + half : 2 * i + 1;
            const float x0 = head[a], x1 = head[b];
            head[a] = x0 * cs[i] - x1 * sn[i];
            head[b] = x0 * sn[i] + x1 * cs[i];
        }
    };
    auto tokens = [&](int64_t tb, int64_t te) {
        float cs[512], sn[512];  // rotary_dim <= 1024 (checked at model load)
        for (int64_t t = tb; t < te; ++t) {
            for (int i = 0; i < half; ++i) {
                const float angle = static_cast<float>(positions[t]) * p.inv_freq[i];
                cs[i] = std::cos(angle);
                sn[i] = std::sin(angle);
            }
            for (int h = 0; h < num_heads; ++h) rotate(q + (t * num_heads + h) * D, cs, sn);
            for (int h = 0; h < num_kv_heads; ++h) rotate(k + (t * num_kv_heads + h) * D, cs, sn);
        }
    };
    if (static_cast<int64_t>(n) * (num_heads + num_kv_heads) * D < kParallelMinElems)
        tokens(0, n);
    else
        pool_.run(n, [&](int64_t t, int) { tokens(t, t + 1); });
}

void CpuBackend::write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n,
                          const KvCacheLayout& layout, void* kv_cache, int layer) {
    cpu::write_kv(pool_, k, v, slot_mapping, n, layout, kv_cache, layer);
}

void CpuBackend::paged_attention(const float* q, const AttentionMetadata& meta, const KvCacheLayout& layout,
                                 const void* kv_cache, int layer, int num_heads, const AttentionParams& params,
                                 float* out) {
    cpu::paged_attention(pool_, attention_scratch_, q, meta, layout, kv_cache, layer, num_heads, params, out);
}

// out = f(gate) * up for a gated MLP, kLanes at a time by `lanes(g, u, o)`. A chunk's tail goes through
// a padded copy, so every value takes the same arithmetic wherever the chunk edges fall: results stay
// independent of the thread count and of the batch around a token.
template <class Lanes>
void gated_chunks(ThreadPool& pool, const float* gate, const float* up, int64_t n, float* out, Lanes lanes) {
    parallel_chunks(pool, n, [&](int64_t b, int64_t e) {
        int64_t i = b;
        for (; i + kLanes <= e; i += kLanes) lanes(gate + i, up + i, out + i);
        if (i < e) {
            float g[kLanes] = {}, u[kLanes] = {}, o[kLanes];
            std::copy(gate + i, gate + e, g);
            std::copy(up + i, up + e, u);
            lanes(g, u, o);
            std::copy(o, o + (e - i), out + i);
        }
    });
}

void CpuBackend::silu_mul(const float* gate, const float* up, int64_t n, float* out) {
    // Through expv (libm's scalar expf was about 4% of a decode step).
    auto lanes = [](const float* g, const float* u, float* o) {
        const vf gv = loadv(g);
        storev(o, gv / (1.0f + expv(-gv)) * loadv(u));
    };
    gated_chunks(pool_, gate, up, n, out, lanes);
}

void CpuBackend::gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
    // x / 2 * (1 + tanh(u)) = x / (1 + exp(-2u)): silu's form, with u = sqrt(2 / pi) * (x + 0.044715 x^3).
    auto lanes = [](const float* g, const float* u, float* o) {
        const vf x = loadv(g);
        const vf two_u = (2.0f * 0.7978845608f) * (x + 0.044715f * x * x * x);
        storev(o, x / (1.0f + expv(-two_u)) * loadv(u));
    };
    gated_chunks(pool_, gate, up, n, out, lanes);
}

void CpuBackend::scale(float* x, int64_t n, float s) {
    parallel_chunks(pool_, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) x[i] *= s;
    });
}

void CpuBackend::softcap(float* x, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    parallel_chunks(pool_, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) x[i] = cap * std::tanh(x[i] * inv);
    });
}

void CpuBackend::add(float* x, const float* y, int64_t n) {
    parallel_chunks(pool_, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) x[i] += y[i];
    });
}

void CpuBackend::argmax(const float* logits, int n, int vocab, int32_t* out) {
    for (int r = 0; r < n; ++r) {
        const float* l = logits + static_cast<size_t>(r) * vocab;
        out[r] = static_cast<int32_t>(std::max_element(l, l + vocab) - l);
    }
}

void CpuBackend::gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out) {
    for (int i = 0; i < n; ++i)
        std::memcpy(out + static_cast<size_t>(i) * dim, x + static_cast<size_t>(rows[i]) * dim, dim * sizeof(float));
}

}  // namespace KVSCOPE_CPU_NAMESPACE
