#include "model/gguf_file.h"

#include "util/errors.h"

#include <array>
#include <bit>
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

namespace kvscope {

static_assert(std::endian::native == std::endian::little, "GGUF is read in place as little-endian");

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr size_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// Smallest encodings, used to reject counts the rest of the file cannot possibly hold before any
// allocation: a key/value is key length (8) + type (4) + a 1-byte value; a tensor info is name length
// (8) + n_dims (4) + type (4) + offset (8) with no dims.
constexpr size_t kMinKvBytes = 13;
constexpr size_t kMinTensorInfoBytes = 24;

// ggml's type table (ggml.c type_traits): block size in values and bytes. Ids 4, 5 and 31-33, 36-38
// were removed from ggml and have no layout here. Types kvscope does not compute are listed too, so that a
// file holding them is refused by name, and its sizes are still checked.
constexpr std::array<GgmlTypeInfo, 43> kGgmlTypes = {{
    {"F32", 1, 4},       {"F16", 1, 2},       {"Q4_0", 32, 18},     {"Q4_1", 32, 20},
    {"", 0, 0},          {"", 0, 0},          {"Q5_0", 32, 22},     {"Q5_1", 32, 24},
    {"Q8_0", 32, 34},    {"Q8_1", 32, 36},    {"Q2_K", 256, 84},    {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},  {"Q5_K", 256, 176},  {"Q6_K", 256, 210},   {"Q8_K", 256, 292},
    {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},  {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},   {"IQ4_XS", 256, 136},
    {"I8", 1, 1},        {"I16", 1, 2},       {"I32", 1, 4},        {"I64", 1, 8},
    {"F64", 1, 8},       {"IQ1_M", 256, 56},  {"BF16", 1, 2},       {"", 0, 0},
    {"", 0, 0},          {"", 0, 0},          {"TQ1_0", 256, 54},   {"TQ2_0", 256, 66},
    {"", 0, 0},          {"", 0, 0},          {"", 0, 0},           {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},   {"Q1_0", 128, 18},   {"Q2_0", 64, 18},
}};

// Bytes of a scalar value type; 0 for STRING and ARRAY (variable length).
size_t scalar_size(GgufType t) {
    switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    case GgufType::STRING:
    case GgufType::ARRAY: return 0;
    }
    return 0;
}

bool is_integer(GgufType t) {
    switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64: return true;
    default: return false;
    }
}

std::string u128_to_string(unsigned __int128 v) {
    if (v == 0) return "0";
    std::string s;
    while (v) {
        s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
        v /= 10;
    }
    return s;
}

// A bounds-checked cursor over the mapped bytes. Every read checks the remaining size first; errors
// name the file, what was being read and the offset.
class Reader {
public:
    Reader(const uint8_t* base, size_t size, const std::string& path) : base_(base), size_(size), path_(path) {}

    [[noreturn]] void fail(const std::string& msg) const { throw BadInput(path_ + ": " + msg); }

    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }

    void need(size_t n, std::string_view what) const {
        if (n > remaining())
            fail("truncated: " + std::string(what) + " at offset " + std::to_string(pos_) + " needs " +
                 std::to_string(n) + " bytes, but the file ends at " + std::to_string(size_));
    }

    template <class T>
    T read(std::string_view what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::string read_string(std::string_view what) {
        size_t at = pos_;
        uint64_t len = read<uint64_t>(what);
        if (len > remaining())
            fail(std::string(what) + " at offset " + std::to_string(at) + " has length " + std::to_string(len) +
                 ", which runs past the end of the file (size " + std::to_string(size_) + ")");
        std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len);
        return s;
    }

private:
    const uint8_t* base_;
    size_t size_;
    size_t pos_ = 0;
    const std::string& path_;
};

GgufType checked_type(Reader& r, uint32_t raw, const std::string& what) {
    if (raw > static_cast<uint32_t>(GgufType::F64))
        r.fail(what + " has unknown metadata value type " + std::to_string(raw));
    return static_cast<GgufType>(raw);
}

