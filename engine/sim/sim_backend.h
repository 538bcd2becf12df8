// SimBackend: the Backend a simulated engine holds. It computes nothing (the SimModelRunner never
// calls an op; each one throws); it names the simulated GPU and reports the simulated device memory
// (HBM x tensor_parallel_size in total; weights, the activation peak and the KV pool in use) so that
// the engine's vLLM-style KV budget and the memory charts work unchanged. Engine thread only.
#pragma once

#include "backend.h"
#include "sim/gpu_specs.h"

namespace kvscope {

class SimBackend final : public Backend {
public:
    SimBackend(GpuSpec gpu, int tensor_parallel_size);

    std::string name() const override { return "sim:" + gpu_.name; }
    bool supports(DType) const override { return true; }
    int num_threads() const override { return 1; }
    void device_memory(int64_t& total, int64_t& used) const override;

    // What the simulated device holds (over the whole tensor-parallel group).
    void set_memory_in_use(int64_t weights, int64_t activations, int64_t kv_pool);
    const GpuSpec& gpu() const { return gpu_; }
    int tensor_parallel_size() const { return tp_; }

    void* allocate(size_t bytes) override;
    void deallocate(void* ptr) override;
    void copy_to_device(void* dst, const void* src, size_t bytes) override;
    void copy_to_host(void* dst, const void* src, size_t bytes) override;
    void embedding(const WeightView&, const int32_t*, int, float*) override;
    void rms_norm(const float*, const float*, int, int, float, float*) override;
    void matmul(const float*, int, const WeightView&, const float*, float*) override;
    void rope(float*, float*, const int32_t*, int, int, int, const RopeParams&) override;
    void write_kv(const float*, const float*, const int64_t*, int, const KvCacheLayout&, void*, int) override;
    void paged_attention(const float*, const AttentionMetadata&, const KvCacheLayout&, const void*, int, int,
                         const AttentionParams&, float*) override;
    void silu_mul(const float*, const float*, int64_t, float*) override;
    void gelu_tanh_mul(const float*, const float*, int64_t, float*) override;
    void scale(float*, int64_t, float) override;
    void softcap(float*, int64_t, float) override;
    void add(float*, const float*, int64_t) override;
    void argmax(const float*, int, int, int32_t*) override;
    void gather_rows(const float*, const int32_t*, int, int, float*) override;

private:
    [[noreturn]] void no_compute(const char* op) const;

    GpuSpec gpu_;
    int tp_;
    int64_t weights_ = 0, activations_ = 0, kv_pool_ = 0;
};

}  // namespace kvscope
