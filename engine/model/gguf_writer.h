// GgufWriter: builds a GGUF v3 file in memory (metadata key/values in insertion order, tensor infos,
// data at alignment 32 with zero padding, as the GGUF spec lays it out) and writes it. Tests generate
// seeded random models in the real format with it; a future converter can reuse it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

class GgufWriter {
public:
    // Setting a key again replaces its value (the key keeps its first position).
    void set_string(const std::string& key, const std::string& value);
    void set_u32(const std::string& key, uint32_t value);
    void set_i32(const std::string& key, int32_t value);
    void set_f32(const std::string& key, float value);
    void set_bool(const std::string& key, bool value);
    void set_u64(const std::string& key, uint64_t value);
    void set_string_array(const std::string& key, const std::vector<std::string>& values);
    void set_f32_array(const std::string& key, const std::vector<float>& values);
    void set_i32_array(const std::string& key, const std::vector<int32_t>& values);

    // dims in ggml order (dims[0] is the row length). Throws std::invalid_argument when the type id has no
    // known layout or data.size() does not match dims and type: a writer bug, not bad user input.
    void add_tensor(std::string name, std::vector<int64_t> dims, uint32_t ggml_type, std::vector<uint8_t> data);

    // The whole file as bytes (tests mutate it), and the same bytes written to path (throws BadInput
    // naming the path when it cannot be written).
    std::vector<uint8_t> to_bytes() const;
    void write(const std::string& path) const;

    static constexpr size_t kAlignment = 32;

private:
    struct Tensor {
        std::string name;
        std::vector<int64_t> dims;
        uint32_t ggml_type;
        std::vector<uint8_t> data;
    };
    void set_raw(const std::string& key, std::vector<uint8_t> encoded);
    std::vector<std::pair<std::string, std::vector<uint8_t>>> kvs_;  // key, encoded type + value
    std::vector<Tensor> tensors_;
};

}  // namespace kvscope
