#include "cpu/cpu_kernel_sets.h"

#include "cpu/cpu_features.h"

#include <cstdlib>
#include <stdexcept>

// Each set's entry points (cpu_backend.h, compiled inside the set, in namespace kvscope::cpu::<set>): the
// only symbols its object file exports (kernels/CMakeLists.txt localizes the rest).
#define KVSCOPE_KERNEL_SET_ENTRY_POINTS(set)                    \
    namespace kvscope::cpu::set {                               \
    std::unique_ptr<Backend> make_cpu_backend(int num_threads); \
    uint32_t compiled_cpu_features();                           \
    uint64_t read_streams(const void*, size_t, int);            \
    }
#define KVSCOPE_KERNEL_SET(set) \
    CpuKernelSet{#set, set::compiled_cpu_features(), &set::make_cpu_backend, &set::read_streams}
#define KVSCOPE_KERNEL_SET_OF(set) KVSCOPE_KERNEL_SET(set)  // expands a macro argument first

#if defined(KVSCOPE_CPU_PORTABLE)
KVSCOPE_KERNEL_SET_ENTRY_POINTS(avx512)
KVSCOPE_KERNEL_SET_ENTRY_POINTS(avx2)
KVSCOPE_KERNEL_SET_ENTRY_POINTS(baseline)
#elif defined(KVSCOPE_CPU_SINGLE_KERNEL_SET)
KVSCOPE_KERNEL_SET_ENTRY_POINTS(KVSCOPE_CPU_SINGLE_KERNEL_SET)
#else
#error "kernels/CMakeLists.txt defines KVSCOPE_CPU_PORTABLE or KVSCOPE_CPU_SINGLE_KERNEL_SET for this file"
#endif

namespace kvscope::cpu {

namespace {

constexpr const char* kEnvVar = "KVSCOPE_CPU_VARIANT";

std::string names_of_sets() {
    std::string s;
    for (const CpuKernelSet& set : cpu_kernel_sets()) s += (s.empty() ? "" : ", ") + std::string(set.name);
    return s;
}

const char* env_choice() {
    const char* v = std::getenv(kEnvVar);
    return v && *v ? v : nullptr;
}

const CpuKernelSet& find_runnable(std::string_view name, const std::string& why_asked) {
    for (const CpuKernelSet& set : cpu_kernel_sets()) {
        if (set.name != name) continue;
        if (!cpu_runs(set))
            throw std::invalid_argument(why_asked + ": this CPU cannot run the " + std::string(name) +
                                        " kernels: it lacks " +
                                        list_cpu_features(set.features & ~detected_cpu_features()));
        return set;
    }
    throw std::invalid_argument(why_asked + ": no CPU kernel set '" + std::string(name) + "' in this build (" +
                                names_of_sets() + ")");
}

const CpuKernelSet& choose() {
    if (const char* name = env_choice()) return find_runnable(name, std::string(kEnvVar) + "=" + name);
    for (const CpuKernelSet& set : cpu_kernel_sets())
        if (cpu_runs(set)) return set;
    const CpuKernelSet& last = cpu_kernel_sets().back();
    throw std::invalid_argument("this CPU cannot run the " + std::string(last.name) + " CPU kernels of this build: it lacks " +
                                list_cpu_features(last.features & ~detected_cpu_features()) +
                                " (configure with -DKVSCOPE_PORTABLE=ON for binaries that run anywhere)");
}

}  // namespace

std::span<const CpuKernelSet> cpu_kernel_sets() {
    static const CpuKernelSet sets[] = {
#if defined(KVSCOPE_CPU_PORTABLE)
        KVSCOPE_KERNEL_SET(avx512),
        KVSCOPE_KERNEL_SET(avx2),
        KVSCOPE_KERNEL_SET(baseline),
#else
        KVSCOPE_KERNEL_SET_OF(KVSCOPE_CPU_SINGLE_KERNEL_SET),
#endif
    };
    return sets;
}

bool cpu_runs(const CpuKernelSet& set) { return (set.features & ~detected_cpu_features()) == 0; }

const CpuKernelSet& chosen_cpu_kernel_set() {
    static const CpuKernelSet& chosen = choose();  // a throw leaves it unset: the next call throws again
    return chosen;
}

std::string describe_cpu_kernel_set(std::string_view name) {
    for (const CpuKernelSet& set : cpu_kernel_sets()) {
        if (set.name != name) continue;
        std::string s = std::string(name) + " (" + summarize_cpu_features(set.features) + ")";
        if (&set != &chosen_cpu_kernel_set()) return s;
        if (env_choice()) return s + ", chosen by " + kEnvVar;
        return cpu_kernel_sets().size() > 1 ? s + ", chosen from cpuid" : s;
    }
    return std::string(name);
}

std::unique_ptr<Backend> make_cpu_backend(int num_threads) {
    return chosen_cpu_kernel_set().make_backend(num_threads);
}

std::unique_ptr<Backend> make_cpu_backend(int num_threads, std::string_view kernel_set) {
    return find_runnable(kernel_set, "CPU kernel set").make_backend(num_threads);
}

}  // namespace kvscope::cpu
