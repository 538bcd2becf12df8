// Row gathers: one thread block per output row, threads striding over the columns (coalesced). A
// block-quantized table is decoded element by element (cuda/dequantize.cuh), exactly as the CPU decodes it.
#include "cuda/embedding.cuh"

#include "cuda/cuda_common.cuh"
#include "cuda/dequantize.cuh"

namespace kvscope::cuda {

namespace {
constexpr int kThreads = 256;
}

// grid (n), block kThreads.                 table [rows, cols]; ids [n]; out [n, cols]
template <typename T>
static __global__ void embedding_kernel(const T* __restrict__ table, int64_t cols, const int32_t* __restrict__ ids,
                                        float* __restrict__ out) {
    const int64_t t = blockIdx.x;
    const T* row = table + static_cast<int64_t>(ids[t]) * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[t * cols + c] = to_float(row[c]);
}

// grid (n), block kThreads.                 table [rows, row_bytes] of Q::Block; ids [n]; out [n, cols]
template <class Q>
static __global__ void embedding_quant_kernel(const uint8_t* __restrict__ table, int64_t row_bytes, int64_t cols,
                                              const int32_t* __restrict__ ids, float* __restrict__ out) {
    const int64_t t = blockIdx.x;
    const auto* row = reinterpret_cast<const typename Q::Block*>(table + static_cast<int64_t>(ids[t]) * row_bytes);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        out[t * cols + c] = Q::value(row[c / Q::kElems], static_cast<int>(c % Q::kElems));
}

// grid (n), block kThreads.                 x [*, dim]; rows [n]; out [n, dim]
static __global__ void gather_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows, int dim,
                                          float* __restrict__ out) {
    const int64_t i = blockIdx.x;
    const float* src = x + static_cast<int64_t>(rows[i]) * dim;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) out[i * dim + c] = src[c];
}

template <typename T>
static void launch_embedding(const void* table, int64_t cols, const int32_t* ids, int n, float* out,
                             cudaStream_t stream) {
    embedding_kernel<T><<<n, kThreads, 0, stream>>>(static_cast<const T*>(table), cols, ids, out);
    CUDA_CHECK_LAUNCH("embedding_kernel");
}

void embedding(const WeightView& table, const int32_t* ids, int n, float* out, cudaStream_t stream) {
    if (n <= 0) return;
    switch (table.dtype) {
    case DType::F32: return launch_embedding<float>(table.data, table.cols, ids, n, out, stream);
    case DType::F16: return launch_embedding<__half>(table.data, table.cols, ids, n, out, stream);
    case DType::BF16: return launch_embedding<__nv_bfloat16>(table.data, table.cols, ids, n, out, stream);
    default:
        visit_quant_type(table.dtype, "cuda embedding", [&](auto q) {
            using Q = decltype(q);
            embedding_quant_kernel<Q><<<n, kThreads, 0, stream>>>(static_cast<const uint8_t*>(table.data),
                                                                  dtype_row_bytes(table.dtype, table.cols),
                                                                  table.cols, ids, out);
            CUDA_CHECK_LAUNCH("embedding_quant_kernel");
        });
    }
}

void gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out, cudaStream_t stream) {
    if (n <= 0 || dim <= 0) return;
    gather_rows_kernel<<<n, kThreads, 0, stream>>>(x, rows, dim, out);
    CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

}  // namespace kvscope::cuda
