// Decoding of the ggml block types on the device (dtype.h's layouts and block structs, shared with the
// CPU): Quant<T>::value(block, i) is value i of one block, computed with the very roundings of the CPU's
// dequantize_row (cpu/quant.cpp, compiled with -ffp-contract=off): every product and sum goes through
// mul_rn / add_rn / sub_rn (__fmul_rn ... on the device), so nvcc cannot contract them into FMAs and a
// dequantized weight is the same float on both backends, bit for bit (the embedding test compares them
// bitwise). One element per call: the kernels give each thread its own elements.
// q8_activation(v, amax) is the CPU's activation quantization of one value (cpu/quant.h
// quantize_activations_q8), as the int8 matmul paths see it.
// visit_quant_type(t, f) calls f(Quant<T>{}) for the block type t (host side, to pick a kernel instance).
// Host and device: plain C++ compilers see host functions only, so tests/kernels/test_cuda_dequantize.cpp
// checks this decoding against the CPU's on any machine (the kernels themselves need a GPU).
#pragma once

#include "dtype.h"
#include "q4k_scales.h"

#include <cmath>
#include <stdexcept>
#include <string>

#if defined(__CUDACC__)
#include "cuda/cuda_common.cuh"
#define KVSCOPE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KVSCOPE_HOST_DEVICE inline
#endif

namespace kvscope::cuda {

#if defined(__CUDACC__)
// kIq4nlValues in constant memory (a host constexpr array cannot be indexed at run time in device code);
// taken element by element from dtype.h, so the levels are written once.
static __constant__ int8_t kIq4nlLevels[16] = {
    kIq4nlValues[0],  kIq4nlValues[1],  kIq4nlValues[2],  kIq4nlValues[3],  kIq4nlValues[4],  kIq4nlValues[5],
    kIq4nlValues[6],  kIq4nlValues[7],  kIq4nlValues[8],  kIq4nlValues[9],  kIq4nlValues[10], kIq4nlValues[11],
    kIq4nlValues[12], kIq4nlValues[13], kIq4nlValues[14], kIq4nlValues[15]};
static_assert(sizeof(kIq4nlValues) == 16);
#endif

KVSCOPE_HOST_DEVICE int iq4nl_level(int q) {
#if defined(__CUDA_ARCH__)
    return kIq4nlLevels[q];
#else
    return kIq4nlValues[q];
#endif
}

// One IEEE operation each, never fused with its neighbour. On the host a volatile stops the compiler's own
// contraction (-ffp-contract=fast is GCC's default), whatever flags the including file has.
KVSCOPE_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    volatile float r = a * b;
    return r;
#endif
}
KVSCOPE_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    volatile float r = a + b;
    return r;
#endif
}
KVSCOPE_HOST_DEVICE float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    volatile float r = a - b;
    return r;
#endif
}
KVSCOPE_HOST_DEVICE float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    volatile float r = a / b;
    return r;
#endif
}
KVSCOPE_HOST_DEVICE float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}

KVSCOPE_HOST_DEVICE float f16_bits(uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return f16_to_f32(h);
#endif
}

// v as the int8 matmul paths see it: d * q with d = amax / 127 rounded to F16 (as llama.cpp's Q8_0 block
// stores it) and q = v * (127 / amax) rounded to nearest even (the 1.5 * 2^23 trick) and clamped to
// [-127, 127]; amax = max |x| over v's block of 32.
KVSCOPE_HOST_DEVICE float q8_activation(float v, float amax) {
#if defined(__CUDA_ARCH__)
    const float d = __half2float(__float2half_rn(div_rn(amax, 127.0f)));
#else
    const float d = f16_to_f32(f32_to_f16(div_rn(amax, 127.0f)));
#endif
    const float id = amax > 0.0f ? div_rn(127.0f, amax) : 0.0f;
    const float q = fminf(fmaxf(sub_rn(fma_rn(v, id, 12582912.0f), 12582912.0f), -127.0f), 127.0f);
    return mul_rn(d, q);
}

