// write_kv: one thread per element of K (and the same element of V) of each token; consecutive threads
// write consecutive head_dim elements of one slot, so stores are coalesced per (token, kv head).
#include "cuda/kv_cache.cuh"

#include "cuda/cuda_common.cuh"

namespace kvscope::cuda {

namespace {
constexpr int kThreads = 256;
}

// grid-stride over n * row (row = num_kv_heads * head_dim).
//   k, v [n, row] F32; slot_mapping [n]; k_cache = cache + offset(layer, K, 0, 0, 0) in T (float, __half or
//   __nv_bfloat16, rounded to nearest even); V lies kv_stride elements further.
template <class T>
static __global__ void write_kv_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                       const int64_t* __restrict__ slot_mapping, int n, int head_dim, int row,
                                       int block_size, int64_t block_stride, int64_t head_stride, int64_t kv_stride,
                                       T* __restrict__ k_cache) {
    const int64_t total = static_cast<int64_t>(n) * row;
    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t t = idx / row;
        const int64_t slot = slot_mapping[t];
        if (slot < 0) continue;  // a padding token owns no slot
        const int rem = static_cast<int>(idx - t * row);
        const int head = rem / head_dim, d = rem % head_dim;
        const int64_t block = slot / block_size, off = slot % block_size;
        const int64_t dst = block * block_stride + head * head_stride + off * head_dim + d;
        store_rounded(k_cache + dst, k[idx]);
        store_rounded(k_cache + dst + kv_stride, v[idx]);
    }
}

template <class T>
static void launch_write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n,
                            const KvCacheLayout& layout, T* kv_cache, int layer, cudaStream_t stream) {
    const int row = layout.num_kv_heads * layout.head_dim;
    const int64_t total = static_cast<int64_t>(n) * row;
    write_kv_kernel<T><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        k, v, slot_mapping, n, layout.head_dim, row, layout.block_size, static_cast<int64_t>(layout.block_stride()),
        static_cast<int64_t>(layout.head_stride()), static_cast<int64_t>(layout.kv_stride()),
        kv_cache + layout.offset(layer, 0, 0, 0, 0));
    CUDA_CHECK_LAUNCH("write_kv_kernel");
}

void write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n, const KvCacheLayout& layout,
              void* kv_cache, int layer, cudaStream_t stream) {
    if (layer < 0 || layer >= layout.num_layers)
        throw std::invalid_argument("cuda write_kv: layer " + std::to_string(layer) + " out of range [0, " +
                                    std::to_string(layout.num_layers) + ")");
    if (n <= 0) return;
    switch (layout.kv_dtype) {
    case DType::F32: return launch_write_kv(k, v, slot_mapping, n, layout, static_cast<float*>(kv_cache), layer, stream);
    case DType::F16: return launch_write_kv(k, v, slot_mapping, n, layout, static_cast<__half*>(kv_cache), layer, stream);
    case DType::BF16:
        return launch_write_kv(k, v, slot_mapping, n, layout, static_cast<__nv_bfloat16*>(kv_cache), layer, stream);
    default:
        throw std::invalid_argument("cuda write_kv: KV cache type " + std::string(dtype_name(layout.kv_dtype)) +
                                    " is not supported (F32, F16, BF16)");
    }
}

}  // namespace kvscope::cuda
