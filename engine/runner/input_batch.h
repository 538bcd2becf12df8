// InputBatch (vLLM's name for the model runner's persistent batch state): what the runner keeps per
// request from its admission to its end (the seed and the host generator of its draws), how a
// scheduler output becomes the step's ModelInput, and how each sampled row gets its token: on the
// device when the backend's sampler can choose it, else on the host, with the logits processors that
// only the host has (EOS and stop tokens banned until min_tokens, logit_bias) before the Sampler.
// Engine thread only.
#pragma once

#include "kv/kv_cache_manager.h"
#include "model/tokenizer.h"
#include "runner/model_input.h"
#include "runner/sampler.h"
#include "runner/sampler_output.h"
#include "sched/request.h"
#include "sched/scheduler_output.h"

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace kvscope {

struct StepOutput;

class InputBatch {
public:
    explicit InputBatch(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

    // seed: the request's draws (its own seed, or one the engine drew for it).
    void add_request(const Request& r, uint64_t seed);
    void remove_request(const std::string& request_id);

    // The step's input: every scheduled token with its slot, the block tables, the padding rows of
    // naive mode, and a device sampling row per sampled request when the backend samples.
    void prepare(const SchedulerOutput& out, const KvCacheManager& kv, bool device_sampling, ModelInput& input) const;
    // One token per scheduled request that samples this step, in the scheduler's order, with its
    // log-probabilities where asked. step holds the device's choices and/or the logits ([rows, vocab],
    // modified in place by the host processors once the log-probabilities have been taken).
    SamplerOutput sample(const SchedulerOutput& out, const StepOutput& step, int vocab);

private:
    struct State {
        uint64_t seed = 0;
        std::mt19937_64 rng;  // the host sampler's draws
    };

    const Tokenizer& tokenizer_;
    std::map<std::string, State> states_;
    Sampler sampler_;
    std::vector<float> raw_;  // the raw logits row of a request that asked for logprobs
};

}  // namespace kvscope