// v as the K types' int8 matmul path sees it (cpu/quant.h quantize_activations_q8_k, llama.cpp's Q8_K):
// d * q with iscale = -127 / m and d = 1 / iscale, for m the value of largest magnitude (its sign kept) over
// v's block of 256, and q = v * iscale rounded to nearest even and capped at 127.
KVSCOPE_HOST_DEVICE float q8k_activation(float v, float m) {
    if (m == 0.0f) return 0.0f;
    const float iscale = div_rn(-127.0f, m), d = div_rn(1.0f, iscale);
    // + 0 turns rintf's -0 into +0, as the CPU's int8 q = 0 is: d * q must then carry d's sign only.
    return mul_rn(d, fminf(add_rn(rintf(mul_rn(v, iscale)), 0.0f), 127.0f));
}

// Value j (0..31) of a 32-block's nibbles: low nibble of qs[j] for j < 16, high nibble of qs[j - 16] above.
KVSCOPE_HOST_DEVICE int nibble32(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }
// Bit j (0..31) of a little-endian u32 stored as 4 bytes.
KVSCOPE_HOST_DEVICE int bit32(const uint8_t* qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }


// Q2_K / Q3_K: value i (0..255) of the 2-bit layout sits in byte 32 * (i / 128) + i % 32 at bit
// 2 * ((i % 128) / 32).
KVSCOPE_HOST_DEVICE int q2_bits(const uint8_t* qs, int i) {
    return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
}

template <DType T>
struct Quant;

template <>
struct Quant<DType::Q8_0> {
    using Block = BlockQ8_0;
    static constexpr int kElems = 32;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) { return mul_rn(f16_bits(b.d), static_cast<float>(b.qs[i])); }
};

template <>
struct Quant<DType::Q4_0> {
    using Block = BlockQ4_0;
    static constexpr int kElems = 32;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        return mul_rn(static_cast<float>(nibble32(b.qs, i) - 8), f16_bits(b.d));
    }
};

template <>
struct Quant<DType::Q4_1> {
    using Block = BlockQ4_1;
    static constexpr int kElems = 32;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        return add_rn(mul_rn(static_cast<float>(nibble32(b.qs, i)), f16_bits(b.d)), f16_bits(b.m));
    }
};

template <>
struct Quant<DType::Q5_0> {
    using Block = BlockQ5_0;
    static constexpr int kElems = 32;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        const int q = nibble32(b.qs, i) | (bit32(b.qh, i) << 4);
        return mul_rn(static_cast<float>(q - 16), f16_bits(b.d));
    }
};

template <>
struct Quant<DType::Q5_1> {
    using Block = BlockQ5_1;
    static constexpr int kElems = 32;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        const int q = nibble32(b.qs, i) | (bit32(b.qh, i) << 4);
        return add_rn(mul_rn(static_cast<float>(q), f16_bits(b.d)), f16_bits(b.m));
    }
};

template <>
struct Quant<DType::IQ4_NL> {
    using Block = BlockIQ4_NL;
    static constexpr int kElems = 32;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        return mul_rn(f16_bits(b.d), static_cast<float>(iq4nl_level(nibble32(b.qs, i))));
    }
};

template <>
struct Quant<DType::IQ4_XS> {
    using Block = BlockIQ4_XS;
    static constexpr int kElems = 256;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        const int s = i / 32;  // sub-block of 32
        const float dl = mul_rn(f16_bits(b.d), static_cast<float>(iq4xs_scale(s, b.scales_l, b.scales_h)));
        return mul_rn(dl, static_cast<float>(iq4nl_level(nibble32(b.qs + 16 * s, i % 32))));
    }
};

template <>
struct Quant<DType::Q2_K> {
    using Block = BlockQ2_K;
    static constexpr int kElems = 256;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        const int sc = b.scales[i / 16];  // scale in the low nibble, min in the high one
        const float dl = mul_rn(f16_bits(b.d), static_cast<float>(sc & 0xF));
        const float ml = mul_rn(f16_bits(b.dmin), static_cast<float>(sc >> 4));
        return sub_rn(mul_rn(dl, static_cast<float>(q2_bits(b.qs, i))), ml);
    }
};

