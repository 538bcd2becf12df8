// GgufFile: a validating reader of GGUF v2/v3 files (llama.cpp's model format). The file is memory-mapped
// and tensor data is used in place; every length, count, offset and shape is checked against the file
// size before use, so a damaged or hostile file throws BadInput naming the file and never reads out of
// bounds or allocates from an unchecked length. Also owns the table of ggml type ids (names, block sizes).
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

enum class GgufType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12
};

// "u32", "string", "array", ... (used in error messages).
std::string_view gguf_type_name(GgufType type);

struct GgufValue {
    GgufType type = GgufType::U32;
    GgufType array_type = GgufType::U32;  // element type when type == ARRAY
    int64_t i = 0;                        // any integer scalar (u64 > INT64_MAX is rejected) and BOOL (0/1)
    double f = 0;                         // F32/F64 scalars, and integer scalars converted
    std::string s;                        // STRING
    std::vector<std::string> strings;     // ARRAY of STRING
    std::vector<double> numbers;          // ARRAY of any numeric or bool element type
    // Nested arrays (ARRAY of ARRAY) are rejected by the reader: no model metadata uses them.
};

// ggml's storage layout of one type id: `block_elems` values are stored in `block_bytes` bytes.
struct GgmlTypeInfo {
    std::string_view name;
    int64_t block_elems = 0;
    int64_t block_bytes = 0;
};
// Null for ids with no known layout (unknown or removed from ggml, such as 4 Q4_2).
const GgmlTypeInfo* ggml_type_info(uint32_t ggml_type);
// "Q6_K", "IQ2_XXS", ..., "type 99" for unknown ids (below 256; "type >255" above). Static storage.
std::string_view ggml_type_name(uint32_t ggml_type);
// The kvscope element type of a ggml type id, when kvscope computes with it (dtype.h's kDTypes), and
// the ggml type id (enum ggml_type) of each kvscope type.
std::optional<DType> dtype_from_ggml_type(uint32_t ggml_type);
uint32_t ggml_type_from_dtype(DType dtype);

struct GgufTensorInfo {
    std::string name;
    std::vector<int64_t> dims;   // ggml order: dims[0] is the contiguous row length; 0..4 entries, each > 0
    uint32_t ggml_type = 0;      // raw ggml type id (0 F32, 1 F16, 8 Q8_0, 12 Q4_K, 14 Q6_K, 30 BF16, ...)
    std::optional<DType> dtype;  // set when kvscope computes with the type
    const uint8_t* data = nullptr;  // into the mapping, valid while the GgufFile lives
    size_t nbytes = 0;              // from dims and type; [data, data + nbytes) lies inside the file
    int64_t num_elements() const;
};

class GgufFile {
public:
    static GgufFile open(const std::string& path);  // throws BadInput

    const std::string& path() const { return file_.path(); }
    uint32_t version() const { return version_; }
    size_t alignment() const { return alignment_; }  // general.alignment, default 32
    size_t data_offset() const { return data_offset_; }  // file offset of the tensor data section

    const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
    const GgufValue* find(std::string_view key) const;

    // The *_or getters return the fallback when the key is absent; all getters throw BadInput
    // "<path>: missing metadata key '<key>'" when a required key is absent, and
    // "<path>: metadata key '<key>' has type X, expected Y" when it has the wrong type.
    // get_int takes integer types; get_i32 those whose value fits 32 bits (every count, size and token id
    // of a model; BadInput naming the key past that); get_float takes float and integer types; get_bool_or
    // takes BOOL.
    std::string get_string(std::string_view key) const;
    std::string get_string_or(std::string_view key, std::string fallback) const;
    int64_t get_int(std::string_view key) const;
    int64_t get_int_or(std::string_view key, int64_t fallback) const;
    int32_t get_i32(std::string_view key) const;
    int32_t get_i32_or(std::string_view key, int32_t fallback) const;
    double get_float(std::string_view key) const;
    double get_float_or(std::string_view key, double fallback) const;
    bool get_bool_or(std::string_view key, bool fallback) const;

    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufTensorInfo* find_tensor(std::string_view name) const;
    const MappedFile& file() const { return file_; }

private:
    GgufFile() = default;
    MappedFile file_;
    uint32_t version_ = 0;
    size_t alignment_ = 32;
    size_t data_offset_ = 0;
    std::map<std::string, GgufValue, std::less<>> metadata_;
    std::vector<GgufTensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace kvscope
