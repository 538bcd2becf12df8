#include "kv/kv_cache_dtype.h"

#include "util/errors.h"

#include <optional>

namespace kvscope {

namespace {
// The explicit types; nullopt for auto and for names that are not types.
std::optional<DType> explicit_dtype(const std::string& name) {
    if (name == "float32" || name == "fp32" || name == "f32") return DType::F32;
    if (name == "float16" || name == "fp16" || name == "f16" || name == "half") return DType::F16;
    if (name == "bfloat16" || name == "bf16") return DType::BF16;
    return std::nullopt;
}
}  // namespace

bool is_kv_cache_dtype_name(const std::string& name) { return name == "auto" || explicit_dtype(name).has_value(); }

DType resolve_kv_cache_dtype(const std::string& name, DType weight_dtype, const Backend& backend) {
    return resolve_kv_cache_dtype(name, weight_dtype, backend.name(),
                                  [&](DType t) { return backend.supports_kv_dtype(t); });
}

DType resolve_kv_cache_dtype(const std::string& name, DType weight_dtype, const std::string& backend_name,
                             const std::function<bool(DType)>& supports) {
    if (const auto t = explicit_dtype(name)) {
        if (!supports(*t))
            throw BadInput("kv_cache_dtype " + name + ": the " + backend_name + " backend cannot keep its KV cache in " +
                           kv_cache_dtype_name(*t) + " (use auto or float32)");
        return *t;
    }
    if (name != "auto")
        throw BadInput("invalid engine setting: kv_cache_dtype must be auto, float32, float16 or bfloat16, got '" + name +
                       "'");
    const DType want = weight_dtype == DType::F32 || weight_dtype == DType::BF16 ? weight_dtype : DType::F16;
    return supports(want) ? want : DType::F32;
}

std::string kv_cache_dtype_name(DType t) {
    switch (t) {
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    default: return "float32";
    }
}

}  // namespace kvscope