template <>
struct Quant<DType::Q3_K> {
    using Block = BlockQ3_K;
    static constexpr int kElems = 256;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        const float dl = mul_rn(f16_bits(b.d), static_cast<float>(q3k_scale(i / 16, b.scales)));
        const int q = q2_bits(b.qs, i) - (((b.hmask[i % 32] >> (i / 32)) & 1) ? 0 : 4);
        return mul_rn(dl, static_cast<float>(q));
    }
};

template <>
struct Quant<DType::Q4_K> {
    using Block = BlockQ4_K;
    static constexpr int kElems = 256;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        const int s = i / 32;  // sub-block: even ones in the low nibbles of 32 bytes, odd ones in the high
        int sc, m;
        q4k_scale_min(s, b.scales, sc, m);
        const int byte = b.qs[32 * (s / 2) + i % 32];
        const int q = s % 2 ? byte >> 4 : byte & 0xF;
        const float d1 = mul_rn(f16_bits(b.d), static_cast<float>(sc));
        const float m1 = mul_rn(f16_bits(b.dmin), static_cast<float>(m));
        return sub_rn(mul_rn(d1, static_cast<float>(q)), m1);
    }
};

template <>
struct Quant<DType::Q5_K> {
    using Block = BlockQ5_K;
    static constexpr int kElems = 256;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        const int s = i / 32;  // as Q4_K, plus bit s of qh[i % 32]
        int sc, m;
        q4k_scale_min(s, b.scales, sc, m);
        const int byte = b.qs[32 * (s / 2) + i % 32];
        const int q = (s % 2 ? byte >> 4 : byte & 0xF) | (((b.qh[i % 32] >> s) & 1) << 4);
        const float d1 = mul_rn(f16_bits(b.d), static_cast<float>(sc));
        const float m1 = mul_rn(f16_bits(b.dmin), static_cast<float>(m));
        return sub_rn(mul_rn(d1, static_cast<float>(q)), m1);
    }
};

template <>
struct Quant<DType::Q6_K> {
    using Block = BlockQ6_K;
    static constexpr int kElems = 256;
    KVSCOPE_HOST_DEVICE static float value(const Block& b, int i) {
        // In half h = i / 128, r = i % 128: low 4 bits in ql[64 h + r % 64] (low nibble for r < 64), top 2
        // bits at bit 2 (r / 32) of qh[32 h + r % 32]; offset 32; scale scales[i / 16].
        const int h = i / 128, r = i % 128;
        const int lo = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
        const int hi = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        const float d1 = mul_rn(f16_bits(b.d), static_cast<float>(b.scales[i / 16]));
        return mul_rn(d1, static_cast<float>((lo | (hi << 4)) - 32));
    }
};

// f(Quant<t>{}) for a block-quantized t; throws std::invalid_argument naming `what` and the type otherwise.
template <class F>
void visit_quant_type(DType t, const char* what, F&& f) {
    switch (t) {
    case DType::Q8_0: return f(Quant<DType::Q8_0>{});
    case DType::Q4_0: return f(Quant<DType::Q4_0>{});
    case DType::Q4_1: return f(Quant<DType::Q4_1>{});
    case DType::Q5_0: return f(Quant<DType::Q5_0>{});
    case DType::Q5_1: return f(Quant<DType::Q5_1>{});
    case DType::IQ4_NL: return f(Quant<DType::IQ4_NL>{});
    case DType::IQ4_XS: return f(Quant<DType::IQ4_XS>{});
    case DType::Q2_K: return f(Quant<DType::Q2_K>{});
    case DType::Q3_K: return f(Quant<DType::Q3_K>{});
    case DType::Q4_K: return f(Quant<DType::Q4_K>{});
    case DType::Q5_K: return f(Quant<DType::Q5_K>{});
    case DType::Q6_K: return f(Quant<DType::Q6_K>{});
    case DType::F32:
    case DType::F16:
    case DType::BF16: break;
    }
    throw std::invalid_argument(std::string(what) + ": " + std::string(dtype_name(t)) + " is not a block-quantized type");
}

}  // namespace kvscope::cuda
