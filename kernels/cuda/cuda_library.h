// The C entry points of libkvscope-cuda.so: the CUDA backend as a library that executables open at run
// time (kernels/cuda_loader.h), so that they start, and run on the CPU, where CUDA is absent. Defined in
// kernels/cuda/cuda_library.cpp; the library exports nothing else. Pure C++ header (no CUDA headers).
// A Backend crosses the boundary as a C++ object, so both sides must come from the same kernels headers
// and compiler family: the loader checks the ABI number and the interface hash before anything else.
#pragma once

#include "backend.h"

#include <cstddef>
#include <cstdint>

// Bump when an entry point below changes its signature or its meaning. Changes to the Backend class and
// its argument types need no bump: KVSCOPE_BACKEND_INTERFACE (a build-time hash of backend.h, dtype.h,
// kv_cache_layout.h and this file; kernels/CMakeLists.txt) follows them.
#define KVSCOPE_CUDA_LIBRARY_ABI 1

// The library is compiled with hidden visibility; these four are its exports.
#define KVSCOPE_CUDA_EXPORT __attribute__((visibility("default")))

extern "C" {

// KVSCOPE_CUDA_LIBRARY_ABI of the library.
KVSCOPE_CUDA_EXPORT uint32_t kvscope_cuda_abi_version(void);

// KVSCOPE_BACKEND_INTERFACE of the library: a library built from other headers would call the wrong
// virtual functions, so the loader refuses it.
KVSCOPE_CUDA_EXPORT const char* kvscope_cuda_backend_interface(void);

// How many CUDA devices the driver reports, with text = a description of device 0
// ("NVIDIA H200 (sm_90, 139.8 GiB), 1 device"), or 0 with text = why none can be used ("no CUDA device:
// cudaErrorInsufficientDriver (...)"). Creates no CUDA context. text is NUL-terminated, cut to text_size.
KVSCOPE_CUDA_EXPORT int kvscope_cuda_probe(char* text, size_t text_size);

// A CUDA backend on `device` with text = its description ("NVIDIA H200 (device 0, sm_90)"), or null with
// text = why not. The caller owns the backend and deletes it through Backend's virtual destructor; the
// library stays loaded until the process exits. Never throws.
KVSCOPE_CUDA_EXPORT kvscope::Backend* kvscope_cuda_backend_create(int device, char* text, size_t text_size);

}  // extern "C"
