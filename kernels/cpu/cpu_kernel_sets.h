// The CPU backend's kernel sets in this binary, and the one it runs. A portable build (KVSCOPE_PORTABLE)
// holds the CPU backend compiled three times, as ggml's CPU variants: avx512 (x86-64-v4 + AVX512-VNNI),
// avx2 (x86-64-v3: AVX2, FMA, F16C) and baseline (x86-64-v2); other builds hold one set, "native"
// (-march=native) or "generic" (the compiler's default). The set is chosen once, on first use, from cpuid:
// the widest this CPU runs, or the one KVSCOPE_CPU_VARIANT names (for tests and comparisons).
// The only way to a CPU backend outside kernels/cpu: CpuBackend itself lives inside each set.
// Any thread.
#pragma once

#include "backend.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace kvscope::cpu {

struct CpuKernelSet {
    std::string_view name;  // "avx512", "avx2", "baseline", "native" or "generic"
    uint32_t features;      // CpuFeature bits it was compiled for: what a CPU needs to run it
    std::unique_ptr<Backend> (*make_backend)(int num_threads);
    // The set's memory-read kernel: reads bytes once as `streams` (1 .. 8) parts side by side and returns
    // their sum. kvscope-kernel-bench's read bandwidth, the reference of its decode roofline.
    uint64_t (*read_streams)(const void* data, size_t bytes, int streams);
};

// Every set built into this binary, widest first.
std::span<const CpuKernelSet> cpu_kernel_sets();

// Whether this CPU can run set (every feature it was compiled for is present and enabled by the OS).
bool cpu_runs(const CpuKernelSet& set);

// The set CPU backends use in this process. Throws std::invalid_argument when KVSCOPE_CPU_VARIANT names a
// set this binary lacks or this CPU cannot run, or when it runs none (a native build on another CPU).
const CpuKernelSet& chosen_cpu_kernel_set();

// What `kvscope-cli info` prints for the set named name: "avx512 (AVX512F/CD/BW/DQ/VL VNNI), chosen from
// cpuid"; "native (...)" in a native build.
std::string describe_cpu_kernel_set(std::string_view name);

// A CPU backend of the chosen set (num_threads > 0), or of the named one (tests: every set the CPU runs).
// Both throw std::invalid_argument as chosen_cpu_kernel_set() does.
std::unique_ptr<Backend> make_cpu_backend(int num_threads);
std::unique_ptr<Backend> make_cpu_backend(int num_threads, std::string_view kernel_set);

}  // namespace kvscope::cpu
