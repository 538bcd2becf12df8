// Element types of weights and caches, their storage sizes, and scalar conversions.
// Quantized types are stored in blocks along a row (ggml's layouts, so GGUF tensors are used in place;
// d, dmin, m are f16; a "K" super-block holds 256 values in sub-blocks of 16 or 32):
//   Q4_0:   32 values = d + 16 bytes of nibbles;            value = d * (q - 8)
//   Q4_1:   32 values = d, m + 16 bytes of nibbles;         value = d * q + m
//   Q5_0:   32 values = d + 4 bytes of 5th bits + nibbles;  value = d * (q - 16)
//   Q5_1:   32 values = d, m + 5th bits + nibbles;          value = d * q + m
//   Q8_0:   32 values = d + 32 x int8;                      value = d * q
//   Q2_K:  256 values, 16 x 16; 4-bit scale and min each;   value = d * sc * q - dmin * m, q in 0..3
//   Q3_K:  256 values, 16 x 16; 6-bit signed scales;        value = d * (sc - 32) * q, q in -4..3
//   Q4_K:  256 values, 8 x 32; 6-bit scales and mins;       value = d * sc * q - dmin * m, q in 0..15
//   Q5_K:  256 values, 8 x 32; as Q4_K with a 5th bit;      q in 0..31
//   Q6_K:  256 values, 16 x 16; int8 scales;                value = d * sc * (q - 32), q in 0..63
//   IQ4_NL: 32 values = d + nibbles indexing kIq4nlValues;  value = d * kIq4nlValues[q]
//   IQ4_XS: 256 values, 8 x 32; 6-bit scales;               value = d * (sc - 32) * kIq4nlValues[q]
#pragma once

#include <cstdint>
#include <optional>
#include <cstring>
#include <string>
#include <string_view>

namespace kvscope {

// Appended in the order they were added: the values are not GGUF's type ids (gguf_file.h maps those).
enum class DType : uint8_t { F32, F16, BF16, Q8_0, Q4_K, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS };

// Every type, for listing and lookup by name.
constexpr DType kDTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_K,
                             DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,
                             DType::Q3_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

constexpr std::string_view dtype_name(DType t) {
    switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Q8_0: return "Q8_0";
    case DType::Q4_K: return "Q4_K";
    case DType::Q4_0: return "Q4_0";
    case DType::Q4_1: return "Q4_1";
    case DType::Q5_0: return "Q5_0";
    case DType::Q5_1: return "Q5_1";
    case DType::Q2_K: return "Q2_K";
    case DType::Q3_K: return "Q3_K";
    case DType::Q5_K: return "Q5_K";
    case DType::Q6_K: return "Q6_K";
    case DType::IQ4_NL: return "IQ4_NL";
    case DType::IQ4_XS: return "IQ4_XS";
    }
    return "?";
}

// The type named `name` (dtype_name's spelling, any case: "q6_k" and "Q6_K" alike).
inline std::optional<DType> dtype_from_name(std::string_view name) {
    for (DType t : kDTypes) {
        const std::string_view n = dtype_name(t);
        if (n.size() != name.size()) continue;
        bool same = true;
        for (size_t i = 0; i < n.size() && same; ++i)
            same = n[i] == (name[i] >= 'a' && name[i] <= 'z' ? static_cast<char>(name[i] - 'a' + 'A') : name[i]);
        if (same) return t;
    }
    return std::nullopt;
}

// "F32, F16, ..., IQ4_XS": every type, for messages that list what is supported.
inline std::string dtype_name_list() {
    std::string s;
    for (DType t : kDTypes) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
    return s;
}

// Values per storage block (1 for plain floats).
constexpr int64_t dtype_block_elems(DType t) {
    switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return 1;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL: return 32;
    case DType::Q4_K:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS: return 256;
    }
    return 1;
}
constexpr int64_t dtype_block_bytes(DType t) {
    switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q8_0: return 34;
    case DType::Q4_K: return 144;
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q5_0: return 22;
    case DType::Q5_1: return 24;
    case DType::Q2_K: return 84;
    case DType::Q3_K: return 110;
    case DType::Q5_K: return 176;
    case DType::Q6_K: return 210;
    case DType::IQ4_NL: return 18;
    case DType::IQ4_XS: return 136;
    }
    return 0;
}
// Stored in blocks of several values (every type but F32, F16, BF16).
constexpr bool dtype_is_quantized(DType t) { return dtype_block_elems(t) > 1; }

// Bytes of a row of `cols` values; cols must be a multiple of the block size (checked by loaders).
constexpr int64_t dtype_row_bytes(DType t, int64_t cols) {
    return cols / dtype_block_elems(t) * dtype_block_bytes(t);
}

struct BlockQ8_0 {
    uint16_t d;  // f16 scale
    int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_K {
    uint16_t d;     // f16 super-block scale for the 6-bit scales
    uint16_t dmin;  // f16 super-block scale for the 6-bit mins
    uint8_t scales[12];
    uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[16];  // value j in the low nibble of qs[j], value 16 + j in its high nibble
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_1 {
    uint16_t d, m;
    uint8_t qs[16];  // as Q4_0
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];   // bit j (of the little-endian u32) is the 5th bit of value j
    uint8_t qs[16];  // low 4 bits, as Q4_0
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockQ2_K {
    uint8_t scales[16];  // sub-block j: scale in the low nibble, min in the high nibble
    uint8_t qs[64];      // 2-bit quants, four per byte (see dequantize_q2_k)
    uint16_t d, dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

struct BlockQ3_K {
    uint8_t hmask[32];   // the high bit of each 3-bit quant
    uint8_t qs[64];      // the low 2 bits, as Q2_K
    uint8_t scales[12];  // 16 x 6 bits (see q3k_scale)
    uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ5_K {
    uint16_t d, dmin;
    uint8_t scales[12];  // as Q4_K
    uint8_t qh[32];      // the 5th bits
    uint8_t qs[128];     // the low 4 bits, as Q4_K
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
    uint8_t ql[128];    // low 4 bits
    uint8_t qh[64];     // high 2 bits
    int8_t scales[16];  // per 16 values
    uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[16];  // indices into kIq4nlValues, nibbles as Q4_0
};
static_assert(sizeof(BlockIQ4_NL) == 18);

struct BlockIQ4_XS {
    uint16_t d;
    uint16_t scales_h;   // bits 2j, 2j+1: the top 2 bits of sub-block j's 6-bit scale
    uint8_t scales_l[4]; // the low 4 bits: sub-block j in nibble j % 2 of byte j / 2
    uint8_t qs[128];     // per sub-block of 32, nibbles as Q4_0
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl: a non-uniform 4-bit grid, denser near 0).
constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>(bits >> 16);
}

inline float f16_to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            exp = 127 - 15 + 1;
            while ((mant & 0x400u) == 0) {
                mant <<= 1;
                --exp;
            }
            mant &= 0x3ffu;
            bits = sign | (exp << 23) | (mant << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Round to nearest even, with overflow to infinity and gradual underflow.
inline uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (abs < 0x38800000u) {                                                // subnormal or zero in f16
        if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
        uint32_t e = abs >> 23;
        uint32_t m = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;  // 14..24
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) ++half;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u) - (112u << 23);
    return static_cast<uint16_t>(sign | (r >> 13));
}

}  // namespace kvscope
