// Backend selection by name, for the CLI, the GUI and benchmarks: "cpu", "cuda" or "auto" (CUDA when
// this build has it and a device is present, else the CPU). Pure C++; callable from any thread.
#pragma once

#include "backend.h"

#include <memory>
#include <string>

namespace kvscope {

// True when this build contains the CUDA backend (a device may still be absent at run time).
bool cuda_backend_built();

// name: "cpu" | "cuda" | "auto". num_threads: CPU threads (0 = all cores). *note (optional) says what
// was chosen and why ("cuda: NVIDIA H200 (device 0)", "cpu: no CUDA device: ..."). Throws
// std::invalid_argument for an unknown name, or for "cuda" when it is unavailable, with the reason.
std::unique_ptr<Backend> make_backend(const std::string& name, int num_threads, std::string* note = nullptr);

}  // namespace kvscope
