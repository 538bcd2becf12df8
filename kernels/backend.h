// The Backend interface: every op the forward pass needs, on one device (ggml's backend idea).
// The model runner calls these in order on the engine thread; a backend may parallelise inside an op.
// Pointers are device pointers of this backend (host memory for the CPU backend). Activations are F32;
// weights are in their stored type (WeightView.dtype); the KV cache layout is KvCacheLayout's.
#pragma once

#include "dtype.h"
#include "kv_cache_layout.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvscope {

enum class WeightLayout : uint8_t {
    row_major,  // [rows, cols], quantized blocks along a row: what model files hold
    panels16,   // the CPU backend's repacked form for its matmul (cpu/panel_matmul.h); nothing else reads it
    rows_x8,       // the same for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and Q8_0 on AVX2 CPUs: 8 rows interleaved (cpu/matmul_x8.h)
};

// A weight matrix [rows, cols] (rows = output features).
struct WeightView {
    const void* data = nullptr;
    DType dtype = DType::F32;
    int64_t rows = 0;
    int64_t cols = 0;
    WeightLayout layout = WeightLayout::row_major;
};

// Rows [first, first + count) of a row-major matrix: rows are whole blocks in every type, so a view suffices.
inline WeightView row_range(const WeightView& w, int64_t first, int64_t count) {
    return {static_cast<const uint8_t*>(w.data) + first * dtype_row_bytes(w.dtype, w.cols), w.dtype, count, w.cols,
            w.layout};
}

// Rotary embedding of q/k heads. inv_freq[i] = 1 / theta^(2i / rotary_dim), already rope-scaled.
struct RopeParams {
    const float* inv_freq = nullptr;  // [rotary_dim / 2]
    int head_dim = 0;
    int rotary_dim = 0;
    // true: rotate-half pairs (i, i + rotary_dim/2) as in HF checkpoints and GGUF qwen2 (NEOX);
    // false: interleaved pairs (2i, 2i+1) as in GGUF llama files (their q/k rows are permuted).
    bool neox = true;
};

// The step's batch as the attention kernels see it (built by the model runner from the scheduler
// output). Sequence s owns query tokens [query_start_loc[s], query_start_loc[s+1]); after this step it
// holds seq_lens[s] tokens of context, so its query token i sits at position
// seq_lens[s] - (query_start_loc[s+1] - i) and attends causally to positions 0..that position.
struct AttentionMetadata {
    int num_tokens = 0;
    int num_seqs = 0;
    const int32_t* query_start_loc = nullptr;  // [num_seqs + 1]
    const int32_t* seq_lens = nullptr;         // [num_seqs]
    const int32_t* block_tables = nullptr;     // [num_seqs, max_blocks_per_seq]
    int max_blocks_per_seq = 0;
    const int64_t* slot_mapping = nullptr;     // [num_tokens]: block_id * block_size + offset
    int max_seq_len = 0;                       // max of seq_lens (sizes scratch space)
};

// What one layer's attention applies to its scores, beyond the causal mask.
struct AttentionParams {
    float scale = 1.0f;        // q.k is multiplied by this (1 / sqrt(head_dim), or a model's own)
    // > 0: a query at position p sees keys in (p - sliding_window, p] only (Mistral, Gemma's local layers:
    // HF's and llama.cpp's mask); 0: every key up to p.
    int sliding_window = 0;
    // > 0: scores become logit_softcap * tanh(score / logit_softcap) after the scale (Gemma 2); 0: off.
    float logit_softcap = 0.0f;
};

// One row of Backend::sample: the filters of runner/sampler.h (temperature, then top-k, min-p, top-p over
// what is left) and where the row's random draw comes from. The draw is a function of (seed, offset)
// alone, never of the row's place in the batch, so a request's tokens do not depend on its neighbours.
struct SamplingRow {
    float temperature = 0.0f;  // 0 = greedy: argmax of the raw logits, lowest index on ties
    int32_t top_k = 0;         // 0 = off
    float top_p = 1.0f;        // (0, 1]; 1 = off
    float min_p = 0.0f;        // [0, 1]; 0 = off
    uint64_t seed = 0;         // the request's seed
    uint64_t offset = 0;       // the draw's index in the request's stream (its output token index)
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // Which build of the backend's kernels runs, for display: the CPU backend's kernel set ("avx512", "avx2",
    // "baseline", "native"; cpu/cpu_kernel_sets.h); "" where a backend has one build.
    virtual std::string kernel_set() const { return ""; }
    virtual bool supports(DType weight_type) const = 0;
    // Element types the KV cache may hold (KvCacheLayout::kv_dtype): F32, F16 and BF16 on every backend (CPU,
    // CUDA, sim); is_kv_dtype describes a backend that is not loaded (`info` without a GPU).
    static bool is_kv_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
    virtual bool supports_kv_dtype(DType t) const { return is_kv_dtype(t); }
    // Whether paged_attention runs heads of head_dim, num_heads query heads over num_kv_heads (CPU: any;
    // CUDA: the head sizes it compiled kernels for, GQA groups of up to 16). Checked at model load, so that a
    // model the backend cannot run is refused there, not at its first step.
    virtual bool supports_attention(int /*head_dim*/, int /*num_heads*/, int /*num_kv_heads*/) const { return true; }
    virtual int num_threads() const = 0;

    // Device memory.
    virtual void* allocate(size_t bytes) = 0;
    virtual void deallocate(void* ptr) = 0;
    virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
    virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;

