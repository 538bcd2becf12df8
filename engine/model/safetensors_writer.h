// write_safetensors: writes one safetensors file (u64 header length, JSON header padded with spaces to a
// multiple of 8 as the reference implementation does, then the tensors back to back in the given
// order). Tests generate HF-format models with it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace kvscope {

// Each tensor: name, dtype name ("F32" | "F16" | "BF16", or any dtype the reader knows), row-major shape,
// raw little-endian bytes. Throws std::invalid_argument when a data size does not match shape x dtype, and
// BadInput naming the path when the file cannot be written.
void write_safetensors(
    const std::string& path,
    const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>, std::vector<uint8_t>>>& tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace kvscope
