// The entry points of libkvscope-cuda.so (kernels/cuda/cuda_library.h) over CudaBackend. Only this file
// goes into the shared library besides kvscope_cuda; kernels/cuda/cuda_library.map exports its four
// functions and nothing else. No exception leaves an entry point.
#include "cuda/cuda_library.h"

#include "cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "kvscope_backend_interface.h"  // KVSCOPE_BACKEND_INTERFACE, generated at build time

namespace {

void put_text(const std::string& s, char* text, size_t text_size) {
    if (!text || text_size == 0) return;
    const size_t n = std::min(s.size(), text_size - 1);
    std::memcpy(text, s.data(), n);
    text[n] = '\0';
}

}  // namespace

extern "C" {

uint32_t kvscope_cuda_abi_version(void) { return KVSCOPE_CUDA_LIBRARY_ABI; }

const char* kvscope_cuda_backend_interface(void) { return KVSCOPE_BACKEND_INTERFACE; }

int kvscope_cuda_probe(char* text, size_t text_size) {
    try {
        std::string why_not;
        const int count = kvscope::cuda_device_count(&why_not);
        if (count == 0) {
            put_text(why_not, text, text_size);
            return 0;
        }
        put_text(kvscope::describe_cuda_device(0) + ", " + std::to_string(count) + (count == 1 ? " device" : " devices"),
                 text, text_size);
        return count;
    } catch (const std::exception& e) {
        put_text(std::string("CUDA probe failed: ") + e.what(), text, text_size);
    } catch (...) {
        put_text("CUDA probe failed", text, text_size);
    }
    return 0;
}

kvscope::Backend* kvscope_cuda_backend_create(int device, char* text, size_t text_size) {
    try {
        std::string why_not;
        auto backend = kvscope::make_cuda_backend(device, &why_not);
        if (!backend) {
            put_text(why_not, text, text_size);
            return nullptr;
        }
        const auto& info = static_cast<kvscope::cuda::CudaBackend&>(*backend).device_info();
        put_text(info.name + " (device " + std::to_string(info.device) + ", sm_" + std::to_string(info.cc_major) +
                     std::to_string(info.cc_minor) + ")",
                 text, text_size);
        return backend.release();
    } catch (const std::exception& e) {
        put_text(std::string("CUDA backend failed: ") + e.what(), text, text_size);
    } catch (...) {
        put_text("CUDA backend failed", text, text_size);
    }
    return nullptr;
}

}  // extern "C"
