// SimModelRunner: the model executor of the sim backend. It allocates no weights and no KV memory; a
// step's forward pass becomes the StepTimeModel's prediction for the step's work (read from the
// scheduler output and the block tables), by which it advances the engine's virtual clock, and its
// tokens come from a seeded generator per request: printable bytes until a drawn stop length
// (exponential, mean kMeanStopLength tokens) ends it with EOS, unless ignore_eos; min_tokens holds EOS
// back, and max_tokens and stop tokens end requests in the output processor as with a real model.
// Engine thread only.
#pragma once

#include "engine_clock.h"
#include "model/model.h"
#include "runner/model_executor.h"
#include "sim/sim_backend.h"
#include "sim/step_time_model.h"

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace kvscope {

inline constexpr double kMeanStopLength = 256;  // tokens a request generates on average before EOS

// The work of one scheduled step as the step-time model counts it.
StepWork step_work(const SchedulerOutput& out, int block_size);

class SimModelRunner final : public ModelExecutor {
public:
    SimModelRunner(const Model& model, SimBackend& backend, EngineClock& clock, StepTimeModel step_time_model,
                   int num_blocks, int block_size, int max_num_tokens, int max_num_logits, DType kv_dtype);

    void add_request(const Request& r, uint64_t seed) override;
    void remove_request(const std::string& request_id) override;
    SamplerOutput execute(const SchedulerOutput& out, const KvCacheManager& kv) override;
    void profile_run() override {}  // the activation peak is predicted, not measured
    void ensure_capacity(int max_num_tokens, int max_num_logits) override;
    void reset_kv_cache(int num_blocks, int block_size, DType kv_dtype) override;
    void set_cuda_graphs(bool, int) override {}  // the overhead constants assume graphs, as vLLM's default

    const KvCacheLayout& kv_layout() const override { return layout_; }
    size_t kv_cache_bytes() const override { return layout_.total_bytes(); }
    size_t activation_bytes() const override { return static_cast<size_t>(activation_bytes_); }

    const StepTimeModel& step_time_model() const { return step_time_; }
    // The last step's prediction, and the simulated seconds of every step so far.
    const StepTime& last_step_time() const { return last_; }
    double busy_seconds() const { return busy_seconds_; }

private:
    struct Stream {
        std::mt19937_64 rng;
        int stop_length = 0;  // output tokens after which EOS comes (unless ignore_eos)
    };
    int32_t next_token(const Request& r);
    void update_memory();

    const Model& model_;
    SimBackend& backend_;
    EngineClock& clock_;
    StepTimeModel step_time_;
    KvCacheLayout layout_;
    int max_num_tokens_ = 0, max_num_logits_ = 0;
    int64_t activation_bytes_ = 0;  // over the whole tensor-parallel group, like the weights and the KV pool
    std::map<std::string, Stream> streams_;
    StepTime last_;
    double busy_seconds_ = 0;
};

}  // namespace kvscope
