// Greedy sampling on the device: the index of the largest logit per row, the lowest index on ties.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

namespace kvscope::cuda {

//                                           logits [n, vocab]; out [n] (device memory)
void argmax(const float* logits, int n, int vocab, int32_t* out, cudaStream_t stream);

}  // namespace kvscope::cuda
