// RMSNorm on the device: out = x / sqrt(mean(x^2) + eps) * weight, per row, F32 throughout.
#pragma once

#include <cuda_runtime.h>

namespace kvscope::cuda {

//                                          x, out [n, dim]; weight [dim] (device memory; out may alias x)
void rms_norm(const float* x, const float* weight, int n, int dim, float eps, float* out, cudaStream_t stream);

}  // namespace kvscope::cuda