    // Makes weights usable by this backend's ops, once at load. The CPU backend uses them in place
    // (memory-mapped files stay mapped); a GPU backend copies them to device memory it owns.
    virtual WeightView upload_weight(const WeightView& w) { return w; }
    // A weight that matmul reads, already uploaded, in the layout this backend's matmul reads fastest
    // (the CPU backend repacks F32/F16/BF16 into memory it owns; the default is the same view).
    virtual WeightView repack_matmul_weight(const WeightView& uploaded) { return uploaded; }
    virtual const float* upload_vector(const float* data, size_t n) { return data; }
    // Rows [first, first + count) of a weight matmul reads (uploaded, maybe repacked) as a view of the same
    // memory, or a view with data == nullptr where its layout cannot start a view at `first`. The default takes
    // row-major weights at offsets of whole 256 bytes (what a device's vector loads may assume of a base).
    virtual WeightView weight_rows(const WeightView& w, int64_t first, int64_t count) const {
        if (w.layout != WeightLayout::row_major || first * dtype_row_bytes(w.dtype, w.cols) % 256 != 0) return {};
        return row_range(w, first, count);
    }
    // Bytes of device memory: total and in use (0, 0 where the backend has no device of its own).
    virtual void device_memory(int64_t& total, int64_t& used) const { total = used = 0; }

    // out[t, :] = table[ids[t], :] as F32.                         ids [n], out [n, table.cols]
    virtual void embedding(const WeightView& table, const int32_t* ids, int n, float* out) = 0;
    // out = x / rms(x) * weight, per row; out may be x.           x, out [n, dim]; weight [dim]
    virtual void rms_norm(const float* x, const float* weight, int n, int dim, float eps, float* out) = 0;
    // out = x @ w^T (+ bias).                                      x [n, w.cols]; out [n, w.rows]; bias [w.rows] or null
    virtual void matmul(const float* x, int n, const WeightView& w, const float* bias, float* out) = 0;
    // In-place rotary embedding.                   q [n, num_heads, head_dim]; k [n, num_kv_heads, head_dim]
    virtual void rope(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads,
                      const RopeParams& p) = 0;
    // Write this step's K and V into the paged cache at slot_mapping.  k, v [n, num_kv_heads * head_dim]
    virtual void write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n,
                          const KvCacheLayout& layout, void* kv_cache, int layer) = 0;
    // Causal attention of every query token over its sequence's paged K/V (GQA: query head h reads
    // kv head h / (num_heads / num_kv_heads)), inside the sliding window when params has one (blocks wholly
    // before the window are never read).                           q, out [num_tokens, num_heads * head_dim]
    virtual void paged_attention(const float* q, const AttentionMetadata& meta, const KvCacheLayout& layout,
                                 const void* kv_cache, int layer, int num_heads, const AttentionParams& params,
                                 float* out) = 0;
    // out = silu(gate) * up.                                       gate, up, out [n]
    virtual void silu_mul(const float* gate, const float* up, int64_t n, float* out) = 0;
    // out = gelu_tanh(gate) * up, gelu_tanh(x) = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
    // (PyTorch's gelu(approximate="tanh"): Gemma's gelu_pytorch_tanh).     gate, up, out [n]
    virtual void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) = 0;
    // x *= s.                                                       x [n]
    virtual void scale(float* x, int64_t n, float s) = 0;
    // x = cap * tanh(x / cap) (Gemma 2's final logit soft-capping).  x [n]
    virtual void softcap(float* x, int64_t n, float cap) = 0;
    // x += y.                                                       x, y [n]
    virtual void add(float* x, const float* y, int64_t n) = 0;
    // out[i] = argmax over row i (lowest index on ties).          logits [n, vocab]; out [n]
    virtual void argmax(const float* logits, int n, int vocab, int32_t* out) = 0;
    // Gather rows: out[i] = x[rows[i]].                            x [*, dim]; out [n, dim]
    virtual void gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out) = 0;

    // ---- Optional: sampling on the device, so a step copies back token ids instead of logits rows.
    // No penalties (the host sampler keeps those). A backend without it leaves sampling to the host.
    virtual bool supports_sampling() const { return false; }
    // out[i] = a token drawn for row i.                 logits [n, vocab]; rows [n]; out [n] (device memory)
    virtual void sample(const float* logits, int n, int vocab, const SamplingRow* rows, int32_t* out) {
        throw std::logic_error(name() + " backend: no device sampler (check supports_sampling())");
    }

    // ---- Optional: graphs (CUDA graphs). Between begin_capture() and end_capture() the ops are recorded,
    // not run; replay() runs the recording with one launch. Every pointer and size an op was given is
    // baked in, so the caller keeps those buffers alive and refills them in place before each replay.
    // A backend without graphs runs every op as it is called (the caller checks supports_graphs()).
    virtual bool supports_graphs() const { return false; }
    virtual void begin_capture() { throw std::logic_error(name() + " backend: no graphs (check supports_graphs())"); }
    // A graph id for replay(), or -1 when the recording cannot be replayed (an op that cannot be captured):
    // then run those steps op by op. Either way the ops run as called again afterwards.
    virtual int end_capture() { throw std::logic_error(name() + " backend: no graphs (check supports_graphs())"); }
    virtual void replay(int graph) { throw std::logic_error(name() + " backend: no graphs (check supports_graphs())"); }
    virtual void destroy_graph(int graph) {}
    // Why the last end_capture() returned -1 ("" when it did not, or when the backend cannot say).
    virtual std::string last_capture_error() const { return ""; }
};

}  // namespace kvscope
