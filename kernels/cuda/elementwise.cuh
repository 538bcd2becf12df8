// Elementwise F32 ops on the device: the SiLU and GELU-tanh gates of the MLP, the residual add, and the
// scale and soft-cap of Gemma's embeddings and logits.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

namespace kvscope::cuda {

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up.    gate, up, out [n] (out may alias gate or up)
void silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

// out = gelu_tanh(gate) * up = gate / (1 + exp(-2u)) * up, u = sqrt(2 / pi) * (gate + 0.044715 gate^3).
//                                                          gate, up, out [n] (out may alias gate or up)
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

// x *= s.                                                   x [n]
void scale(float* x, int64_t n, float s, cudaStream_t stream);

// x = cap * tanh(x / cap).                                  x [n]
void softcap(float* x, int64_t n, float cap, cudaStream_t stream);

// x += y.                                                   x, y [n]
void add(float* x, const float* y, int64_t n, cudaStream_t stream);

}  // namespace kvscope::cuda
