// A graph-capable backend on the CPU, for testing the model runner's CUDA-graph logic without a GPU: it
// forwards every op to a CpuBackend, except that between begin_capture() and end_capture() it records
// each call with its arguments by value (as a CUDA graph bakes in pointers and shapes) instead of running
// it, and replay() runs a recording. Like a CUDA capture it refuses copies and allocations while
// recording. A runner that let a captured pointer go stale, padded a step wrongly or kept a graph past a
// KV cache rebuild produces different tokens here. Optionally a stand-in device sampler: the host
// Sampler with a generator seeded from (seed, offset) alone, as the device's counter-based draw is, so
// the engine's split between device-sampled and host-sampled rows can be tested. fail_captures() makes
// captures fail the two ways a CUDA capture can: an op that cannot be recorded throws, or the finished
// recording cannot be instantiated. set_device_memory() makes it a device of that many bytes: weights,
// vectors and allocations count as used (plus a fixed context), for the engine's KV sizing from device
// memory (gpu_memory_utilization).
#pragma once

#include "cpu/cpu_kernel_sets.h"
#include "runner/sampler.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <vector>

namespace kvscope::test {

class RecordingBackend final : public Backend {
public:
    explicit RecordingBackend(int threads = 2, bool device_sampler = false)
        : cpu_(cpu::make_cpu_backend(threads)), device_sampler_(device_sampler) {}

    std::string name() const override { return "recording-cpu"; }
    std::string kernel_set() const override { return cpu_->kernel_set(); }
    bool supports(DType t) const override { return cpu_->supports(t); }
    // Head sizes whose attention it runs, as the CUDA backend's compiled kernels (empty: any).
    void set_attention_head_dims(std::vector<int> dims) { head_dims_ = std::move(dims); }
    bool supports_attention(int head_dim, int, int) const override {
        return head_dims_.empty() || std::find(head_dims_.begin(), head_dims_.end(), head_dim) != head_dims_.end();
    }
    int num_threads() const override { return cpu_->num_threads(); }

    void* allocate(size_t bytes) override {
        refuse_while_capturing("allocate");
        void* p = cpu_->allocate(bytes);
        allocated_[p] = static_cast<int64_t>(bytes);
        used_ += static_cast<int64_t>(bytes);
        peak_used_ = std::max(peak_used_, used_);
        return p;
    }
    void deallocate(void* ptr) override {
        refuse_while_capturing("deallocate");
        if (const auto it = allocated_.find(ptr); it != allocated_.end()) {
            used_ -= it->second;
            allocated_.erase(it);
        }
        cpu_->deallocate(ptr);
    }
    static constexpr int64_t kContextBytes = 8 << 20;  // what a CUDA context and cuBLAS hold before any use
    void set_device_memory(int64_t total) { device_total_ = total; }
    void device_memory(int64_t& total, int64_t& used) const override {
        total = device_total_;
        used = device_total_ ? kContextBytes + used_ : 0;
    }
    int64_t peak_used() const { return kContextBytes + peak_used_; }
    void copy_to_device(void* dst, const void* src, size_t bytes) override {
        refuse_while_capturing("copy_to_device");
        cpu_->copy_to_device(dst, src, bytes);
    }
    void copy_to_host(void* dst, const void* src, size_t bytes) override {
        refuse_while_capturing("copy_to_host");
        cpu_->copy_to_host(dst, src, bytes);
    }
    WeightView upload_weight(const WeightView& w) override {
        used_ += dtype_row_bytes(w.dtype, w.cols) * w.rows;
        return cpu_->upload_weight(w);
    }
    const float* upload_vector(const float* data, size_t n) override {
        used_ += static_cast<int64_t>(n * sizeof(float));
        return cpu_->upload_vector(data, n);
    }

