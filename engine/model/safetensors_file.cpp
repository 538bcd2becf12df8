#include "model/safetensors_file.h"

#include "util/errors.h"
#include "util/file_status.h"
#include "util/json_number.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

namespace kvscope {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, so that a damaged length field
// cannot make the JSON parser build a huge document.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void fail(const std::string& path, const std::string& msg) { throw BadInput(path + ": " + msg); }

json parse_json(const std::string& path, const char* begin, const char* end, std::string_view what) {
    try {
        return json::parse(begin, end);
    } catch (const json::exception& e) {
        fail(path, std::string(what) + " is not valid JSON (" + e.what() + ")");
    }
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
    return s + "]";
}

// A short description of a JSON value for messages. Never dump() a structured value from a file: a
// hostile header can nest arrays millions deep, and dump() recurses.
std::string brief(const json& v) {
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

// A JSON value as a non-negative int64, or nullopt when it is not one.
std::optional<int64_t> as_count(const json& v) { return json_integer_in(v, 0, std::numeric_limits<int64_t>::max()); }

}  // namespace

size_t safetensors_dtype_size(std::string_view name) {
    if (name == "F64" || name == "I64" || name == "U64") return 8;
    if (name == "F32" || name == "I32" || name == "U32") return 4;
    if (name == "F16" || name == "BF16" || name == "I16" || name == "U16") return 2;
    if (name == "I8" || name == "U8" || name == "BOOL" || name == "F8_E4M3" || name == "F8_E5M2" ||
        name == "F8_E8M0")
        return 1;
    return 0;
}

void SafetensorsModel::add_file(const std::string& path, bool keep_metadata) {
    MappedFile file(path);
    const size_t size = file.size();
    if (size < 8) fail(path, "file too small for a safetensors header (" + std::to_string(size) + " bytes)");
    uint64_t header_len;
    std::memcpy(&header_len, file.data(), 8);
    if (header_len > size - 8)
        fail(path, "header length " + std::to_string(header_len) + " exceeds file size (" + std::to_string(size) + " bytes)");
    if (header_len > kMaxHeaderBytes)
        fail(path, "header length " + std::to_string(header_len) + " exceeds the 100 MB limit");
    const char* hbegin = reinterpret_cast<const char*>(file.data() + 8);
    const json header = parse_json(path, hbegin, hbegin + header_len, "header");
    if (!header.is_object()) fail(path, "header is not a JSON object");

    const size_t data_start = 8 + static_cast<size_t>(header_len);
    const size_t data_size = size - data_start;
    std::vector<std::pair<int64_t, SafetensorsTensor>> found;  // (begin offset, tensor)
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object()) fail(path, "__metadata__ is not a JSON object");
            if (keep_metadata)
                for (const auto& [k, v] : entry.items()) {
                    if (v.is_structured()) fail(path, "__metadata__ value '" + k + "' is not a string");
                    metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
                }
            continue;
        }
        const std::string what = "tensor '" + name + "'";
        if (!entry.is_object()) fail(path, what + " entry is not a JSON object");
        SafetensorsTensor t;
        t.name = name;
        t.file = path;

        auto dt = entry.find("dtype");
        if (dt == entry.end() || !dt->is_string()) fail(path, what + " has no string 'dtype'");
        t.dtype_name = dt->get<std::string>();
        const size_t elem_size = safetensors_dtype_size(t.dtype_name);
        if (elem_size == 0) fail(path, what + " has unknown dtype '" + t.dtype_name + "'");
        if (t.dtype_name == "F32") t.dtype = DType::F32;
        if (t.dtype_name == "F16") t.dtype = DType::F16;
        if (t.dtype_name == "BF16") t.dtype = DType::BF16;

        auto sh = entry.find("shape");
        if (sh == entry.end() || !sh->is_array()) fail(path, what + " has no 'shape' array");
        uint64_t elems = 1;
        for (const json& d : *sh) {
            std::optional<int64_t> dim = as_count(d);
            if (!dim)
                fail(path, what + " shape element " + std::to_string(t.shape.size()) + " (" + brief(d) +
                               ") is not a non-negative integer");
            t.shape.push_back(*dim);
            if (*dim != 0 && elems > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(*dim) / elem_size)
                fail(path, what + " shape " + shape_text(t.shape) + "... overflows the element count");
            elems *= static_cast<uint64_t>(*dim);
        }
        const uint64_t expected = elems * elem_size;

        auto offs = entry.find("data_offsets");
        if (offs == entry.end() || !offs->is_array() || offs->size() != 2)
            fail(path, what + " has no 'data_offsets' [begin, end]");
        std::optional<int64_t> begin = as_count((*offs)[0]), end = as_count((*offs)[1]);
        if (!begin || !end || *begin > *end || static_cast<uint64_t>(*end) > data_size)
            fail(path, what + " data_offsets [" + brief((*offs)[0]) + ", " + brief((*offs)[1]) +
                           "] are not [begin, end] within the data section (" + std::to_string(data_size) + " bytes)");
        const uint64_t nbytes = static_cast<uint64_t>(*end - *begin);
        if (nbytes != expected)
            fail(path, what + " has " + std::to_string(nbytes) + " bytes of data, but shape " + shape_text(t.shape) +
                           " of " + t.dtype_name + " needs " + std::to_string(expected));
        t.data = file.data() + data_start + static_cast<size_t>(*begin);
        t.nbytes = static_cast<size_t>(nbytes);
        found.emplace_back(*begin, std::move(t));
    }

    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    // The format lays tensors end to end: two that share bytes are a damaged header (every weight read from
    // the same bytes loaded, and computed nonsense). The safetensors library refuses them too.
    for (size_t k = 1; k < found.size(); ++k) {
        const auto& [prev_begin, prev] = found[k - 1];
        if (prev.nbytes > 0 && found[k].second.nbytes > 0 && static_cast<uint64_t>(found[k].first) < prev_begin + prev.nbytes)
            fail(path, "tensor '" + found[k].second.name + "' data at " + std::to_string(found[k].first) + " overlaps tensor '" +
                           prev.name + "' [" + std::to_string(prev_begin) + ", " + std::to_string(prev_begin + prev.nbytes) + ")");
    }
    for (auto& [begin, t] : found) {
        auto [it, inserted] = index_.emplace(t.name, tensors_.size());
        if (!inserted)
            fail(path, "duplicate tensor name '" + t.name + "' (also in " + tensors_[it->second].file + ")");
        tensors_.push_back(std::move(t));
    }
    files_.push_back(std::move(file));  // moving a MappedFile keeps the mapping, so data pointers stay valid
}

