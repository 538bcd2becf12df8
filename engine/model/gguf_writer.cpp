#include "model/gguf_writer.h"

#include "model/gguf_file.h"
#include "util/errors.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace kvscope {

namespace {

template <class T>
void put(std::vector<uint8_t>& out, T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

void put_type(std::vector<uint8_t>& out, GgufType t) { put<uint32_t>(out, static_cast<uint32_t>(t)); }

template <class T>
std::vector<uint8_t> encode_scalar(GgufType t, T v) {
    std::vector<uint8_t> out;
    put_type(out, t);
    put<T>(out, v);
    return out;
}

template <class T>
std::vector<uint8_t> encode_array(GgufType elem, const std::vector<T>& values) {
    std::vector<uint8_t> out;
    put_type(out, GgufType::ARRAY);
    put_type(out, elem);
    put<uint64_t>(out, values.size());
    for (const T& v : values) put<T>(out, v);
    return out;
}

size_t padding(size_t pos) { return (GgufWriter::kAlignment - pos % GgufWriter::kAlignment) % GgufWriter::kAlignment; }

}  // namespace

void GgufWriter::set_raw(const std::string& key, std::vector<uint8_t> encoded) {
    for (auto& [k, v] : kvs_) {
        if (k == key) {
            v = std::move(encoded);
            return;
        }
    }
    kvs_.emplace_back(key, std::move(encoded));
}

void GgufWriter::set_string(const std::string& key, const std::string& value) {
    std::vector<uint8_t> out;
    put_type(out, GgufType::STRING);
    put_string(out, value);
    set_raw(key, std::move(out));
}
void GgufWriter::set_u32(const std::string& key, uint32_t value) { set_raw(key, encode_scalar(GgufType::U32, value)); }
void GgufWriter::set_i32(const std::string& key, int32_t value) { set_raw(key, encode_scalar(GgufType::I32, value)); }
void GgufWriter::set_f32(const std::string& key, float value) { set_raw(key, encode_scalar(GgufType::F32, value)); }
void GgufWriter::set_bool(const std::string& key, bool value) {
    set_raw(key, encode_scalar<uint8_t>(GgufType::BOOL, value ? 1 : 0));
}
void GgufWriter::set_u64(const std::string& key, uint64_t value) { set_raw(key, encode_scalar(GgufType::U64, value)); }

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& values) {
    std::vector<uint8_t> out;
    put_type(out, GgufType::ARRAY);
    put_type(out, GgufType::STRING);
    put<uint64_t>(out, values.size());
    for (const std::string& s : values) put_string(out, s);
    set_raw(key, std::move(out));
}
void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& values) {
    set_raw(key, encode_array(GgufType::F32, values));
}
void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& values) {
    set_raw(key, encode_array(GgufType::I32, values));
}

void GgufWriter::add_tensor(std::string name, std::vector<int64_t> dims, uint32_t ggml_type, std::vector<uint8_t> data) {
    const GgmlTypeInfo* info = ggml_type_info(ggml_type);
    if (!info) throw std::invalid_argument("GgufWriter: tensor '" + name + "' has unknown ggml type " + std::to_string(ggml_type));
    int64_t elems = 1;
    for (int64_t d : dims) elems *= d;
    const int64_t row = dims.empty() ? 1 : dims[0];
    if (row % info->block_elems != 0 ||
        static_cast<int64_t>(data.size()) != elems / info->block_elems * info->block_bytes)
        throw std::invalid_argument("GgufWriter: tensor '" + name + "' has " + std::to_string(data.size()) +
                                    " bytes of data, which does not match its dims and type " + std::string(info->name));
    tensors_.push_back({std::move(name), std::move(dims), ggml_type, std::move(data)});
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
    std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
    put<uint32_t>(out, 3);
    put<uint64_t>(out, tensors_.size());
    put<uint64_t>(out, kvs_.size());
    for (const auto& [key, encoded] : kvs_) {
        put_string(out, key);
        out.insert(out.end(), encoded.begin(), encoded.end());
    }
    uint64_t offset = 0;  // relative to the data section; each tensor starts aligned
    for (const Tensor& t : tensors_) {
        put_string(out, t.name);
        put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
        for (int64_t d : t.dims) put<uint64_t>(out, static_cast<uint64_t>(d));
        put<uint32_t>(out, t.ggml_type);
        put<uint64_t>(out, offset);
        offset += t.data.size() + padding(t.data.size());
    }
    out.resize(out.size() + padding(out.size()), 0);
    for (const Tensor& t : tensors_) {
        out.insert(out.end(), t.data.begin(), t.data.end());
        out.resize(out.size() + padding(t.data.size()), 0);
    }
    return out;
}

void GgufWriter::write(const std::string& path) const {
    const std::vector<uint8_t> bytes = to_bytes();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) throw BadInput(path + ": cannot write");
}

}  // namespace kvscope
