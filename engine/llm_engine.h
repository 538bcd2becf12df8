// LlmEngine: the continuous-batching inference engine (vLLM's EngineCore). Owns the requests, the KV
// cache manager, the scheduler, the model runner and the output processor; step() schedules, runs one
// forward pass over all scheduled tokens and samples (the runner), turns the tokens into outputs (the
// output processor) and records the step. Knobs change between steps; block_size, the KV budget
// and the mode change by drain-and-rebuild (every request is preempted, the pool rebuilt, and the
// requests resume by recompute: none is lost). With a simulated backend (config.backend SIM) the model
// executor is a SimModelRunner and the engine's clock is virtual: everything else runs as it does on
// a real device. Single-threaded: call it from one thread only.
#pragma once

#include "backend.h"
#include "engine_clock.h"
#include "engine_config.h"
#include "kv/kv_cache_manager.h"
#include "metrics/metrics_sink.h"
#include "model/model.h"
#include "output_processor.h"
#include "runner/model_executor.h"
#include "runner/model_runner.h"
#include "sched/scheduler.h"

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kvscope {

class SimModelRunner;

struct NewRequest {
    std::string request_id;  // "" = generated
    std::vector<int32_t> prompt_token_ids;
    SamplingParams sampling_params;
    int priority = 0;
    std::string cache_salt;
};

// A value snapshot of one request, for the UI and the server.
struct RequestInfo {
    std::string request_id;
    RequestStatus status = RequestStatus::WAITING;
    FinishReason finish_reason = FinishReason::NONE;
    int num_prompt_tokens = 0;
    int num_output_tokens = 0;
    int num_computed_tokens = 0;
    int num_cached_tokens = 0;
    int num_preemptions = 0;
    int priority = 0;
    std::vector<int32_t> block_table;
};

class LlmEngine {
public:
    // backend: null = a CPU backend with config.num_threads threads. Throws BadInput for a bad config.
    LlmEngine(std::shared_ptr<const Model> model, const EngineConfig& config, std::unique_ptr<Backend> backend = nullptr);
    ~LlmEngine();

    // Validates and queues a request; returns its id (with n > 1: ids "<id>-0".."<id>-<n-1>", one per
    // sample). Throws BadInput naming the problem; the engine and other requests are unaffected.
    std::vector<std::string> add_request(NewRequest request);
    // Finishes a request with reason abort and frees its blocks. False when unknown or finished.
    bool abort_request(const std::string& request_id);
    std::vector<RequestOutput> step();
    bool has_unfinished_requests() const;
    // A rebuild (or aborts) that no step has reported yet: the next step() reports it in StepStats::event, with nothing
    // to run too (then it computes nothing and only records the state and the event at its time).
    bool has_pending_event() const { return !pending_event_.empty() || num_aborted_since_step_ > 0; }

    // Applies a new configuration between steps, as a transaction. Scheduler knobs apply at the next
    // step; a change of block_size, KV budget, block count, KV type, prefix caching or mode drains and
    // rebuilds the pool. Throws BadInput, and changes nothing, when the new configuration is invalid or
    // its pool could not hold every unfinished request.
    void reconfigure(const EngineConfig& config);

    void set_metrics_sink(MetricsSink* sink) { sink_ = sink; }
    const EngineConfig& config() const { return config_; }
    // config() as it runs: the pool's block count (0 asked for as many as the memory holds) and the cache type
    // "auto" resolved to. What a result reports (bench, the GUI's runs and session export).
    EngineConfig resolved_config() const;
    const Model& model() const { return *model_; }
    const KvCacheManager& kv_cache_manager() const { return *kv_; }
    const Scheduler& scheduler() const { return *scheduler_; }
    // Preemptions since the engine was built, over every rebuild (a rebuild's drain preempts what runs).
    int64_t num_preemptions() const { return preemptions_before_rebuild_ + scheduler_->num_preemptions(); }
    Backend& backend() { return *backend_; }
    const ModelExecutor& executor() const { return *runner_; }
    // The real model runner; throws std::bad_cast on a simulated backend.
    const ModelRunner& model_runner() const { return dynamic_cast<const ModelRunner&>(*runner_); }
    // The simulated model runner, or null on a real backend.
    const SimModelRunner* sim_model_runner() const;
    bool is_simulated() const { return config_.backend == BackendKind::SIM; }
    // What every output of a simulated run says: "simulated NVIDIA H100 SXM 80GB, dummy:llama-3-8b,
    // step-time model sim-v1" (with "x N" for tensor parallelism); "" on a real backend.
    std::string simulation_label() const;
    std::optional<RequestInfo> request_info(const std::string& request_id) const;
    std::optional<RequestMetrics> request_metrics(const std::string& request_id) const;
    std::vector<int32_t> request_output_token_ids(const std::string& request_id) const;
    std::vector<RequestInfo> active_requests() const;
    MemoryStats memory_stats() const;
    // Monotonic seconds since the engine started (the time base of every metric); virtual seconds
    // on a simulated backend.
    double now() const { return clock_.now(); }
    // Nothing to do until engine time t: sleeps on a real backend, jumps there on a simulated one.
    void wait_until(double t) { clock_.wait_until(t); }
    // Simulated seconds per wall second (simulated backends; 0 = as fast as the host allows).
    void set_sim_pace(double pace) { clock_.set_pace(pace); }
    int64_t num_steps() const { return num_steps_; }
    int num_blocks() const { return kv_->num_blocks(); }
    // The element type the KV cache holds (config().kv_cache_dtype resolved for this model and backend).
    DType kv_cache_dtype() const { return runner_->kv_layout().kv_dtype; }

    // Forgets finished requests (their metrics were delivered to the sink).
    void release_finished();

private:
    struct RequestState {
        std::unique_ptr<Request> request;
        RequestMetrics metrics;
    };

    DType resolve_kv_dtype(const EngineConfig& config) const;
    int compute_num_blocks(const EngineConfig& config, DType kv_dtype) const;
    // On a backend with device memory: the bytes gpu_memory_utilization leaves for the KV pool once the
    // runner's profile run has brought weights, activations and scratch to their peak. Throws BadInput when
    // that cannot hold one max_model_len request, or an explicit kv_cache_memory exceeds free memory.
    int64_t device_kv_budget(const EngineConfig& config, DType kv_dtype) const;
    void build_pool(const EngineConfig& config);
    // The real ModelRunner, or a SimModelRunner on a simulated backend.
    std::unique_ptr<ModelExecutor> make_executor(const EngineConfig& config, int num_blocks, DType kv_dtype);
    int64_t device_kv_budget_ = 0;  // 0: no device memory, or not measured
    std::unique_ptr<Scheduler> make_scheduler(const EngineConfig& config);
    void validate_request(const NewRequest& r) const;
    // Throws BadInput when a request of this length could never run in a pool of num_blocks under c.
    // Throws BadInput in naive mode when the pool holds less than one request's max_model_len reservation.
    void check_naive_pool(const EngineConfig& c, int num_blocks, const char* context) const;
    void check_fits_pool(const std::string& id, int prompt_len, int max_tokens, const EngineConfig& c, int num_blocks,
                         const char* context) const;
    // The step's timestamps on every scheduled request (first scheduled, prefill chunks, preemptions).
    void note_scheduled(const SchedulerOutput& out, double start);
    // Every sampled token through the output processor; finishes the requests that end.
    std::vector<RequestOutput> process_outputs(const SchedulerOutput& out, const SamplerOutput& sampled);
    void finish(RequestState& st, FinishReason reason);
    void emit_step_stats(const SchedulerOutput& out, const StepWorkSummary& work, double start, int num_finished,
                         const std::string& event);

    std::shared_ptr<const Model> model_;
    EngineConfig config_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<KvCacheManager> kv_;
    std::unique_ptr<Scheduler> scheduler_;
    int64_t preemptions_before_rebuild_ = 0;  // by the schedulers that rebuilds replaced
    std::unique_ptr<ModelExecutor> runner_;
    OutputProcessor output_processor_;
    std::map<std::string, RequestState> requests_;
    MetricsSink* sink_ = nullptr;
    EngineClock clock_;
    uint64_t next_arrival_seq_ = 0;
    uint64_t next_request_id_ = 0;
    int64_t num_steps_ = 0;
    std::string pending_event_;
    int pending_preemptions_ = 0;  // a rebuild's drain, counted in the next step's num_preemptions
    // Requests aborted since the last step: the next step's event says so, and an idle engine steps once
    // (has_pending_event) so that the timeline ends with the blocks they freed, as the block map shows.
    int num_aborted_since_step_ = 0;
    std::mt19937_64 seed_rng_;
};

}  // namespace kvscope
