// Stand-ins for libkvscope-cuda.so, so that every way the CUDA backend can be unavailable is tested on any
// machine (tests/kernels/test_cuda_loader.cpp, tests/e2e/test_cli_backend.cpp). Built once per case by
// tests/CMakeLists.txt: FAKE_ABI / FAKE_INTERFACE make a library the loader must refuse; linked to a
// library that is nowhere on the search path, one whose dependency is missing (as where libcudart.so.13
// is); with neither, one that loads and reports no device.
#include "cuda/cuda_library.h"

#include "kvscope_backend_interface.h"

#include <algorithm>
#include <cstring>

#ifndef FAKE_ABI
#define FAKE_ABI KVSCOPE_CUDA_LIBRARY_ABI
#endif
#ifndef FAKE_INTERFACE
#define FAKE_INTERFACE KVSCOPE_BACKEND_INTERFACE
#endif

#ifdef FAKE_NEEDS_ABSENT
int kvscope_test_absent();               // tests/support/absent_library.cpp
int (*keep_the_dependency)() = &kvscope_test_absent;
#endif

namespace {
void put_text(const char* s, char* text, size_t text_size) {
    if (!text || text_size == 0) return;
    const size_t n = std::min(std::strlen(s), text_size - 1);
    std::memcpy(text, s, n);
    text[n] = '\0';
}
constexpr const char* kNoDevice = "no CUDA device: a fake library (tests/support/fake_cuda_library.cpp)";
}  // namespace

extern "C" {

uint32_t kvscope_cuda_abi_version(void) { return FAKE_ABI; }

const char* kvscope_cuda_backend_interface(void) { return FAKE_INTERFACE; }

int kvscope_cuda_probe(char* text, size_t text_size) {
    put_text(kNoDevice, text, text_size);
    return 0;
}

kvscope::Backend* kvscope_cuda_backend_create(int, char* text, size_t text_size) {
    put_text(kNoDevice, text, text_size);
    return nullptr;
}

}  // extern "C"
