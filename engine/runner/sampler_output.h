// What sampling hands the engine for one step (vLLM's SamplerOutput): a token for every scheduled
// request that samples, in the scheduler's order, and its log-probabilities where the request asked;
// with a request's first token, the prompt log-probabilities it asked for.
#pragma once

#include "runner/logprobs.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace kvscope {

struct SamplerOutput {
    std::vector<int32_t> token_ids;
    std::vector<std::optional<TokenLogprobs>> logprobs;  // parallel to token_ids
    // Empty when no row has any, else parallel to token_ids: set once per request, with its first token,
    // when it asked for prompt_logprobs: one entry per prompt token after the first, in prompt order.
    std::vector<std::optional<std::vector<TokenLogprobs>>> prompt_logprobs;
};

}  // namespace kvscope
