// Backend selection by name, for the CLI, the GUI and benchmarks: "cpu", "cuda" or "auto" (CUDA when its
// library loads and a device is present, else the CPU). The CUDA backend is a library opened at run time
// (kernels/cuda_loader.h), so no executable links CUDA. Pure C++; callable from any thread.
#pragma once

#include "backend.h"

#include <memory>
#include <string>
#include <vector>

namespace kvscope {

// True when this build made libkvscope-cuda.so (a device, a driver or the library file may still be
// absent at run time).
bool cuda_backend_built();

// name: "cpu" | "cuda" | "auto". num_threads: CPU threads (0 = all cores). *note (optional) says what
// was chosen and why ("cuda: NVIDIA H200 (device 0, sm_90)", "cpu: 16 threads (CUDA not available: ...)").
// Throws std::invalid_argument for an unknown name, or for "cuda" when it is unavailable, with the reason
// (the library path and the dlerror text, "no CUDA device: ..."). "auto" falling back to the CPU says so
// on stderr, once per process.
std::unique_ptr<Backend> make_backend(const std::string& name, int num_threads, std::string* note = nullptr);

// A backend as a backend selector shows it.
struct BackendAvailability {
    std::string name;         // what make_backend takes: "cpu", "cuda", "auto"
    bool available = false;
    std::string description;  // when available: "16 threads", "NVIDIA H200 (sm_90, 139.8 GiB), 1 device",
                              // for auto the backend it picks ("cuda: ...", "cpu: 16 threads")
    std::string reason;       // when not: why, as make_backend would say it ("" when available)
};

// cpu, cuda and auto, in that order. Cheap after the first call (the CUDA probe is cached and creates no
// CUDA context).
std::vector<BackendAvailability> available_backends();

}  // namespace kvscope
