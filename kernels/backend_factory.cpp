#include "backend_factory.h"

#include "cpu/cpu_kernel_sets.h"
#include "cpu/thread_pool.h"
#include "cuda_loader.h"

#include <cstdio>
#include <mutex>
#include <stdexcept>

namespace kvscope {

namespace {

std::unique_ptr<Backend> make_cpu(int num_threads) {
    return cpu::make_cpu_backend(num_threads > 0 ? num_threads : cpu::default_num_threads());
}

std::string threads(int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); }

// Once per process, however many engines are built with "auto" (bench --compare builds two, the GUI one
// per model load).
void report_cpu_fallback(const std::string& why_not) {
    static std::once_flag once;
    std::call_once(once, [&] {
        std::fprintf(stderr, "kvscope: backend auto: CUDA not available, using the CPU: %s\n", why_not.c_str());
    });
}

}  // namespace

bool cuda_backend_built() {
#if KVSCOPE_CUDA_LIBRARY_BUILT
    return true;
#else
    return false;
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name, int num_threads, std::string* note) {
    auto set_note = [&](const std::string& s) {
        if (note) *note = s;
    };
    if (name == "cpu") {
        auto b = make_cpu(num_threads);
        set_note("cpu: " + threads(b->num_threads()));
        return b;
    }
    if (name != "cuda" && name != "auto")
        throw std::invalid_argument("unknown backend '" + name + "' (cpu, cuda, auto)");
    std::string text;
    if (auto b = load_cuda_backend(0, &text)) {
        set_note("cuda: " + text);
        return b;
    }
    if (name == "cuda") throw std::invalid_argument("backend cuda is not available: " + text);
    report_cpu_fallback(text);
    auto b = make_cpu(num_threads);
    set_note("cpu: " + threads(b->num_threads()) + " (CUDA not available: " + text + ")");
    return b;
}

std::vector<BackendAvailability> available_backends() {
    const CudaAvailability& cuda = cuda_availability();
    const std::string cpu = threads(cpu::default_num_threads());
    return {
        {"cpu", true, cpu, ""},
        {"cuda", cuda.available, cuda.available ? cuda.text : "", cuda.available ? "" : cuda.text},
        {"auto", true, cuda.available ? "cuda: " + cuda.text : "cpu: " + cpu, ""},
    };
}

}  // namespace kvscope
