// Element types of weights and caches, their storage sizes, and scalar conversions.
// Quantized types are stored in blocks along a row (ggml's layouts, so GGUF tensors are used in place):
//   Q8_0: 32 values = f16 scale d + 32 x int8;            value = d * q
//   Q4_K: 256 values = f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of 4-bit quants
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace kvscope {

enum class DType : uint8_t { F32, F16, BF16, Q8_0, Q4_K };

constexpr std::string_view dtype_name(DType t) {
    switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Q8_0: return "Q8_0";
    case DType::Q4_K: return "Q4_K";
    }
    return "?";
}

// Values per storage block (1 for plain floats).
constexpr int64_t dtype_block_elems(DType t) {
    return t == DType::Q8_0 ? 32 : t == DType::Q4_K ? 256 : 1;
}
constexpr int64_t dtype_block_bytes(DType t) {
    switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q8_0: return 34;
    case DType::Q4_K: return 144;
    }
    return 0;
}
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