// Reads one numeric or bool scalar of type t as a double (arrays) or into value.i / value.f (scalars).
double read_number(Reader& r, GgufType t, const std::string& what, int64_t* as_int) {
    switch (t) {
    case GgufType::U8: { auto v = r.read<uint8_t>(what); if (as_int) *as_int = v; return v; }
    case GgufType::I8: { auto v = r.read<int8_t>(what); if (as_int) *as_int = v; return v; }
    case GgufType::BOOL: { auto v = r.read<uint8_t>(what) != 0; if (as_int) *as_int = v; return v; }
    case GgufType::U16: { auto v = r.read<uint16_t>(what); if (as_int) *as_int = v; return v; }
    case GgufType::I16: { auto v = r.read<int16_t>(what); if (as_int) *as_int = v; return v; }
    case GgufType::U32: { auto v = r.read<uint32_t>(what); if (as_int) *as_int = v; return v; }
    case GgufType::I32: { auto v = r.read<int32_t>(what); if (as_int) *as_int = v; return v; }
    case GgufType::I64: { auto v = r.read<int64_t>(what); if (as_int) *as_int = v; return static_cast<double>(v); }
    case GgufType::U64: {
        auto v = r.read<uint64_t>(what);
        if (as_int) {
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                r.fail(what + " is the u64 " + std::to_string(v) + ", larger than the largest supported integer");
            *as_int = static_cast<int64_t>(v);
        }
        return static_cast<double>(v);
    }
    case GgufType::F32: return r.read<float>(what);
    case GgufType::F64: return r.read<double>(what);
    case GgufType::STRING:
    case GgufType::ARRAY: break;
    }
    r.fail(what + " is not a number");
}

GgufValue read_value(Reader& r, const std::string& key) {
    const std::string what = "metadata key '" + key + "'";
    GgufValue v;
    v.type = checked_type(r, r.read<uint32_t>(what + " type"), what);
    if (v.type == GgufType::STRING) {
        v.s = r.read_string(what + " string value");
    } else if (v.type == GgufType::ARRAY) {
        v.array_type = checked_type(r, r.read<uint32_t>(what + " array element type"), what + " array");
        if (v.array_type == GgufType::ARRAY) r.fail(what + ": nested arrays are not supported");
        uint64_t count = r.read<uint64_t>(what + " array length");
        const size_t min_elem = v.array_type == GgufType::STRING ? 8 : scalar_size(v.array_type);
        if (count > r.remaining() / min_elem)
            r.fail(what + " array length " + std::to_string(count) + " exceeds what the rest of the file can hold (" +
                   std::to_string(r.remaining()) + " bytes)");
        const std::string elem_what = what + " array element";
        if (v.array_type == GgufType::STRING) {
            v.strings.reserve(static_cast<size_t>(count));
            for (uint64_t k = 0; k < count; ++k) v.strings.push_back(r.read_string(elem_what));
        } else {
            v.numbers.reserve(static_cast<size_t>(count));
            for (uint64_t k = 0; k < count; ++k) v.numbers.push_back(read_number(r, v.array_type, elem_what, nullptr));
        }
    } else {
        const bool is_float = v.type == GgufType::F32 || v.type == GgufType::F64;
        v.f = read_number(r, v.type, what + " value", is_float ? nullptr : &v.i);
        if (!is_float) v.f = static_cast<double>(v.i);
    }
    return v;
}

std::string type_description(const GgufValue& v) {
    if (v.type == GgufType::ARRAY) return "array of " + std::string(gguf_type_name(v.array_type));
    return std::string(gguf_type_name(v.type));
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
    switch (type) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
    }
    return "unknown";
}

const GgmlTypeInfo* ggml_type_info(uint32_t ggml_type) {
    if (ggml_type >= kGgmlTypes.size() || kGgmlTypes[ggml_type].block_elems == 0) return nullptr;
    return &kGgmlTypes[ggml_type];
}

std::string_view ggml_type_name(uint32_t ggml_type) {
    if (const GgmlTypeInfo* info = ggml_type_info(ggml_type)) return info->name;
    // Unknown ids get a stable "type N" string with static storage, so callers may keep the view.
    static const std::array<std::string, 256> unknown_names = [] {
        std::array<std::string, 256> names;
        for (size_t k = 0; k < names.size(); ++k) names[k] = "type " + std::to_string(k);
        return names;
    }();
    return ggml_type < unknown_names.size() ? std::string_view(unknown_names[ggml_type]) : "type >255";
}

std::optional<DType> dtype_from_ggml_type(uint32_t ggml_type) {
    for (DType t : kDTypes)
        if (ggml_type_from_dtype(t) == ggml_type) return t;
    return std::nullopt;
}

// ggml's enum ggml_type.
uint32_t ggml_type_from_dtype(DType dtype) {
    switch (dtype) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q5_0: return 6;
    case DType::Q5_1: return 7;
    case DType::Q8_0: return 8;
    case DType::Q2_K: return 10;
    case DType::Q3_K: return 11;
    case DType::Q4_K: return 12;
    case DType::Q5_K: return 13;
    case DType::Q6_K: return 14;
    case DType::IQ4_NL: return 20;
    case DType::IQ4_XS: return 23;
    case DType::BF16: return 30;
    }
    return 0;
}

int64_t GgufTensorInfo::num_elements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;  // cannot overflow: checked when the file was read
    return n;
}

