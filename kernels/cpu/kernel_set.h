// Which CPU kernel set a translation unit belongs to. kernels/CMakeLists.txt compiles the CPU backend and
// the kernels it calls once per kernel set (an ISA level: avx512, avx2, baseline; or one native set),
// each with its own -march flags and KVSCOPE_CPU_KERNEL_SET=<name>. Their declarations then live in
// kvscope::cpu::<name>, an inline namespace: the copies never share a symbol, and code inside a set still
// writes cpu::matmul. Everything else sees plain kvscope::cpu (where the shared, baseline copy of quant.cpp
// lives for the engine's loaders) and reaches a set through cpu/cpu_kernel_sets.h.
#pragma once

#if defined(KVSCOPE_CPU_KERNEL_SET)
#define KVSCOPE_CPU_NAMESPACE kvscope::cpu::inline KVSCOPE_CPU_KERNEL_SET
#define KVSCOPE_IN_CPU_KERNEL_SET 1
#else
#define KVSCOPE_CPU_NAMESPACE kvscope::cpu
#define KVSCOPE_IN_CPU_KERNEL_SET 0
#endif

// Headers of code that exists only inside a kernel set assert this, so that including one elsewhere fails
// at compile time with a hint rather than at link time with an undefined kvscope::cpu symbol.
#define KVSCOPE_CPU_KERNEL_SET_ONLY(header)                                                                    \
    static_assert(KVSCOPE_IN_CPU_KERNEL_SET, header " is compiled once per CPU kernel set: outside the CPU " \
                                                    "backend use cpu/cpu_kernel_sets.h")
