// What sampling hands the engine for one step (vLLM's SamplerOutput): a token for every scheduled
// request that samples, in the scheduler's order, and its log-probabilities where the request asked.
#pragma once

#include "runner/logprobs.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace kvscope {

struct SamplerOutput {
    std::vector<int32_t> token_ids;
    std::vector<std::optional<TokenLogprobs>> logprobs;  // parallel to token_ids
};

}  // namespace kvscope
