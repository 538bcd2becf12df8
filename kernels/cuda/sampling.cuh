// Sampling on the device (Backend::sample): one token per logits row under a SamplingRow's temperature,
// top-k, min-p and top-p, drawn from a counter-based generator keyed by the row's (seed, offset).
#pragma once

#include "backend.h"

#include <cstdint>
#include <cuda_runtime.h>

namespace kvscope::cuda {

//                          logits [n, vocab] F32; rows [n]; out [n] token ids (device memory)
void sample(const float* logits, int n, int vocab, const SamplingRow* rows, int32_t* out, cudaStream_t stream);

}  // namespace kvscope::cuda
