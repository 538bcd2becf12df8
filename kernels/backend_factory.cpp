#include "backend_factory.h"

#include "cpu/cpu_backend.h"
#include "cpu/thread_pool.h"
#if KVSCOPE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#include <stdexcept>

namespace kvscope {

namespace {

// A usable CUDA backend, or null with the reason.
std::unique_ptr<Backend> try_cuda(std::string& why_not) {
#if KVSCOPE_HAVE_CUDA
    return make_cuda_backend(0, &why_not);
#else
    why_not = "this build has no CUDA backend (configured with KVSCOPE_CUDA=OFF or without a CUDA toolkit)";
    return nullptr;
#endif
}

std::unique_ptr<Backend> make_cpu(int num_threads) {
    return std::make_unique<cpu::CpuBackend>(num_threads > 0 ? num_threads : cpu::default_num_threads());
}

}  // namespace

bool cuda_backend_built() {
#if KVSCOPE_HAVE_CUDA
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
        set_note("cpu: " + std::to_string(b->num_threads()) + " threads");
        return b;
    }
    if (name != "cuda" && name != "auto")
        throw std::invalid_argument("unknown backend '" + name + "' (cpu, cuda, auto)");
    std::string why_not;
    if (auto b = try_cuda(why_not)) {
#if KVSCOPE_HAVE_CUDA
        const auto& info = static_cast<cuda::CudaBackend&>(*b).device_info();
        set_note("cuda: " + info.name + " (device " + std::to_string(info.device) + ", sm_" +
                 std::to_string(info.cc_major) + std::to_string(info.cc_minor) + ")");
#endif
        return b;
    }
    if (name == "cuda") throw std::invalid_argument("backend cuda is not available: " + why_not);
    auto b = make_cpu(num_threads);
    set_note("cpu: " + std::to_string(b->num_threads()) + " threads (" + why_not + ")");
    return b;
}

}  // namespace kvscope
