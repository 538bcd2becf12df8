// The x86-64 instruction set extensions that decide which CPU kernel set may run: the ones a set was
// compiled for (the compiler's predefined macros in its translation units) and the ones this CPU and its
// OS provide (cpuid, and XGETBV for the ymm/zmm register state). Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>

namespace kvscope::cpu {

// One bit per extension. Only those -march=x86-64-v2..v4 and -march=native on our machines imply.
enum CpuFeature : uint32_t {
    kSse42 = 1u << 0,
    kPopcnt = 1u << 1,
    kAvx = 1u << 2,
    kAvx2 = 1u << 3,
    kFma = 1u << 4,
    kF16c = 1u << 5,
    kBmi1 = 1u << 6,
    kBmi2 = 1u << 7,
    kLzcnt = 1u << 8,
    kMovbe = 1u << 9,
    kAvx512f = 1u << 10,
    kAvx512cd = 1u << 11,
    kAvx512bw = 1u << 12,
    kAvx512dq = 1u << 13,
    kAvx512vl = 1u << 14,
    kAvx512vnni = 1u << 15,
    kAvx512bf16 = 1u << 16,
    kAvx512vbmi = 1u << 17,
    kAvx512vbmi2 = 1u << 18,
    kAvx512ifma = 1u << 19,
    kAvx512bitalg = 1u << 20,
    kAvx512vpopcntdq = 1u << 21,
    kGfni = 1u << 22,
    kVaes = 1u << 23,
    kVpclmulqdq = 1u << 24,
    kAvxVnni = 1u << 25,
};

// What this CPU runs. AVX and AVX-512 features count only where the OS saves their registers (libgcc's
// __builtin_cpu_supports checks XGETBV), so a kernel set chosen from this never traps.
uint32_t detected_cpu_features();

// "AVX512F/CD/BW/DQ/VL VNNI BF16", "AVX2 FMA F16C", "SSE4.2 POPCNT": the extensions that matter to the
// kernels, for `kvscope-cli info`. Extensions implied by a wider one are left out (AVX by AVX2, ...).
std::string summarize_cpu_features(uint32_t features);

// "AVX512F, AVX512VNNI": every extension in features, for error messages.
std::string list_cpu_features(uint32_t features);

// The features the including translation unit is compiled for. static: each kernel set's copy reads its
// own flags (cpu_backend.cpp records them as the set's requirements).
static constexpr uint32_t cpu_features_of_this_translation_unit() {
    uint32_t f = 0;
#if defined(__SSE4_2__)
    f |= kSse42;
#endif
#if defined(__POPCNT__)
    f |= kPopcnt;
#endif
#if defined(__AVX__)
    f |= kAvx;
#endif
#if defined(__AVX2__)
    f |= kAvx2;
#endif
#if defined(__FMA__)
    f |= kFma;
#endif
#if defined(__F16C__)
    f |= kF16c;
#endif
#if defined(__BMI__)
    f |= kBmi1;
#endif
#if defined(__BMI2__)
    f |= kBmi2;
#endif
#if defined(__LZCNT__)
    f |= kLzcnt;
#endif
#if defined(__MOVBE__)
    f |= kMovbe;
#endif
#if defined(__AVX512F__)
    f |= kAvx512f;
#endif
#if defined(__AVX512CD__)
    f |= kAvx512cd;
#endif
#if defined(__AVX512BW__)
    f |= kAvx512bw;
#endif
#if defined(__AVX512DQ__)
    f |= kAvx512dq;
#endif
#if defined(__AVX512VL__)
    f |= kAvx512vl;
#endif
#if defined(__AVX512VNNI__)
    f |= kAvx512vnni;
#endif
#if defined(__AVX512BF16__)
    f |= kAvx512bf16;
#endif
#if defined(__AVX512VBMI__)
    f |= kAvx512vbmi;
#endif
#if defined(__AVX512VBMI2__)
    f |= kAvx512vbmi2;
#endif
#if defined(__AVX512IFMA__)
    f |= kAvx512ifma;
#endif
#if defined(__AVX512BITALG__)
    f |= kAvx512bitalg;
#endif
#if defined(__AVX512VPOPCNTDQ__)
    f |= kAvx512vpopcntdq;
#endif
#if defined(__GFNI__)
    f |= kGfni;
#endif
#if defined(__VAES__)
    f |= kVaes;
#endif
#if defined(__VPCLMULQDQ__)
    f |= kVpclmulqdq;
#endif
#if defined(__AVXVNNI__)
    f |= kAvxVnni;
#endif
    return f;
}

}  // namespace kvscope::cpu
