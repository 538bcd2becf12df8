// The accelerators the sim backend can stand in for: memory, bandwidth, dense tensor-core FLOP/s and
// the tensor-parallel interconnect of one GPU, each figure from its vendor's datasheet (sources in
// gpu_specs.cpp). Pure data; read by the step-time model and the simulated memory budget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

struct GpuSpec {
    std::string name;          // the --backend sim:NAME key, e.g. "h100-sxm"
    std::string display_name;  // "NVIDIA H100 SXM 80GB"
    int64_t memory_bytes = 0;  // device memory one GPU reports (nvidia-smi memory.total)
    double memory_bandwidth = 0;   // bytes/s, peak
    double bf16_flops = 0;         // dense BF16 tensor-core FLOP/s (no sparsity), FP32 accumulate
    double fp8_flops = 0;          // dense FP8 FLOP/s; 0 = no FP8 tensor cores
    std::string interconnect;      // "NVLink 4", "PCIe 4.0 x16"
    double interconnect_bandwidth = 0;  // bytes/s one direction, per GPU, for tensor-parallel all-reduce
    double allreduce_latency = 0;       // seconds a small all-reduce takes regardless of its size
};

const std::vector<GpuSpec>& gpu_specs();
// The spec of `name`; throws BadInput listing the known names.
const GpuSpec& find_gpu_spec(const std::string& name);
// "a100-80g, h100-sxm, h200, l40s, rtx4090"
std::string gpu_spec_names();

}  // namespace kvscope
