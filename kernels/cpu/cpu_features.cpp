#include "cpu/cpu_features.h"

#include <initializer_list>
#include <utility>

namespace kvscope::cpu {

namespace {

struct Named {
    CpuFeature bit;
    const char* name;
};
constexpr Named kNames[] = {
    {kSse42, "SSE4.2"},       {kPopcnt, "POPCNT"},        {kAvx, "AVX"},
    {kAvx2, "AVX2"},          {kFma, "FMA"},              {kF16c, "F16C"},
    {kBmi1, "BMI1"},          {kBmi2, "BMI2"},            {kLzcnt, "LZCNT"},
    {kMovbe, "MOVBE"},        {kAvx512f, "AVX512F"},      {kAvx512cd, "AVX512CD"},
    {kAvx512bw, "AVX512BW"},  {kAvx512dq, "AVX512DQ"},    {kAvx512vl, "AVX512VL"},
    {kAvx512vnni, "AVX512VNNI"}, {kAvx512bf16, "AVX512BF16"}, {kAvx512vbmi, "AVX512VBMI"},
    {kAvx512vbmi2, "AVX512VBMI2"}, {kAvx512ifma, "AVX512IFMA"}, {kAvx512bitalg, "AVX512BITALG"},
    {kAvx512vpopcntdq, "AVX512VPOPCNTDQ"}, {kGfni, "GFNI"}, {kVaes, "VAES"},
    {kVpclmulqdq, "VPCLMULQDQ"}, {kAvxVnni, "AVX-VNNI"},
};

uint32_t detect() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();  // may run before libgcc's own constructor has
    uint32_t f = 0;
    // __builtin_cpu_supports takes a string literal only, hence the list.
    const std::pair<CpuFeature, bool> has[] = {
        {kSse42, __builtin_cpu_supports("sse4.2")},
        {kPopcnt, __builtin_cpu_supports("popcnt")},
        {kAvx, __builtin_cpu_supports("avx")},
        {kAvx2, __builtin_cpu_supports("avx2")},
        {kFma, __builtin_cpu_supports("fma")},
        {kF16c, __builtin_cpu_supports("f16c")},
        {kBmi1, __builtin_cpu_supports("bmi")},
        {kBmi2, __builtin_cpu_supports("bmi2")},
        {kLzcnt, __builtin_cpu_supports("lzcnt")},
        {kMovbe, __builtin_cpu_supports("movbe")},
        {kAvx512f, __builtin_cpu_supports("avx512f")},
        {kAvx512cd, __builtin_cpu_supports("avx512cd")},
        {kAvx512bw, __builtin_cpu_supports("avx512bw")},
        {kAvx512dq, __builtin_cpu_supports("avx512dq")},
        {kAvx512vl, __builtin_cpu_supports("avx512vl")},
        {kAvx512vnni, __builtin_cpu_supports("avx512vnni")},
        {kAvx512bf16, __builtin_cpu_supports("avx512bf16")},
        {kAvx512vbmi, __builtin_cpu_supports("avx512vbmi")},
        {kAvx512vbmi2, __builtin_cpu_supports("avx512vbmi2")},
        {kAvx512ifma, __builtin_cpu_supports("avx512ifma")},
        {kAvx512bitalg, __builtin_cpu_supports("avx512bitalg")},
        {kAvx512vpopcntdq, __builtin_cpu_supports("avx512vpopcntdq")},
        {kGfni, __builtin_cpu_supports("gfni")},
        {kVaes, __builtin_cpu_supports("vaes")},
        {kVpclmulqdq, __builtin_cpu_supports("vpclmulqdq")},
        {kAvxVnni, __builtin_cpu_supports("avxvnni")},
    };
    for (const auto& [bit, present] : has)
        if (present) f |= bit;
    return f;
#else
    return 0;
#endif
}

}  // namespace

uint32_t detected_cpu_features() {
    static const uint32_t features = detect();
    return features;
}

std::string summarize_cpu_features(uint32_t f) {
    std::string s;
    auto word = [&](const std::string& w) { s += (s.empty() ? "" : " ") + w; };
    if (f & kAvx512f) {
        std::string family = "AVX512F";
        for (auto [bit, suffix] : {std::pair{kAvx512cd, "CD"}, {kAvx512bw, "BW"}, {kAvx512dq, "DQ"}, {kAvx512vl, "VL"}})
            if (f & bit) family += std::string("/") + suffix;
        word(family);
        for (auto [bit, name] : {std::pair{kAvx512vnni, "VNNI"}, {kAvx512bf16, "BF16"}, {kAvx512vbmi, "VBMI"},
                                 {kAvx512vbmi2, "VBMI2"}, {kAvx512ifma, "IFMA"}, {kAvx512bitalg, "BITALG"},
                                 {kAvx512vpopcntdq, "VPOPCNTDQ"}})
            if (f & bit) word(name);
    } else if (f & kAvx2) {
        word("AVX2");
        if (f & kFma) word("FMA");
        if (f & kF16c) word("F16C");
    } else if (f & kAvx) {
        word("AVX");
    } else {
        if (f & kSse42) word("SSE4.2");
        if (f & kPopcnt) word("POPCNT");
    }
    for (auto [bit, name] : {std::pair{kGfni, "GFNI"}, {kVaes, "VAES"}, {kVpclmulqdq, "VPCLMULQDQ"}})
        if (f & bit) word(name);
    return s.empty() ? "no SIMD extensions" : s;
}

std::string list_cpu_features(uint32_t f) {
    std::string s;
    for (const Named& n : kNames)
        if (f & n.bit) s += (s.empty() ? "" : ", ") + std::string(n.name);
    return s;
}

}  // namespace kvscope::cpu
