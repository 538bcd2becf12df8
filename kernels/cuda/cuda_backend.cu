// CudaBackend: binds the Backend interface to the kernels of kernels/cuda on one stream, owns the device
// memory it hands out, and captures and replays CUDA graphs. Host code only (compiled by nvcc for the
// CUDA types).
#include "cuda/cuda_backend.h"

#include "cuda/argmax.cuh"
#include "cuda/cuda_common.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/embedding.cuh"
#include "cuda/kv_cache.cuh"
#include "cuda/matmul.cuh"
#include "cuda/paged_attention.cuh"
#include "cuda/rms_norm.cuh"
#include "cuda/rope.cuh"
#include "cuda/sampling.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace kvscope {

namespace cuda {

namespace {
constexpr size_t kPinnedInitial = 4u << 20;   // step inputs are small: tokens, slots, block tables
constexpr size_t kPinnedMax = 64u << 20;      // larger copies go straight from pageable memory
constexpr size_t kScratchMatmul = 0, kScratchAttention = 1, kNumScratch = 2;
// cuBLAS's recommended workspace (cublasSetWorkspace): 32 MiB on Hopper and later, 4 MiB before. Our own,
// so captured GEMMs read memory that outlives them and eager and captured GEMMs see the same workspace.
size_t cublas_workspace_bytes(int cc_major) { return cc_major >= 9 ? 32u << 20 : 4u << 20; }

// A no-op kernel: its attributes tell whether this build has an image the device can run.
__global__ void probe_kernel() {}
}  // namespace

CudaBackend::CudaBackend(int device) : device_(device) {
    // A constructor that throws runs no destructor: release what was acquired before the failing step
    // (stream, cuBLAS handle, workspace, pinned memory), or every failed start-up leaks them.
    try {
        CUDA_CHECK(cudaSetDevice(device_));
        cudaDeviceProp prop{};
        CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
        info_.device = device_;
        info_.name = prop.name;
        info_.cc_major = prop.major;
        info_.cc_minor = prop.minor;
        info_.num_sms = prop.multiProcessorCount;
        info_.total_memory = static_cast<int64_t>(prop.totalGlobalMem);
        int mem_clock_khz = 0, bus_bits = 0;
        CUDA_CHECK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device_));
        CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device_));
        info_.peak_bandwidth = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8.0);
        cudaFuncAttributes attr{};
        CUDA_CHECK(cudaFuncGetAttributes(&attr, probe_kernel));  // fails without a matching kernel image
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        cublasHandle_t handle = nullptr;
        CUBLAS_CHECK(cublasCreate(&handle));
        cublas_ = handle;
        CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
        cublas_workspace_bytes_ = cublas_workspace_bytes(info_.cc_major);
        cublas_workspace_ = device_alloc(cublas_workspace_bytes_, "the cuBLAS workspace");
        CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, cublas_workspace_bytes_));  // after SetStream, which resets it
        // Full F32 GEMMs: no TF32 down-conversion (CUBLAS_COMPUTE_32F in matmul asks for it too).
        CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
        CUDA_CHECK(cudaMallocHost(&pinned_, kPinnedInitial));
        pinned_bytes_ = kPinnedInitial;
        scratch_.resize(kNumScratch);
    } catch (...) {
        release();
        throw;
    }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
    // No throwing here: errors while tearing down are ignored.
    cudaSetDevice(device_);
    if (capturing_) {  // an exception left a capture open
        cudaGraph_t graph = nullptr;
        cudaStreamEndCapture(stream_, &graph);
        if (graph) cudaGraphDestroy(graph);
    }
    if (stream_) cudaStreamSynchronize(stream_);
    for (auto& [id, exec] : graphs_) cudaGraphExecDestroy(exec);
    for (auto& s : scratch_)
        if (s.ptr) cudaFree(s.ptr);
    for (auto& s : retired_) cudaFree(s.ptr);
    if (cublas_workspace_) cudaFree(cublas_workspace_);
    for (void* p : weights_) cudaFree(p);
    for (auto& [p, bytes] : buffers_) cudaFree(p);
    if (pinned_) cudaFreeHost(pinned_);
    if (cublas_) cublasDestroy(cublas_);
    if (stream_) cudaStreamDestroy(stream_);
}

