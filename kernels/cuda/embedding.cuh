// Row gathers on the device: token embedding (F32/F16/BF16 tables widened to F32, block-quantized ones
// decoded to the CPU's floats bit for bit) and gather_rows.
// Launchers enqueue on the given stream and return at once; every pointer is device memory.
#pragma once

#include "backend.h"

#include <cuda_runtime.h>

namespace kvscope::cuda {

// out[t, :] = table[ids[t], :] as F32.    table [table.rows, table.cols] in table.dtype; ids [n]; out [n, table.cols]
void embedding(const WeightView& table, const int32_t* ids, int n, float* out, cudaStream_t stream);

// out[i, :] = x[rows[i], :].              x [*, dim]; rows [n]; out [n, dim]
void gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out, cudaStream_t stream);

}  // namespace kvscope::cuda
