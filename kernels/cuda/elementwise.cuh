// Elementwise F32 ops on the device: the SiLU gate of the MLP and the residual add.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

namespace kvscope::cuda {

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up.    gate, up, out [n] (out may alias gate or up)
void silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

// x += y.                                                   x, y [n]
void add(float* x, const float* y, int64_t n, cudaStream_t stream);

}  // namespace kvscope::cuda
