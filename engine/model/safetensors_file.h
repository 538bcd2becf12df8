// SafetensorsModel: the validating reader of Hugging Face safetensors weights: one file, a directory with
// model.safetensors, a sharded directory (model.safetensors.index.json + shards), or every *.safetensors
// in a directory. Files are memory-mapped and tensors used in place; every header field is checked
// against the file before use, so damaged files throw BadInput naming the file and the problem.
#pragma once

#include "dtype.h"
#include "util/mapped_file.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

struct SafetensorsTensor {
    std::string name;
    std::string dtype_name;      // as in the header: "F32", "BF16", "I64", ...
    std::optional<DType> dtype;  // set for F32, F16, BF16
    std::vector<int64_t> shape;  // row-major, as in the file (shape.back() is the contiguous length)
    const uint8_t* data = nullptr;  // into the mapping, valid while the SafetensorsModel lives
    size_t nbytes = 0;
    std::string file;  // path of the file holding it
};

// Bytes per element of a safetensors dtype name; 0 when unknown (or sub-byte, such as F4).
size_t safetensors_dtype_size(std::string_view dtype_name);

class SafetensorsModel {
public:
    // A directory with model.safetensors, or model.safetensors.index.json + shards (weight_map), or
    // (fallback) every *.safetensors in it, in name order. Also accepts a single .safetensors file path.
    static SafetensorsModel open(const std::string& path);  // throws BadInput

    const SafetensorsTensor* find(std::string_view name) const;
    // Ordered by file, then by data offset within the file.
    const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
    // "__metadata__" of the first file (number and bool values are kept as their JSON text).
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

private:
    SafetensorsModel() = default;
    void add_file(const std::string& path, bool keep_metadata);
    std::vector<MappedFile> files_;
    std::vector<SafetensorsTensor> tensors_;
    std::map<std::string, size_t, std::less<>> index_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace kvscope
