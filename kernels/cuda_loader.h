// Opens libkvscope-cuda.so (kernels/cuda/cuda_library.h), the CUDA backend built as its own library, so
// that no executable links CUDA: where the library, the CUDA runtime, the driver or a device is missing,
// the executables still start and run on the CPU. The library is looked for at $KVSCOPE_CUDA_LIBRARY
// when set, else at ../lib/kvscope/libkvscope-cuda.so from the executable's directory (the build tree
// and an installed tree have that layout). Pure C++; thread-safe.
#pragma once

#include "backend.h"

#include <cstddef>
#include <memory>
#include <string>

namespace kvscope {

// The library file the loader opens: $KVSCOPE_CUDA_LIBRARY, or the one beside the executable; "" when
// this build has no CUDA backend and the variable is unset (*why_not then says so).
std::string cuda_library_path(std::string* why_not = nullptr);

// Whether CUDA can run here: available with `text` describing device 0 ("NVIDIA H200 (sm_90, 139.8 GiB),
// 1 device"), or not with `text` saying why (the library path and the dlerror text, an ABI mismatch,
// "no CUDA device: ...").
struct CudaAvailability {
    bool available = false;
    std::string text;
};

// An opened and checked library. Never closed: a backend from it may live until the process exits.
class CudaLibrary {
public:
    // Opens `file` (made absolute) and checks its ABI number and Backend interface hash against this
    // program's. On failure loaded() is false and error() names the path and the problem.
    static CudaLibrary open(const std::string& file);

    bool loaded() const { return handle_ != nullptr; }
    const std::string& path() const { return path_; }
    const std::string& error() const { return error_; }

    // Neither throws. Where the library did not open, both say error().
    CudaAvailability probe() const;
    std::unique_ptr<Backend> create_backend(int device, std::string* text) const;

    // kvscope_cuda_probe and kvscope_cuda_backend_create (checked against cuda_library.h).
    using ProbeFn = int (*)(char*, size_t);
    using CreateFn = Backend* (*)(int, char*, size_t);

private:
    friend const CudaLibrary& cuda_library();

    void* handle_ = nullptr;
    ProbeFn probe_ = nullptr;
    CreateFn create_ = nullptr;
    std::string path_, error_;
};

// The process's library, opened at the first call from cuda_library_path(); a failed open is not
// retried.
const CudaLibrary& cuda_library();

// What cuda_library().probe() says (or why the library did not open), cached after the first call: the
// devices of a machine do not come and go while it runs.
const CudaAvailability& cuda_availability();

// A CUDA backend on `device` from the process's library, or null with *text saying why (as
// cuda_availability()); on success *text describes the device.
std::unique_ptr<Backend> load_cuda_backend(int device, std::string* text);

}  // namespace kvscope
