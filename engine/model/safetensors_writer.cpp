#include "model/safetensors_writer.h"

#include "model/safetensors_file.h"
#include "util/errors.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

namespace kvscope {

void write_safetensors(
    const std::string& path,
    const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>, std::vector<uint8_t>>>& tensors,
    const std::map<std::string, std::string>& metadata) {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& [name, dtype, shape, data] : tensors) {
        const size_t elem_size = safetensors_dtype_size(dtype);
        int64_t elems = 1;
        for (int64_t d : shape) elems *= d;
        if (elem_size == 0 || elems < 0 || data.size() != static_cast<size_t>(elems) * elem_size)
            throw std::invalid_argument("write_safetensors: tensor '" + name + "' has " + std::to_string(data.size()) +
                                        " bytes, which does not match its shape and dtype " + dtype);
        header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {offset, offset + data.size()}}};
        offset += data.size();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned

    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    const uint64_t len = text.size();
    f.write(reinterpret_cast<const char*>(&len), 8);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors) {
        const std::vector<uint8_t>& data = std::get<3>(t);
        f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    }
    f.close();
    if (!f) throw BadInput(path + ": cannot write");
}

}  // namespace kvscope
