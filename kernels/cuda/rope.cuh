// Rotary position embedding on the device, in place on q and k: rotate-half (NEOX) or interleaved pairs.
#pragma once

#include "backend.h"

#include <cuda_runtime.h>

namespace kvscope::cuda {

// q [n, num_heads, head_dim]; k [n, num_kv_heads, head_dim]; positions [n]; p.inv_freq [rotary_dim / 2]
// (all device memory). Dimensions past rotary_dim pass through. Throws std::invalid_argument for an odd
// rotary_dim or rotary_dim > head_dim.
void rope(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads, const RopeParams& p,
          cudaStream_t stream);

}  // namespace kvscope::cuda
