// The CUDA backend: every Backend op on one NVIDIA GPU (kernels/cuda/*.cu, GEMMs through cuBLAS), the
// device sampler, and CUDA graphs of the ops enqueued between begin_capture() and end_capture().
// Owns one stream (every op is enqueued on it, in call order), a cuBLAS handle bound to it with its own
// workspace, the device copies of the weights, pinned staging for step inputs, grow-only scratch, and the
// instantiated graphs; keeps an account of the device memory it holds. Pure C++ header (no CUDA
// headers): the engine and tests include it freely. Engine thread only; every entry binds its device
// first, so any single thread may drive it.
#pragma once

#include "backend.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

struct CUstream_st;     // cudaStream_t
struct cublasContext;   // cublasHandle_t
struct CUgraphExec_st;  // cudaGraphExec_t

namespace kvscope {

namespace cuda {

struct DeviceInfo {
    int device = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;
    int num_sms = 0;
    int64_t total_memory = 0;
    double peak_bandwidth = 0;  // bytes/s from the memory clock and bus width (DDR: x2)
};

// Device memory by owner, bytes. `other` = in use on the device but not held by this backend (the CUDA
// context, cuBLAS workspaces, other processes).
struct DeviceMemoryAccount {
    int64_t total = 0, used = 0;
    int64_t weights = 0;   // upload_weight / upload_vector
    int64_t buffers = 0;   // allocate(): the runner's KV pool and activations
    int64_t scratch = 0;   // this backend's own scratch (GEMM inputs in half types or quantized, split-K partials, the
                           // cuBLAS workspace, outgrown scratch that graphs still use)
    int64_t other = 0;
};

class CudaBackend final : public Backend {
public:
    // Throws std::runtime_error naming the CUDA call when the device cannot be used.
    explicit CudaBackend(int device = 0);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    std::string name() const override { return "cuda"; }
    // Every weight type: F32, F16, BF16 through cuBLAS, the block-quantized ones through cuda/matmul_quant.cuh.
    bool supports(DType weight_type) const override;
    bool supports_attention(int head_dim, int num_heads, int num_kv_heads) const override;
    int num_threads() const override { return 1; }

    void* allocate(size_t bytes) override;
    void deallocate(void* ptr) override;
    // Host -> device through pinned staging, asynchronous on the stream (the host copy may be reused at
    // once). Device -> host waits for the stream.
    void copy_to_device(void* dst, const void* src, size_t bytes) override;
    void copy_to_host(void* dst, const void* src, size_t bytes) override;
    WeightView upload_weight(const WeightView& w) override;
    const float* upload_vector(const float* data, size_t n) override;
    void device_memory(int64_t& total, int64_t& used) const override;

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

    bool supports_sampling() const override { return true; }
    void sample(const float* logits, int n, int vocab, const SamplingRow* rows, int32_t* out) override;

    // Graphs: stream capture in thread-local mode (a stray synchronizing call on this thread fails the
    // capture instead of running). Scratch cannot grow while capturing (it throws): run the same step
    // op by op first. Scratch that grows while graphs exist is kept until the last graph is destroyed.
    bool supports_graphs() const override { return true; }
    void begin_capture() override;
    int end_capture() override;
    void replay(int graph) override;
    void destroy_graph(int graph) override;
    int num_graphs() const { return static_cast<int>(graphs_.size()); }
    std::string last_capture_error() const override { return capture_error_; }

    // ---- Beyond the Backend interface (benchmarks, tests, the memory chart).
    const cuda::DeviceInfo& device_info() const { return info_; }
    cuda::DeviceMemoryAccount memory_account() const;
    // Bytes a KV pool may take so that the device is at most `utilization` full (vLLM's
    // gpu_memory_utilization), given what is in use now. Never negative.
    int64_t kv_cache_budget(double utilization) const;
    // Waits for every op enqueued so far (timing; errors of asynchronous kernels surface here).
    void synchronize();
    // Tests: force the number of attention context splits (0 = the heuristic).
    void force_attention_splits(int splits) { forced_splits_ = splits; }

private:
    void release() noexcept;  // everything the constructor acquired; from the destructor, or a failing constructor
    void bind() const;
    void check_not_capturing(const char* what) const;  // throws std::logic_error while capturing
    void* device_alloc(size_t bytes, const char* what);
    float* scratch(size_t index, size_t bytes);  // grow-only scratch buffer `index`

    int device_ = 0;
    cuda::DeviceInfo info_;
    CUstream_st* stream_ = nullptr;
    cublasContext* cublas_ = nullptr;
    // Pinned staging for copy_to_device: bytes [0, staged_) are in flight until the next stream sync.
    void* pinned_ = nullptr;
    size_t pinned_bytes_ = 0, staged_ = 0;
    std::unordered_map<void*, size_t> buffers_;  // allocate()d, bytes
    std::vector<void*> weights_;
    int64_t weight_bytes_ = 0, buffer_bytes_ = 0;
    struct Scratch {
        void* ptr = nullptr;
        size_t bytes = 0;
    };
    std::vector<Scratch> scratch_;
    std::vector<Scratch> retired_;  // outgrown scratch that captured graphs may still read
    void* cublas_workspace_ = nullptr;
    size_t cublas_workspace_bytes_ = 0;
    bool capturing_ = false;
    std::string capture_error_;
    std::unordered_map<int, CUgraphExec_st*> graphs_;
    int next_graph_ = 0;
    int forced_splits_ = 0;
};

}  // namespace cuda

// Null with *why_not set when no usable CUDA device is present (no driver, no device, a device this build
// has no kernels for, a failure while creating the context). Defined only in builds with CUDA.
std::unique_ptr<Backend> make_cuda_backend(int device, std::string* why_not);

// The number of devices the driver reports, or 0 with *why_not set ("no CUDA device: ..."). Creates no
// CUDA context.
int cuda_device_count(std::string* why_not);

// "NVIDIA H200 (sm_90, 139.8 GiB)", from the device's properties; creates no CUDA context.
std::string describe_cuda_device(int device);

}  // namespace kvscope
