// InputBatch (vLLM's name for the model runner's persistent batch state): what the runner keeps per
// request from its admission to its end (the seed and the host generator of its draws), how a
// scheduler output becomes the step's ModelInput, and how each sampled row gets its token: on the
// device when the backend's sampler can choose it, else on the host, with the logits processors that
// only the host has (EOS and stop tokens banned until min_tokens, logit_bias) before the Sampler.
// It also keeps each prompt_logprobs request's prompt log-probabilities until its first token carries
// them out (once: a recompute after preemption neither repeats nor recomputes them).
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
    // naive mode, a device sampling row per sampled request when the backend samples, and the rows
    // whose logits give prompt log-probabilities not computed yet.
    void prepare(const SchedulerOutput& out, const KvCacheManager& kv, bool device_sampling, ModelInput& input);
    // The raw logits of prompt rows [first, first + n) of the prepared step (logits: [n, vocab]) become
    // their requests' prompt log-probabilities.
    void add_prompt_logits(int first, int n, const float* logits, int vocab);
    // One token per scheduled request that samples this step, in the scheduler's order, with its
    // log-probabilities where asked (and, with a request's first token, its prompt's). step holds the
    // device's choices and/or the logits ([rows, vocab], modified in place by the host processors once
    // the log-probabilities have been taken).
    SamplerOutput sample(const SchedulerOutput& out, const StepOutput& step, int vocab);

private:
    struct State {
        uint64_t seed = 0;
        std::mt19937_64 rng;  // the host sampler's draws
        // prompt_logprobs: entries for prompt tokens 1..size() (position p's logits give token p + 1),
        // computed chunk by chunk; sent with the first token, then never computed again.
        std::vector<TokenLogprobs> prompt_logprobs;
        bool prompt_logprobs_sent = false;
    };
    // One row of the prepared step's prompt_logits_indices: whose it is and which token it scores.
    struct PromptRow {
        State* state = nullptr;
        int32_t token_id = -1;
        int num_top = 0;
    };

    // The rows of s's chunk whose logits score prompt tokens that have no log-probability yet.
    void add_prompt_rows(const ScheduledRequest& s, ModelInput& input);

    const Tokenizer& tokenizer_;
    std::map<std::string, State> states_;
    Sampler sampler_;
    std::vector<float> raw_;  // the raw logits row of a request that asked for logprobs
    std::vector<PromptRow> prompt_rows_;  // parallel to the prepared step's prompt_logits_indices
};

}  // namespace kvscope