GgufFile GgufFile::open(const std::string& path) {
    GgufFile g;
    g.file_ = MappedFile(path);
    Reader r(g.file_.data(), g.file_.size(), path);

    if (g.file_.size() < 4 || r.read<uint32_t>("magic") != kGgufMagic)
        r.fail("bad magic: not a GGUF file (expected the bytes 'GGUF' at offset 0)");
    g.version_ = r.read<uint32_t>("version");
    if (g.version_ != 2 && g.version_ != 3) {
        if (__builtin_bswap32(g.version_) == 2 || __builtin_bswap32(g.version_) == 3)
            r.fail("big-endian GGUF files are not supported");
        r.fail("unsupported GGUF version " + std::to_string(g.version_) + " (kvscope reads versions 2 and 3)");
    }
    const uint64_t tensor_count = r.read<uint64_t>("tensor count");
    const uint64_t kv_count = r.read<uint64_t>("metadata key/value count");
    if (kv_count > r.remaining() / kMinKvBytes)
        r.fail("metadata key/value count " + std::to_string(kv_count) + " exceeds what the file can hold (size " +
               std::to_string(g.file_.size()) + ")");
    if (tensor_count > r.remaining() / kMinTensorInfoBytes)
        r.fail("tensor count " + std::to_string(tensor_count) + " exceeds what the file can hold (size " +
               std::to_string(g.file_.size()) + ")");

    std::string previous;  // a key that cannot be read is named by the one before it, whose length may be what lied
    for (uint64_t k = 0; k < kv_count; ++k) {
        const std::string where =
            "metadata key #" + std::to_string(k) + (previous.empty() ? "" : " (the one after '" + previous + "')");
        std::string key = r.read_string(where);
        GgufValue value = read_value(r, key);
        if (!g.metadata_.emplace(key, std::move(value)).second)
            r.fail("duplicate metadata key '" + key.substr(0, 200) + "' (" + where + ")");
        previous = key.substr(0, 200);
    }

    // Alignment comes from metadata and governs where the data section starts.
    if (const GgufValue* a = g.find("general.alignment")) {
        if (!is_integer(a->type))
            r.fail("metadata key 'general.alignment' has type " + type_description(*a) + ", expected an integer");
        if (a->i <= 0 || a->i > (int64_t{1} << 30) || (a->i & (a->i - 1)) != 0)
            r.fail("general.alignment " + std::to_string(a->i) + " is not a power of two up to 2^30");
        g.alignment_ = static_cast<size_t>(a->i);
    } else {
        g.alignment_ = kDefaultAlignment;
    }

    std::vector<uint64_t> offsets;
    offsets.reserve(static_cast<size_t>(tensor_count));
    g.tensors_.reserve(static_cast<size_t>(tensor_count));
    for (uint64_t k = 0; k < tensor_count; ++k) {
        GgufTensorInfo t;
        t.name = r.read_string("tensor #" + std::to_string(k) + " name");
        const std::string what = "tensor '" + t.name + "'";
        const uint32_t n_dims = r.read<uint32_t>(what + " dimension count");
        if (n_dims > kMaxDims)
            r.fail(what + " has " + std::to_string(n_dims) + " dimensions (at most " + std::to_string(kMaxDims) + ")");
        int64_t elems = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const uint64_t dim = r.read<uint64_t>(what + " dimensions");
            if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                r.fail(what + " dimension " + std::to_string(d) + " is " + std::to_string(static_cast<int64_t>(dim)) +
                       " (must be positive)");
            const auto sdim = static_cast<int64_t>(dim);
            if (elems > std::numeric_limits<int64_t>::max() / sdim)
                r.fail(what + " element count overflows (dimensions too large)");
            elems *= sdim;
            t.dims.push_back(sdim);
        }
        t.ggml_type = r.read<uint32_t>(what + " type");
        const GgmlTypeInfo* info = ggml_type_info(t.ggml_type);
        if (!info) r.fail(what + " has unknown ggml type " + std::to_string(t.ggml_type) + " (its size is not known)");
        t.dtype = dtype_from_ggml_type(t.ggml_type);
        const int64_t row = t.dims.empty() ? 1 : t.dims[0];
        if (row % info->block_elems != 0)
            r.fail(what + " has row length " + std::to_string(row) + ", not a multiple of the " + std::string(info->name) +
                   " block size " + std::to_string(info->block_elems));
        const uint64_t blocks = static_cast<uint64_t>(elems / info->block_elems);
        if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(info->block_bytes))
            r.fail(what + " byte size overflows (dimensions too large)");
        const uint64_t nbytes = blocks * static_cast<uint64_t>(info->block_bytes);
        if (nbytes > g.file_.size())
            r.fail(what + " needs " + std::to_string(nbytes) + " bytes of data, more than the whole file (size " +
                   std::to_string(g.file_.size()) + ")");
        t.nbytes = static_cast<size_t>(nbytes);
        offsets.push_back(r.read<uint64_t>(what + " data offset"));
        if (!g.tensor_index_.emplace(t.name, g.tensors_.size()).second)
            r.fail("duplicate tensor name '" + t.name + "'");
        g.tensors_.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment after the tensor infos; each
    // tensor's offset is relative to it and must itself be aligned (tensors are used in place).
    const size_t size = g.file_.size();
    const size_t pad = (g.alignment_ - r.pos() % g.alignment_) % g.alignment_;
    g.data_offset_ = r.pos() + pad;
    for (size_t k = 0; k < g.tensors_.size(); ++k) {
        GgufTensorInfo& t = g.tensors_[k];
        const uint64_t off = offsets[k];
        const unsigned __int128 begin = static_cast<unsigned __int128>(g.data_offset_) + off;
        if (off % g.alignment_ != 0)
            r.fail("tensor '" + t.name + "' data offset " + std::to_string(off) + " is not a multiple of the alignment " +
                   std::to_string(g.alignment_));
        if (begin + t.nbytes > size)
            r.fail("tensor '" + t.name + "' data [offset " + u128_to_string(begin) + ", " + std::to_string(t.nbytes) +
                   " bytes] runs past the end of the file (size " + std::to_string(size) + ")");
        t.data = g.file_.data() + static_cast<size_t>(begin);
    }
    // Tensors lie one after another: two that share bytes are a damaged file (every offset 0 loaded, and
    // computed nonsense). llama.cpp's reader refuses them as well.
    std::vector<const GgufTensorInfo*> by_place;
    for (const GgufTensorInfo& t : g.tensors_)
        if (t.nbytes > 0) by_place.push_back(&t);
    std::sort(by_place.begin(), by_place.end(), [](const auto* a, const auto* b) { return a->data < b->data; });
    for (size_t k = 1; k < by_place.size(); ++k)
        if (by_place[k]->data < by_place[k - 1]->data + by_place[k - 1]->nbytes)
            r.fail("tensor '" + by_place[k]->name + "' data overlaps tensor '" + by_place[k - 1]->name + "' (offsets " +
                   std::to_string(by_place[k - 1]->data - g.data_offset_ - g.file_.data()) + " and " +
                   std::to_string(by_place[k]->data - g.data_offset_ - g.file_.data()) + ")");
    return g;
}

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = metadata_.find(key);
    return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void throw_missing(const std::string& path, std::string_view key) {
    throw BadInput(path + ": missing metadata key '" + std::string(key) + "'");
}
[[noreturn]] void throw_mistyped(const std::string& path, std::string_view key, const GgufValue& v,
                                 std::string_view expected) {
    throw BadInput(path + ": metadata key '" + std::string(key) + "' has type " + type_description(v) + ", expected " +
                   std::string(expected));
}
}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) throw_missing(path(), key);
    return get_string_or(key, {});
}

