// The CPU backend: multithreaded F32 kernels over weights in every DType (F32, F16, BF16, the GGUF block types).
// Owns its thread pool and per-thread scratch; scratch grows on the first steps only, so a forward
// pass in steady state allocates nothing. Engine thread only. Compiled once per CPU kernel set
// (cpu/kernel_set.h); other code makes one through cpu/cpu_kernel_sets.h.
#pragma once

#include "backend.h"
#include "cpu/kernel_set.h"
#include "cpu/attention.h"
#include "cpu/matmul.h"
#include "cpu/thread_pool.h"

#include <cstdint>
#include <memory>
#include <vector>

KVSCOPE_CPU_KERNEL_SET_ONLY("cpu/cpu_backend.h");

namespace KVSCOPE_CPU_NAMESPACE {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int num_threads = default_num_threads());
    ~CpuBackend() override;

    std::string name() const override { return "cpu"; }
    std::string kernel_set() const override;
    bool supports(DType) const override { return true; }
    int num_threads() const override { return pool_.size(); }

    void* allocate(size_t bytes) override;
    void deallocate(void* ptr) override;
    void copy_to_device(void* dst, const void* src, size_t bytes) override;
    void copy_to_host(void* dst, const void* src, size_t bytes) override;
    // F32/F16/BF16 weights as panels (cpu/panel_matmul.h), in memory the backend owns until it is destroyed.
    WeightView repack_matmul_weight(const WeightView& w) override;
    // Row-major weights at any row, panels at a panel's first row, rows interleaved by 8 at a group's.
    WeightView weight_rows(const WeightView& w, int64_t first, int64_t count) const override;

    void embedding(const WeightView& table, const int32_t* ids, int n, float* out) override;
    void rms_norm(const float* x, const float* weight, int n, int dim, float eps, float* out) override;
    void matmul(const float* x, int n, const WeightView& w, const float* bias, float* out) override;
    void rope(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads,
              const RopeParams& p) override;
    void write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n, const KvCacheLayout& layout,
                  void* kv_cache, int layer) override;
    void paged_attention(const float* q, const AttentionMetadata& meta, const KvCacheLayout& layout,
                         const void* kv_cache, int layer, int num_heads, const AttentionParams& params,
                         float* out) override;
    void silu_mul(const float* gate, const float* up, int64_t n, float* out) override;
    void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) override;
    void scale(float* x, int64_t n, float s) override;
    void softcap(float* x, int64_t n, float cap) override;
    void add(float* x, const float* y, int64_t n) override;
    void argmax(const float* logits, int n, int vocab, int32_t* out) override;
    void gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out) override;

private:
    // Memory for a repacked weight, taken in order from chunks on 2 MiB pages (see allocate()).
    void* packed_memory(size_t bytes);

    ThreadPool pool_;
    MatmulScratch matmul_scratch_;
    AttentionScratch attention_scratch_;
    std::vector<void*> packed_chunks_;
    size_t chunk_used_ = 0, chunk_size_ = 0;  // of packed_chunks_.back()
};

// This kernel set's entry points, the only symbols its object file exports (kernels/CMakeLists.txt);
// cpu_kernel_sets.cpp lists every set's.
std::unique_ptr<Backend> make_cpu_backend(int num_threads);
// The CpuFeature bits (cpu/cpu_features.h) this set is compiled for: what a CPU must have to run it.
uint32_t compiled_cpu_features();
// Reads bytes at data once, as `streams` (1 .. kMaxReadStreams) equal parts side by side, in the set's
// widest vectors, and returns their sum (so that nothing is optimized away): the memory-read reference of
// the decode roofline (cpu/read_streams.cpp). Bytes past a multiple of 64 * streams are not read.
inline constexpr int kMaxReadStreams = 8;
uint64_t read_streams(const void* data, size_t bytes, int streams);

}  // namespace KVSCOPE_CPU_NAMESPACE
