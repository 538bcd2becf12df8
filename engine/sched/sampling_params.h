// How a request's tokens are chosen and when it stops (vLLM's SamplingParams). Validated by
// validate() before a request enters the engine; invalid values are rejected with BadInput.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvscope {

struct SamplingParams {
    float temperature = 1.0f;  // 0 = greedy argmax
    float top_p = 1.0f;        // (0, 1]
    int top_k = 0;             // 0 = off
    float min_p = 0.0f;        // [0, 1]
    float repetition_penalty = 1.0f;
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    std::optional<uint64_t> seed;  // per-request generator: same text alone or batched
    int max_tokens = 16;
    int min_tokens = 0;
    std::vector<std::string> stop;       // stop strings (not in the output text unless the flag below)
    std::vector<int32_t> stop_token_ids;
    bool include_stop_str_in_output = false;  // vLLM's: the matched stop string ends the text
    bool ignore_eos = false;
    // OpenAI's logit_bias: (token id, bias in [-100, 100]) added to those logits before sampling.
    std::vector<std::pair<int32_t, float>> logit_bias;
    int n = 1;  // n > 1: siblings that share the prompt's blocks
    // Log-probabilities of each generated token and of its `logprobs` most likely alternatives (0: the
    // token's own only; unset: none), from the raw logits (runner/logprobs.h).
    std::optional<int> logprobs;
    // vLLM's prompt_logprobs: for each prompt token after the first, its log-probability given the tokens
    // before it and the `prompt_logprobs` most likely alternatives there (unset: none). Such a request
    // takes no prefix-cache hits: the logits of cached positions are never computed.
    std::optional<int> prompt_logprobs;

    // Throws BadInput naming the field and value.
    void validate() const;
    // vLLM's _SAMPLING_EPS: a temperature below it samples greedily. Dividing logits by 1e-40 overflowed
    // them to inf, and the softmax of inf - inf is NaN.
    static constexpr float kGreedyTemperature = 1e-5f;
    bool greedy() const { return temperature < kGreedyTemperature; }
};

}  // namespace kvscope
