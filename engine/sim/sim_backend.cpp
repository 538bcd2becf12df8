#include "sim/sim_backend.h"

#include <stdexcept>

namespace kvscope {

SimBackend::SimBackend(GpuSpec gpu, int tensor_parallel_size) : gpu_(std::move(gpu)), tp_(tensor_parallel_size) {}

void SimBackend::device_memory(int64_t& total, int64_t& used) const {
    total = gpu_.memory_bytes * tp_;
    used = weights_ + activations_ + kv_pool_;
}

void SimBackend::set_memory_in_use(int64_t weights, int64_t activations, int64_t kv_pool) {
    weights_ = weights;
    activations_ = activations;
    kv_pool_ = kv_pool;
}

void SimBackend::no_compute(const char* op) const {
    throw std::logic_error(name() + " backend: " + op + " called, but a simulated backend computes nothing");
}

void* SimBackend::allocate(size_t) { no_compute("allocate"); }
void SimBackend::deallocate(void*) { no_compute("deallocate"); }
void SimBackend::copy_to_device(void*, const void*, size_t) { no_compute("copy_to_device"); }
void SimBackend::copy_to_host(void*, const void*, size_t) { no_compute("copy_to_host"); }
void SimBackend::embedding(const WeightView&, const int32_t*, int, float*) { no_compute("embedding"); }
void SimBackend::rms_norm(const float*, const float*, int, int, float, float*) { no_compute("rms_norm"); }
void SimBackend::matmul(const float*, int, const WeightView&, const float*, float*) { no_compute("matmul"); }
void SimBackend::rope(float*, float*, const int32_t*, int, int, int, const RopeParams&) { no_compute("rope"); }
void SimBackend::write_kv(const float*, const float*, const int64_t*, int, const KvCacheLayout&, void*, int) {
    no_compute("write_kv");
}
void SimBackend::paged_attention(const float*, const AttentionMetadata&, const KvCacheLayout&, const void*, int, int,
                                 const AttentionParams&, float*) {
    no_compute("paged_attention");
}
void SimBackend::silu_mul(const float*, const float*, int64_t, float*) { no_compute("silu_mul"); }
void SimBackend::gelu_tanh_mul(const float*, const float*, int64_t, float*) { no_compute("gelu_tanh_mul"); }
void SimBackend::scale(float*, int64_t, float) { no_compute("scale"); }
void SimBackend::softcap(float*, int64_t, float) { no_compute("softcap"); }
void SimBackend::add(float*, const float*, int64_t) { no_compute("add"); }
void SimBackend::argmax(const float*, int, int, int32_t*) { no_compute("argmax"); }
void SimBackend::gather_rows(const float*, const int32_t*, int, int, float*) { no_compute("gather_rows"); }

}  // namespace kvscope