void CudaBackend::bind() const {
    // Only when another device is current: the common case then costs no driver call.
    int current = -1;
    CUDA_CHECK(cudaGetDevice(&current));
    if (current != device_) CUDA_CHECK(cudaSetDevice(device_));
}

void CudaBackend::check_not_capturing(const char* what) const {
    if (capturing_)
        throw std::logic_error(std::string("CudaBackend: ") + what +
                               " during a graph capture (it would synchronize or allocate); do it before begin_capture()");
}

bool CudaBackend::supports(DType) const { return true; }  // every type of kDTypes

bool CudaBackend::supports_attention(int head_dim, int num_heads, int num_kv_heads) const {
    return paged_attention_supports(head_dim, num_heads, num_kv_heads);
}

void* CudaBackend::device_alloc(size_t bytes, const char* what) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 16));
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();  // clear the sticky-free allocation error
        cudaMemGetInfo(&free_b, &total_b);
        throw std::runtime_error("CUDA error: cudaMalloc of " + std::to_string(bytes) + " bytes for " + what +
                                 " failed: " + cudaGetErrorString(err) + " (" + std::to_string(free_b >> 20) +
                                 " MiB free of " + std::to_string(total_b >> 20) + " MiB)");
    }
    return p;
}

void* CudaBackend::allocate(size_t bytes) {
    check_not_capturing("allocate");
    bind();
    void* p = device_alloc(bytes, "a buffer");
    buffers_[p] = bytes;
    buffer_bytes_ += static_cast<int64_t>(bytes);
    return p;
}

void CudaBackend::deallocate(void* ptr) {
    if (!ptr) return;
    check_not_capturing("deallocate");
    bind();
    auto it = buffers_.find(ptr);
    if (it == buffers_.end()) throw std::invalid_argument("CudaBackend::deallocate: pointer not from allocate()");
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // no op in flight may still use it
    CUDA_CHECK(cudaFree(ptr));
    buffer_bytes_ -= static_cast<int64_t>(it->second);
    buffers_.erase(it);
}

void CudaBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    check_not_capturing("copy_to_device");
    bind();
    if (bytes > kPinnedMax) {  // pageable, then wait: the caller may reuse src when we return
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
        staged_ = 0;
        return;
    }
    const size_t need = (bytes + 255) / 256 * 256;
    if (staged_ + need > pinned_bytes_) {
        // Every staged copy must land before its bytes are reused.
        CUDA_CHECK(cudaStreamSynchronize(stream_));
        staged_ = 0;
        if (need > pinned_bytes_) {
            const size_t grown = std::min(kPinnedMax, std::max(need, 2 * pinned_bytes_));
            CUDA_CHECK(cudaFreeHost(pinned_));
            pinned_ = nullptr;
            pinned_bytes_ = 0;
            CUDA_CHECK(cudaMallocHost(&pinned_, grown));
            pinned_bytes_ = grown;
        }
    }
    char* stage = static_cast<char*>(pinned_) + staged_;
    std::memcpy(stage, src, bytes);
    CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, stream_));
    staged_ += need;
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
    check_not_capturing("copy_to_host");
    bind();
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    staged_ = 0;
}