std::string GgufFile::get_string_or(std::string_view key, std::string fallback) const {
    const GgufValue* v = find(key);
    if (!v) return fallback;
    if (v->type != GgufType::STRING) throw_mistyped(path(), key, *v, "string");
    return v->s;
}

int64_t GgufFile::get_int(std::string_view key) const {
    if (!find(key)) throw_missing(path(), key);
    return get_int_or(key, 0);
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
    const GgufValue* v = find(key);
    if (!v) return fallback;
    if (!is_integer(v->type)) throw_mistyped(path(), key, *v, "an integer");
    return v->i;
}

int32_t GgufFile::get_i32(std::string_view key) const {
    if (!find(key)) throw_missing(path(), key);
    return get_i32_or(key, 0);
}

int32_t GgufFile::get_i32_or(std::string_view key, int32_t fallback) const {
    const int64_t v = get_int_or(key, fallback);
    // A u64 of 2^32 + 64 cast to int would be 64: a model of other shapes than the file declares.
    if (v < INT32_MIN || v > INT32_MAX)
        throw BadInput(path() + ": metadata key '" + std::string(key) + "' = " + std::to_string(v) +
                       " is out of range (a 32-bit integer)");
    return static_cast<int32_t>(v);
}

double GgufFile::get_float(std::string_view key) const {
    if (!find(key)) throw_missing(path(), key);
    return get_float_or(key, 0);
}

double GgufFile::get_float_or(std::string_view key, double fallback) const {
    const GgufValue* v = find(key);
    if (!v) return fallback;
    if (v->type != GgufType::F32 && v->type != GgufType::F64 && !is_integer(v->type))
        throw_mistyped(path(), key, *v, "a number");
    return v->f;
}

bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
    const GgufValue* v = find(key);
    if (!v) return fallback;
    if (v->type != GgufType::BOOL) throw_mistyped(path(), key, *v, "bool");
    return v->i != 0;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace kvscope