SafetensorsModel SafetensorsModel::open(const std::string& path) {
    SafetensorsModel m;
    std::error_code ec;
    const fs::file_status status = checked_status(path);
    if (status.type() == fs::file_type::regular) {
        m.add_file(path, true);
        return m;
    }
    if (status.type() != fs::file_type::directory) fail(path, "no such file or directory");

    const fs::path dir(path);
    const fs::path index_path = dir / "model.safetensors.index.json";
    if (checked_status(index_path).type() == fs::file_type::regular) {
        const std::string ipath = index_path.string();
        MappedFile index_file(ipath);
        const char* b = reinterpret_cast<const char*>(index_file.data());
        const json index = parse_json(ipath, b, b + index_file.size(), "index");
        if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
            fail(ipath, "no 'weight_map' object");
        const json& weight_map = index["weight_map"];
        std::set<std::string> shards;  // name order: model-00001-of-00003, model-00002-of-00003, ...
        for (const auto& [name, shard] : weight_map.items()) {
            if (!shard.is_string()) fail(ipath, "weight_map entry '" + name + "' is not a file name");
            const std::string s = shard.get<std::string>();
            // A shard is a file of the model's directory: an absolute path or ../ would read any file.
            if (s.empty() || fs::path(s).filename() != fs::path(s) || s == "." || s == "..")
                fail(ipath, "weight_map entry '" + name + "' names '" + s.substr(0, 200) +
                                "', not a file name in the model's directory");
            if (checked_status(dir / s).type() != fs::file_type::regular)
                fail(ipath, "weight_map entry '" + name + "' points to missing shard '" + s + "'");
            shards.insert(s);
        }
        if (shards.empty()) fail(ipath, "weight_map is empty");
        bool first = true;
        for (const std::string& s : shards) {
            m.add_file((dir / s).string(), first);
            first = false;
        }
        for (const auto& [name, shard] : weight_map.items()) {
            const SafetensorsTensor* t = m.find(name);
            if (!t || fs::path(t->file).filename() != fs::path(shard.get<std::string>()).filename())
                fail(ipath, "weight_map puts tensor '" + name + "' in '" + shard.get<std::string>() +
                                "', but that shard has no such tensor");
        }
        return m;
    }
    if (checked_status(dir / "model.safetensors").type() == fs::file_type::regular) {
        m.add_file((dir / "model.safetensors").string(), true);
        return m;
    }
    std::vector<std::string> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().extension() == ".safetensors" && it->is_regular_file(ec)) files.push_back(it->path().string());
    if (ec) fail(path, "cannot list the directory: " + ec.message());  // not "no *.safetensors files"
    if (files.empty())
        fail(path, "no model.safetensors, model.safetensors.index.json or other *.safetensors files");
    std::sort(files.begin(), files.end());
    for (size_t k = 0; k < files.size(); ++k) m.add_file(files[k], k == 0);
    return m;
}

const SafetensorsTensor* SafetensorsModel::find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace kvscope