WeightView CudaBackend::upload_weight(const WeightView& w) {
    if (w.cols % dtype_block_elems(w.dtype) != 0)
        throw std::invalid_argument("CudaBackend::upload_weight: " + std::string(dtype_name(w.dtype)) + " rows of " +
                                    std::to_string(w.cols) + " values are not whole blocks of " +
                                    std::to_string(dtype_block_elems(w.dtype)));
    bind();
    const size_t bytes = static_cast<size_t>(dtype_row_bytes(w.dtype, w.cols)) * static_cast<size_t>(w.rows);
    void* p = device_alloc(bytes, "a weight");
    weights_.push_back(p);
    weight_bytes_ += static_cast<int64_t>(bytes);
    if (bytes) {
        CUDA_CHECK(cudaMemcpyAsync(p, w.data, bytes, cudaMemcpyHostToDevice, stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    WeightView out = w;
    out.data = p;
    return out;
}

const float* CudaBackend::upload_vector(const float* data, size_t n) {
    bind();
    const size_t bytes = n * sizeof(float);
    void* p = device_alloc(bytes, "a weight vector");
    weights_.push_back(p);
    weight_bytes_ += static_cast<int64_t>(bytes);
    if (bytes) {
        CUDA_CHECK(cudaMemcpyAsync(p, data, bytes, cudaMemcpyHostToDevice, stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    return static_cast<const float*>(p);
}

void CudaBackend::device_memory(int64_t& total, int64_t& used) const {
    bind();
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    total = static_cast<int64_t>(total_b);
    used = static_cast<int64_t>(total_b - free_b);
}

DeviceMemoryAccount CudaBackend::memory_account() const {
    DeviceMemoryAccount a;
    device_memory(a.total, a.used);
    a.weights = weight_bytes_;
    a.buffers = buffer_bytes_;
    for (const auto& s : scratch_) a.scratch += static_cast<int64_t>(s.bytes);
    for (const auto& s : retired_) a.scratch += static_cast<int64_t>(s.bytes);
    a.scratch += static_cast<int64_t>(cublas_workspace_bytes_);
    a.other = std::max<int64_t>(0, a.used - a.weights - a.buffers - a.scratch);
    return a;
}

int64_t CudaBackend::kv_cache_budget(double utilization) const {
    int64_t total = 0, used = 0;
    device_memory(total, used);
    return std::max<int64_t>(0, static_cast<int64_t>(utilization * static_cast<double>(total)) - used);
}

void CudaBackend::synchronize() {
    check_not_capturing("synchronize");
    bind();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    staged_ = 0;
}

float* CudaBackend::scratch(size_t index, size_t bytes) {
    Scratch& s = scratch_[index];
    if (bytes > s.bytes) {
        check_not_capturing("growing scratch");
        CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old buffer may be in use by queued ops
        const size_t grown = std::max(bytes, s.bytes + s.bytes / 2);
        if (s.ptr && graphs_.empty()) CUDA_CHECK(cudaFree(s.ptr));
        else if (s.ptr) retired_.push_back(s);  // a graph's kernels have its address baked in
        s.ptr = nullptr;
        s.bytes = 0;
        s.ptr = device_alloc(grown, "scratch");
        s.bytes = grown;
    }
    return static_cast<float*>(s.ptr);
}

void CudaBackend::embedding(const WeightView& table, const int32_t* ids, int n, float* out) {
    bind();
    cuda::embedding(table, ids, n, out, stream_);
}

void CudaBackend::rms_norm(const float* x, const float* weight, int n, int dim, float eps, float* out) {
    bind();
    cuda::rms_norm(x, weight, n, dim, eps, out, stream_);
}

void CudaBackend::matmul(const float* x, int n, const WeightView& w, const float* bias, float* out) {
    bind();
    const size_t need = matmul_scratch_bytes(n, w);
    void* s = need ? scratch(kScratchMatmul, need) : nullptr;
    cuda::matmul(cublas_, x, n, w, bias, out, s, stream_);
}

void CudaBackend::rope(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads,
                       const RopeParams& p) {
    bind();
    cuda::rope(q, k, positions, n, num_heads, num_kv_heads, p, stream_);
}

void CudaBackend::write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n,
                           const KvCacheLayout& layout, void* kv_cache, int layer) {
    bind();
    cuda::write_kv(k, v, slot_mapping, n, layout, kv_cache, layer, stream_);
}

void CudaBackend::paged_attention(const float* q, const AttentionMetadata& meta, const KvCacheLayout& layout,
                                  const void* kv_cache, int layer, int num_heads, const AttentionParams& params,
                                  float* out) {
    bind();
    const AttentionPlan plan = plan_paged_attention(meta, layout, num_heads, info_.num_sms, forced_splits_);
    float* s = plan.scratch_floats ? scratch(kScratchAttention, plan.scratch_floats * sizeof(float)) : nullptr;
    cuda::paged_attention(plan, q, meta, layout, kv_cache, layer, num_heads, params, out, s,
                          stream_);
}

void CudaBackend::silu_mul(const float* gate, const float* up, int64_t n, float* out) {
    bind();
    cuda::silu_mul(gate, up, n, out, stream_);
}

void CudaBackend::gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
    bind();
    cuda::gelu_tanh_mul(gate, up, n, out, stream_);
}

void CudaBackend::scale(float* x, int64_t n, float s) {
    bind();
    cuda::scale(x, n, s, stream_);
}

void CudaBackend::softcap(float* x, int64_t n, float cap) {
    bind();
    cuda::softcap(x, n, cap, stream_);
}

void CudaBackend::add(float* x, const float* y, int64_t n) {
    bind();
    cuda::add(x, y, n, stream_);
}

void CudaBackend::argmax(const float* logits, int n, int vocab, int32_t* out) {
    bind();
    cuda::argmax(logits, n, vocab, out, stream_);
}

void CudaBackend::gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out) {
    bind();
    cuda::gather_rows(x, rows, n, dim, out, stream_);
}

void CudaBackend::sample(const float* logits, int n, int vocab, const SamplingRow* rows, int32_t* out) {
    bind();
    cuda::sample(logits, n, vocab, rows, out, stream_);
}

void CudaBackend::begin_capture() {
    if (capturing_) throw std::logic_error("CudaBackend::begin_capture: a capture is already open");
    bind();
    CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
}

int CudaBackend::end_capture() {
    if (!capturing_) throw std::logic_error("CudaBackend::end_capture: no capture is open");
    bind();
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamEndCapture(stream_, &graph);
    const char* step = "cudaStreamEndCapture";
    cudaGraphExec_t exec = nullptr;
    if (err == cudaSuccess && graph) {
        err = cudaGraphInstantiate(&exec, graph, 0);
        step = "cudaGraphInstantiate";
    }
    if (graph) cudaGraphDestroy(graph);  // the executable graph is independent of it
    if (err != cudaSuccess || !exec) {
        capture_error_ = std::string(step) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
        cudaGetLastError();  // a failed capture's error is not sticky: clear it so later ops run
        return -1;
    }
    capture_error_.clear();
    const int id = next_graph_++;
    graphs_.emplace(id, exec);
    return id;
}

void CudaBackend::replay(int graph) {
    const auto it = graphs_.find(graph);
    if (it == graphs_.end()) throw std::invalid_argument("CudaBackend::replay: no graph " + std::to_string(graph));
    bind();
    CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
}

void CudaBackend::destroy_graph(int graph) {
    const auto it = graphs_.find(graph);
    if (it == graphs_.end()) return;
    check_not_capturing("destroy_graph");
    bind();
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // no replay in flight still reads what goes below
    CUDA_CHECK(cudaGraphExecDestroy(it->second));
    graphs_.erase(it);
    if (graphs_.empty()) {
        for (const Scratch& s : retired_) CUDA_CHECK(cudaFree(s.ptr));
        retired_.clear();
    }
}

}  // namespace cuda

int cuda_device_count(std::string* why_not) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError();
        if (why_not)
            *why_not = std::string("no CUDA device: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
        return 0;
    }
    if (count == 0 && why_not) *why_not = "no CUDA device: the driver reports 0 devices";
    return count;
}

std::string describe_cuda_device(int device) {
    cudaDeviceProp prop{};
    const cudaError_t err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return "device " + std::to_string(device) + " (" + cudaGetErrorName(err) + ")";
    }
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", prop.totalGlobalMem / 1073741824.0);
    return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " + memory + ")";
}

std::unique_ptr<Backend> make_cuda_backend(int device, std::string* why_not) {
    auto fail = [&](const std::string& reason) -> std::unique_ptr<Backend> {
        if (why_not) *why_not = reason;
        return nullptr;
    };
    std::string none;
    const int count = cuda_device_count(&none);
    if (count == 0) return fail(none);
    if (device < 0 || device >= count)
        return fail("no CUDA device " + std::to_string(device) + ": " + std::to_string(count) + " present");
    try {
        return std::make_unique<cuda::CudaBackend>(device);
    } catch (const std::exception& e) {
        return fail("no CUDA device usable: device " + std::to_string(device) + ": " + e.what());
    }
}

}  // namespace kvscope
