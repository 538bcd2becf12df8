// The forward pass of a decoder (Llama, Qwen2/3, Phi-3, Gemma 2/3) over one step's varlen batch: every scheduled token of every
// request in one pass (GEMMs over the whole step), K/V written into and read from the paged cache, and
// the sampled rows' logits (or, with a device sampler, their token ids) back to the host.
// Owns the KV cache memory and the activation buffers, sized once for max_num_batched_tokens, so a
// step allocates nothing; and, on a backend with graphs, the CUDA graphs of decode steps. Engine thread only.
//
// CUDA graphs (vLLM's cudagraph capture sizes): a decode-only step of B sequences runs, padded up to the
// next capture size (1, 2, 4, ... up to min(256, the buffers' rows)), as one replayed graph per size (and
// per with/without the device sampler). Padding rows write no KV (slot -1) and never mix with the real
// ones (ModelInput::pad_decode_to). The graph bakes in every pointer and shape, so a captured step reads
// fixed buffers: the step metadata buffers, a fixed-width block-table buffer (ceil(max_model_len /
// block_size) columns), and an attention plan sized for max_model_len (its splits cover any context).
// Each replay refills those buffers with copies on the backend's stream. A size is captured on its first
// step, right after running that step op by op (which grows the backend's scratch to the captured
// shapes). Graphs are dropped whenever what they point at changes: KV cache rebuild, buffer growth,
// graph settings, destruction (a new model means a new runner). Longer steps, prefill chunks and steps
// wider than the largest size run op by op.
#pragma once