    void embedding(const WeightView& table, const int32_t* ids, int n, float* out) override {
        run([this, table, ids, n, out] { cpu_->embedding(table, ids, n, out); });
    }
    void rms_norm(const float* x, const float* weight, int n, int dim, float eps, float* out) override {
        run([this, x, weight, n, dim, eps, out] { cpu_->rms_norm(x, weight, n, dim, eps, out); });
    }
    void matmul(const float* x, int n, const WeightView& w, const float* bias, float* out) override {
        run([this, x, n, w, bias, out] { cpu_->matmul(x, n, w, bias, out); });
    }
    void rope(float* q, float* k, const int32_t* positions, int n, int num_heads, int num_kv_heads,
              const RopeParams& p) override {
        run([this, q, k, positions, n, num_heads, num_kv_heads, p] { cpu_->rope(q, k, positions, n, num_heads, num_kv_heads, p); });
    }
    void write_kv(const float* k, const float* v, const int64_t* slot_mapping, int n, const KvCacheLayout& layout,
                  void* kv_cache, int layer) override {
        run([this, k, v, slot_mapping, n, layout, kv_cache, layer] {
            cpu_->write_kv(k, v, slot_mapping, n, layout, kv_cache, layer);
        });
    }
    void paged_attention(const float* q, const AttentionMetadata& meta, const KvCacheLayout& layout,
                         const void* kv_cache, int layer, int num_heads, const AttentionParams& params,
                         float* out) override {
        run([this, q, meta, layout, kv_cache, layer, num_heads, params, out] {
            cpu_->paged_attention(q, meta, layout, kv_cache, layer, num_heads, params, out);
        });
    }
    void silu_mul(const float* gate, const float* up, int64_t n, float* out) override {
        run([this, gate, up, n, out] { cpu_->silu_mul(gate, up, n, out); });
    }
    void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) override {
        run([this, gate, up, n, out] { cpu_->gelu_tanh_mul(gate, up, n, out); });
    }
    void scale(float* x, int64_t n, float s) override {
        run([this, x, n, s] { cpu_->scale(x, n, s); });
    }
    void softcap(float* x, int64_t n, float cap) override {
        run([this, x, n, cap] { cpu_->softcap(x, n, cap); });
    }
    void add(float* x, const float* y, int64_t n) override {
        run([this, x, y, n] { cpu_->add(x, y, n); });
    }
    void argmax(const float* logits, int n, int vocab, int32_t* out) override {
        run([this, logits, n, vocab, out] { cpu_->argmax(logits, n, vocab, out); });
    }
    void gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out) override {
        run([this, x, rows, n, dim, out] { cpu_->gather_rows(x, rows, n, dim, out); });
    }

    bool supports_sampling() const override { return device_sampler_; }
    void sample(const float* logits, int n, int vocab, const SamplingRow* rows, int32_t* out) override {
        run([this, logits, n, vocab, rows, out] {
            for (int i = 0; i < n; ++i) {
                const SamplingRow& r = rows[i];
                SamplingParams p;
                p.temperature = r.temperature;
                p.top_k = r.top_k;
                p.top_p = r.top_p;
                p.min_p = r.min_p;
                std::vector<float> row(logits + static_cast<size_t>(i) * vocab, logits + static_cast<size_t>(i + 1) * vocab);
                std::mt19937_64 rng(r.seed * 0x9E3779B97F4A7C15ull + r.offset);
                out[i] = sampler_.sample(row, p, {}, {}, rng);
            }
            ++num_sampled_steps_;
        });
    }
    int num_sampled_steps() const { return num_sampled_steps_; }

    enum class CaptureFailure { none, op_throws, not_instantiable };
    void fail_captures(CaptureFailure f) { capture_failure_ = f; }

    bool supports_graphs() const override { return true; }
    void begin_capture() override {
        if (capturing_) throw std::logic_error("RecordingBackend: a capture is already open");
        capturing_ = true;
        recording_.clear();
        ++num_capture_attempts_;
    }
    int end_capture() override {
        if (!capturing_) throw std::logic_error("RecordingBackend: no capture is open");
        capturing_ = false;
        if (capture_failure_ == CaptureFailure::not_instantiable) {
            recording_.clear();
            capture_error_ = "RecordingBackend: the recording cannot be instantiated";
            return -1;
        }
        capture_error_.clear();
        graphs_[next_graph_] = std::move(recording_);
        recording_.clear();
        ++num_captures_;
        return next_graph_++;
    }
    void replay(int graph) override {
        const auto it = graphs_.find(graph);
        if (it == graphs_.end()) throw std::invalid_argument("RecordingBackend: no graph " + std::to_string(graph));
        for (const auto& op : it->second) op();
        ++num_replays_;
    }
    void destroy_graph(int graph) override { graphs_.erase(graph); }
    std::string last_capture_error() const override { return capture_error_; }

    int num_graphs() const { return static_cast<int>(graphs_.size()); }
    int num_captures() const { return num_captures_; }
    int num_capture_attempts() const { return num_capture_attempts_; }
    int num_replays() const { return num_replays_; }

private:
    template <class Op>
    void run(Op op) {
        if (capturing_ && capture_failure_ == CaptureFailure::op_throws)
            throw std::runtime_error("RecordingBackend: this op cannot be captured");
        if (capturing_) recording_.emplace_back(std::move(op));
        else op();
    }
    void refuse_while_capturing(const char* what) const {
        if (capturing_) throw std::logic_error(std::string("RecordingBackend: ") + what + " during a capture");
    }

    std::unique_ptr<Backend> cpu_;  // a CpuBackend of the chosen kernel set
    bool device_sampler_ = false;
    Sampler sampler_;
    int num_sampled_steps_ = 0;
    bool capturing_ = false;
    std::vector<std::function<void()>> recording_;
    std::map<int, std::vector<std::function<void()>>> graphs_;
    int next_graph_ = 0;
    int num_captures_ = 0, num_replays_ = 0, num_capture_attempts_ = 0;
    CaptureFailure capture_failure_ = CaptureFailure::none;
    int64_t device_total_ = 0, used_ = 0, peak_used_ = 0;
    std::map<void*, int64_t> allocated_;
    std::vector<int> head_dims_;
    std::string capture_error_;
};

}  // namespace kvscope::test
