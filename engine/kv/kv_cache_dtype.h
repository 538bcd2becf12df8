// The KV cache's element type, vLLM's --kv-cache-dtype. "auto" follows the model's weights, as vLLM's
// auto follows the model dtype: F32 weights keep an F32 cache, F16/BF16 weights a cache of their type,
// and quantized weights (Q8_0 ... IQ4_XS) an F16 cache, as llama.cpp's default. A half cache holds twice the
// tokens in the same bytes and halves what decode attention reads. Every backend holds the three types; one
// that could not would keep F32 under auto, and refuse an explicit half type.
#pragma once

#include "backend.h"

#include <functional>
#include <string>

namespace kvscope {

// auto, float32 (fp32, f32), float16 (fp16, f16, half), bfloat16 (bf16).
bool is_kv_cache_dtype_name(const std::string& name);

// The type the cache holds. Throws BadInput naming the setting when the backend cannot hold it.
DType resolve_kv_cache_dtype(const std::string& name, DType weight_dtype, const Backend& backend);
// The same for a backend known by name and by what it holds (`info`, where a CUDA device may be absent).
DType resolve_kv_cache_dtype(const std::string& name, DType weight_dtype, const std::string& backend_name,
                             const std::function<bool(DType)>& supports);

// float32, float16 or bfloat16: the name that exports and `info` print.
std::string kv_cache_dtype_name(DType t);

}  // namespace kvscope
