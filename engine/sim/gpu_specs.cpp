#include "sim/gpu_specs.h"

#include "util/errors.h"

namespace kvscope {

namespace {
constexpr int64_t MiB = int64_t{1} << 20;
constexpr double GB = 1e9, TB = 1e12, TFLOPS = 1e12, us = 1e-6;
}  // namespace

// Memory: the total nvidia-smi reports for the card (what vLLM's gpu_memory_utilization multiplies);
// the datasheets' capacity is the nominal "80GB" etc. Interconnect bandwidth is one direction per GPU
// (the datasheets quote both directions: NVLink 600 / 900 GB/s, PCIe 4.0 x16 64 GB/s). All-reduce
// latency is not a datasheet figure: it is the order of small-message all-reduce latency that NCCL
// and vLLM's custom all-reduce reach within one NVLink node (~10 us) or over PCIe (~30 us), an
// estimate that calibration replaces.
const std::vector<GpuSpec>& gpu_specs() {
    static const std::vector<GpuSpec> specs = {
        // NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM column: HBM2e 80GB, 2,039 GB/s,
        // BF16 Tensor Core 312 TFLOPS (624 with sparsity), no FP8, NVLink 600 GB/s.
        {"a100-80g", "NVIDIA A100 SXM 80GB", 81920 * MiB, 2039 * GB, 312 * TFLOPS, 0, "NVLink 3", 300 * GB, 10 * us},
        // NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column: 80GB HBM3, 3.35 TB/s, BF16
        // 1,979 TFLOPS and FP8 3,958 TFLOPS with sparsity (half of each dense), NVLink 900 GB/s.
        {"h100-sxm", "NVIDIA H100 SXM 80GB", 81559 * MiB, 3.35 * TB, 989.4 * TFLOPS, 1978.9 * TFLOPS, "NVLink 4",
         450 * GB, 10 * us},
        // NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column: 141GB HBM3e, 4.8 TB/s, the same
        // tensor cores as H100 SXM (BF16 1,979 / FP8 3,958 TFLOPS with sparsity), NVLink 900 GB/s.
        {"h200", "NVIDIA H200 SXM 141GB", 143771 * MiB, 4.8 * TB, 989.4 * TFLOPS, 1978.9 * TFLOPS, "NVLink 4",
         450 * GB, 10 * us},
        // NVIDIA L40S datasheet (2023): 48GB GDDR6, 864 GB/s, BF16 362.05 TFLOPS dense (733 with
        // sparsity), FP8 733 TFLOPS dense (1,466 with sparsity), PCIe Gen4 x16 64 GB/s, no NVLink.
        {"l40s", "NVIDIA L40S 48GB", 46068 * MiB, 864 * GB, 362.05 * TFLOPS, 733 * TFLOPS, "PCIe 4.0 x16", 32 * GB,
         30 * us},
        // NVIDIA Ada Lovelace architecture whitepaper (v1.1), appendix table, GeForce RTX 4090: 24GB
        // GDDR6X, 1,008 GB/s, FP16/BF16 tensor with FP32 accumulate 165.2 TFLOPS dense (330.4 sparse),
        // FP8 with FP32 accumulate 330.3 TFLOPS dense; PCIe 4.0 x16, no NVLink.
        {"rtx4090", "NVIDIA GeForce RTX 4090 24GB", 24564 * MiB, 1008 * GB, 165.2 * TFLOPS, 330.3 * TFLOPS,
         "PCIe 4.0 x16", 32 * GB, 30 * us},
    };
    return specs;
}

std::string gpu_spec_names() {
    std::string names;
    for (const GpuSpec& s : gpu_specs()) names += (names.empty() ? "" : ", ") + s.name;
    return names;
}

const GpuSpec& find_gpu_spec(const std::string& name) {
    for (const GpuSpec& s : gpu_specs())
        if (s.name == name) return s;
    throw BadInput("sim: unknown GPU '" + name.substr(0, 64) + "' (known: " + gpu_spec_names() + ")");
}

}  // namespace kvscope
