// The step-time model of the sim backend (version "sim-v1"): how long one engine step would take on a
// GPU (tensor-parallel group), from the model's shapes and the step's work. A roofline per part:
//   linear layers  max(FLOPs / (tp x peak x mfu_linear), weight bytes / (tp x bw x bw_efficiency_linear))
//   attention      prefill: max(causal FLOPs / (tp x peak x mfu_attention), KV bytes / (tp x bw x eff));
//                  decode: KV bytes read through the block tables / (tp x bw x bw_efficiency_attention)
//   all-reduce     2 per layer when tp > 1: latency + 2 (tp-1)/tp x activation bytes / link bandwidth
//   overhead       a fixed per-step cost + a per-sequence cost (scheduling, input prep, sampling)
// The constants start from published figures (docs/DESIGN.md, "Simulated accelerators") and can be
// replaced by a calibration file measured on a real GPU. Pure and stateless; any thread.
#pragma once

#include "metrics/step_stats.h"
#include "model/model_config.h"
#include "sim/gpu_specs.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

inline constexpr const char* kStepTimeModelVersion = "sim-v1";

// The efficiency factors and overheads. Every factor is in (0, 1]: the model can never beat the
// datasheet's peak FLOP/s or bandwidth.
struct StepTimeConstants {
    double mfu_linear = 0.70;               // dense BF16 GEMMs at many tokens
    double bw_efficiency_linear = 0.80;     // weight streaming at few tokens (GEMV-like)
    double mfu_attention = 0.45;            // FlashAttention prefill
    double bw_efficiency_attention = 0.70;  // paged decode attention reading KV blocks
    double step_overhead = 1.2e-3;          // seconds per step: scheduler, input prep, launches, sampling
    double per_seq_overhead = 4e-6;         // seconds per scheduled sequence on top of that
    double allreduce_latency = -1;          // seconds; < 0 = the GPU's table value
    int64_t non_torch_bytes = int64_t{3} << 29;  // per GPU: CUDA context, cuBLAS/NCCL workspaces, graphs (1.5 GiB)
    std::string source = "defaults from published figures";  // where the numbers came from

    // Throws BadInput naming the field when a value is out of range.
    void validate() const;
};

// Reads a calibration file (JSON object; the format is in docs/DESIGN.md): every field optional,
// unknown fields refused. `gpu`: when the file names a GPU ("gpu": "h100-sxm") it must be this one.
// Throws BadInput naming the file and the field.
StepTimeConstants read_calibration(const std::string& path, const std::string& gpu);

// One sequence's share of a step: query tokens computed and context tokens attended after the step
// (naive padding rows are sequences of one query token over their context).
struct SeqWork {
    int query_len = 0;
    int context_len = 0;
};

struct StepWork {
    std::vector<SeqWork> seqs;
    int num_sampled = 0;  // rows that go through the lm head
    int block_size = 16;  // decode attention reads whole blocks
    int num_tokens() const;
    // The totals the model reads (StepStats carries them, so a measured timeline can be re-predicted).
    StepWorkSummary summary() const;
};

// A step's parts at full efficiency (every factor 1), in seconds: the model divides each by its factor.
// The calibration fit (sim/calibration_fit.h) regresses measured step times on these.
struct StepTimeTerms {
    double linear_compute = 0;    // linear FLOPs / (tp x peak)
    double linear_memory = 0;     // streamed weight bytes / (tp x bandwidth)
    double attention_compute = 0; // prefill attention FLOPs / (tp x peak)
    double attention_prefill_memory = 0;  // KV bytes prefill chunks read / (tp x bandwidth)
    double attention_decode_memory = 0;   // KV bytes decode rows read / (tp x bandwidth)
    double allreduce = 0;         // the whole all-reduce time (not fitted)
    int num_seqs = 0;
};

// Predicted seconds of one step, by part (total = the sum).
struct StepTime {
    double linear = 0, attention = 0, allreduce = 0, overhead = 0;
    double total() const { return linear + attention + allreduce + overhead; }
};

class StepTimeModel {
public:
    // model: the shapes; weight_dtype_bytes: bytes per weight element (2 for BF16); kv_dtype_bytes likewise.
    StepTimeModel(const ModelConfig& model, const GpuSpec& gpu, int tensor_parallel_size, StepTimeConstants constants,
                  double weight_dtype_bytes, double kv_dtype_bytes);

    StepTime predict(const StepWork& work) const;
    StepTime predict(const StepWorkSummary& work) const;
    // The same prediction from the parts, with the constants `k` (the fit tries candidates with it).
    static StepTime predict(const StepTimeTerms& terms, const StepTimeConstants& k);
    StepTimeTerms terms(const StepWorkSummary& work) const;

    // Bytes of every weight (embedding, layers, lm head) over the whole tensor-parallel group.
    double weight_bytes() const { return weight_bytes_; }
    // Bytes the weights the decode path reads each step (layers + lm head: the embedding is a gather).
    double streamed_weight_bytes() const { return streamed_weight_bytes_; }
    // FLOPs of the linear layers for `num_tokens` tokens of which `num_sampled` reach the lm head.
    double linear_flops(int num_tokens, int num_sampled) const;
    // Peak activation bytes per GPU of a step of max_num_tokens tokens and max_num_logits sampled
    // rows (vLLM's profile run), with the fixed non-torch memory.
    int64_t activation_peak_bytes(int max_num_tokens, int max_num_logits) const;

    // The KV cache's element bytes (the cache's type can change by drain-and-rebuild).
    void set_kv_dtype_bytes(double bytes) { kv_dtype_bytes_ = bytes; }
    const GpuSpec& gpu() const { return gpu_; }
    int tensor_parallel_size() const { return tp_; }
    const StepTimeConstants& constants() const { return k_; }
    // "sim-v1", or "sim-v1+calibrated" when a calibration file set the constants.
    std::string version() const;

private:
    ModelConfig m_;
    GpuSpec gpu_;
    int tp_;
    StepTimeConstants k_;
    double weight_dtype_bytes_, kv_dtype_bytes_;
    double layer_params_ = 0;  // linear weights of one layer
    double weight_bytes_ = 0, streamed_weight_bytes_ = 0;
};

}  // namespace kvscope