#include "backend.h"
#include "kv/kv_cache_manager.h"
#include "model/model.h"
#include "runner/input_batch.h"
#include "runner/model_executor.h"
#include "runner/model_input.h"
#include "sched/scheduler_output.h"

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace kvscope {

// What a step hands back, in host memory valid until the next execute(); rows = input.logits_indices.
struct StepOutput {
    float* logits = nullptr;                     // [rows, vocab] host copy (logits processors modify it);
                                                 // null when no row needed them on the host
    const int32_t* sampled_token_ids = nullptr;  // [rows] from the device sampler; null when it did not run
};

class ModelRunner final : public ModelExecutor {
public:
    // num_blocks x block_size token slots of cache; steps of at most max_num_tokens tokens and
    // max_num_logits sampled rows.
    // max_model_len: the longest context it runs (LongRoPE picks its factors by it; 0 = the model's own).
    ModelRunner(const Model& model, Backend& backend, int num_blocks, int block_size, int max_num_tokens,
                int max_num_logits, DType kv_dtype = DType::F32, int max_model_len = 0);
    ~ModelRunner();
    ModelRunner(const ModelRunner&) = delete;
    ModelRunner& operator=(const ModelRunner&) = delete;

    // One engine step: the scheduler's output as the step's input (tokens, slots, block tables from kv),
    // the forward pass, and a token for every scheduled request that samples, in the scheduler's order
    // (device sampler where it can choose, else the host: InputBatch), with log-probabilities where asked.
    SamplerOutput execute(const SchedulerOutput& out, const KvCacheManager& kv) override;
    // The per-request sampling state (add a request before it is scheduled, remove it when it ends).
    InputBatch& input_batch() { return input_batch_; }
    void add_request(const Request& r, uint64_t seed) override { input_batch_.add_request(r, seed); }
    void remove_request(const std::string& request_id) override { input_batch_.remove_request(request_id); }

    // Runs the model on a prepared input. Logits come back unless the input has sampling rows and
    // !logits_to_host; token ids come back when it has sampling rows (the backend must support sampling).
    StepOutput execute(const ModelInput& input);
    // The raw logits of input.prompt_logits_indices' rows, right after execute(input) (they project its
    // last hidden states): take(first, n, logits [n, vocab]) for consecutive pieces of the rows, each
    // valid only during the call.
    void prompt_logits(const ModelInput& input, const std::function<void(int, int, const float*)>& take);

    // CUDA graphs for decode steps, when the backend supports them (vLLM's default; off = enforce_eager).
    // max_model_len bounds every context, and so the captured block-table width and attention plan.
    void set_cuda_graphs(bool enabled, int max_model_len) override;
    // The padded batch sizes that run as graphs (empty when graphs are off).
    const std::vector<int>& capture_sizes() const { return capture_sizes_; }
    int num_graphs() const;
    int64_t num_graph_replays() const { return num_graph_replays_; }
    // Why the first capture that failed did ("" if none has): its shape then runs op by op.
    const std::string& graph_capture_error() const { return graph_capture_error_; }

    // vLLM's profile run: one step of the largest shape the buffers take (max_num_tokens tokens over
    // max_num_logits sequences, every logits row computed), so that the backend's scratch reaches its
    // peak and device memory in use afterwards is weights + activations + scratch + the KV pool.
    // Replaces the KV pool by one just large enough for it: call reset_kv_cache() afterwards.
    void profile_run() override;
    void check_logits_finite(int32_t token) override;

    // Grows the activation buffers for larger steps (live reconfiguration); never shrinks them.
    void ensure_capacity(int max_num_tokens, int max_num_logits) override;

    // Rebuilds the KV cache for a new geometry (drain-and-rebuild: no request may hold blocks).
    void reset_kv_cache(int num_blocks, int block_size, DType kv_dtype = DType::F32) override;

    const KvCacheLayout& kv_layout() const override { return layout_; }
    size_t kv_cache_bytes() const override { return layout_.total_bytes(); }
    size_t activation_bytes() const override { return activation_bytes_; }
    Backend& backend() { return backend_; }

private:
    // Projections of one input (q, k, v; gate, up) whose weights share a type and a row length, uploaded as one
    // matrix: a single-token step runs them as one matmul (one activation quantization and one dispatch instead
    // of three or two, and one longer weight stream; on 2 threads of the Zen 5, bench-135m's Q8_0 q, k and v took
    // 24 us apart and 14 together), other steps each part on its own rows of that matrix, as before. Either way
    // every output is the same computation (the backends' matmuls are batch invariant and compute each output
    // row from its own weight row), so decode still equals prefill.
    struct MatmulRun {
        WeightView w;                         // the parts' rows one after another (one part: its own weight)
        const float* bias = nullptr;          // [w.rows] or null
        std::vector<WeightView> parts;        // each part's rows of w
        std::vector<const float*> part_bias;  // [parts[i].rows] or null
    };
    // The model's weights as the backend's ops take them (device copies on a GPU backend).
    struct LayerOnDevice {
        const float *attn_norm = nullptr, *ffn_norm = nullptr;
        const float *q_norm = nullptr, *k_norm = nullptr;
        const float *post_attn_norm = nullptr, *post_ffn_norm = nullptr;  // Gemma's sandwich norms
        std::vector<MatmulRun> qkv, gate_up;  // parts q, k, v; gate, up
        WeightView wo, w_down;
    };
    void upload_weights();
    const float* upload_vector(const std::vector<float>* v);  // null for a null or empty vector
    WeightView upload_matmul_weight(const WeightView& w);      // uploaded, then repacked for matmul
    // The runs of parts `ws` (biases: null or empty where none): consecutive parts of one type and row length, all
    // with biases or none, fused.
    std::vector<MatmulRun> upload_projections(const std::vector<const WeightView*>& ws,
                                              const std::vector<const std::vector<float>*>& biases);
    // x [T, w.cols] through every part of `runs` into outs[i] [T, rows of part i]; in a single-token step a fused
    // run writes fused_out_ instead, and outs[i] is set to where part i lies there.
    void project(const float* x, int T, const std::vector<MatmulRun>& runs, float** outs);
    void allocate_activations();
    void free_buffers();
    float* buffer(size_t floats);
    // The step's metadata (and sampling rows) into the device buffers; block tables into `block_tables`.
    void upload_inputs(const ModelInput& in, int32_t* block_tables);
    AttentionMetadata metadata(const ModelInput& in, const int32_t* block_tables, int max_seq_len) const;
    // Every op of the forward pass, from the uploaded inputs to the logits (and sampled ids).
    void forward(const AttentionMetadata& meta, int num_logits, bool sample);
    // The final norm and lm_head (and soft-capping) of the n hidden rows that d_logits_idx_ names,
    // into logits_ [n, vocab]; n <= max_num_logits_.
    void project_rows(int n);
    // The capture size that runs this step as a graph, or 0 to run it op by op.
    int graph_batch_size(const ModelInput& in) const;
    void run_graph(const ModelInput& in, int batch);
    void capture_failed(int batch, bool sample, const std::string& why);
    // Recomputes the capture sizes and the fixed block-table buffer for the current buffers and cache
    // geometry, dropping every graph.
    void configure_graphs();
    void drop_graphs();
    static int graph_key(int batch, bool sample) { return 2 * batch + (sample ? 1 : 0); }

    const Model& model_;
    Backend& backend_;
    KvCacheLayout layout_;
    int max_num_tokens_;
    int max_num_logits_;
    void* kv_cache_ = nullptr;
    std::vector<void*> allocations_;
    size_t activation_bytes_ = 0;
    std::vector<LayerOnDevice> layers_;
    // Host memory of fused weights and biases that the backend reads in place (the CPU backend, where it does not
    // repack a type; its biases).
    std::vector<std::vector<uint8_t>> fused_host_;
    std::vector<std::vector<float>> fused_bias_host_;
    WeightView token_embedding_, lm_head_;
    const float* final_norm_ = nullptr;
    std::vector<float> inv_freq_host_;
    float* inv_freq_ = nullptr;
    std::vector<float> inv_freq_local_host_;  // Gemma 3's windowed layers' own RoPE base; empty otherwise
    float* inv_freq_local_ = nullptr;
    // Activations. T = max_num_tokens, S = max_num_logits.
    float *x_ = nullptr, *xb_ = nullptr;           // [T, hidden]
    float *q_ = nullptr, *att_ = nullptr;          // [T, q_size]
    float *k_ = nullptr, *v_ = nullptr;            // [T, kv_size]
    float *gate_ = nullptr, *up_ = nullptr;        // [T, intermediate]
    float *fused_out_ = nullptr;                   // [max(q_size + 2 kv_size, 2 intermediate)]: fused runs, one token
    float *xs_ = nullptr;                          // [S, hidden]
    float *logits_ = nullptr;                      // [S, vocab]
    // Step metadata on the device.
    int32_t *d_tokens_ = nullptr, *d_positions_ = nullptr, *d_qsl_ = nullptr, *d_seq_lens_ = nullptr;
    int32_t *d_logits_idx_ = nullptr, *d_block_tables_ = nullptr;
    int64_t* d_slots_ = nullptr;
    size_t block_tables_capacity_ = 0;
    SamplingRow* d_sampling_rows_ = nullptr;  // [S]
    int32_t* d_sampled_ = nullptr;            // [S]
    std::vector<float> logits_host_;
    std::vector<float> prompt_logits_host_;  // [S, vocab], allocated at the first prompt_logprobs step
    std::vector<int32_t> sampled_host_;
    InputBatch input_batch_;
    ModelInput step_input_;  // reused: a step allocates nothing
    // CUDA graphs. graphs_: graph_key -> backend graph id, or -1 for a shape that failed to capture (it
    // runs op by op from then on).
    bool graphs_enabled_ = false;
    int graph_max_model_len_ = 0;
    int graph_max_blocks_ = 0;    // block-table width of captured steps
    int graph_max_seq_len_ = 0;   // the context bound their attention plan is made for
    std::vector<int> capture_sizes_;
    std::map<int, int> graphs_;
    int32_t* d_graph_block_tables_ = nullptr;  // [capture_sizes_.back(), graph_max_blocks_]
    ModelInput graph_input_;                   // the padded step, reused
    int64_t num_graph_replays_ = 0;
    std::string graph_capture_error_;
};

}  // namespace kvscope
