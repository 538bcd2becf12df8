// Chooses the next token of a request from its logits row: penalties, temperature, top-k, top-p, min-p,
// then a draw from the request's own generator (seeded per request, so its text does not depend on
// what else is in the batch). temperature 0 is greedy argmax (lowest index on ties).
#pragma once

#include "sched/sampling_params.h"

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace kvscope {

class Sampler {
public:
    // logits: [vocab], modified in place. output_tokens: the request's generated tokens so far (for
    // penalties); prompt_tokens: for the repetition penalty, which also covers the prompt (as in vLLM).
    int32_t sample(std::span<float> logits, const SamplingParams& p, std::span<const int32_t> prompt_tokens,
                   std::span<const int32_t> output_tokens, std::mt19937_64& rng);

private:
    std::vector<std::pair<float, int32_t>> candidates_;  // reused between calls
    std::vector<int32_t> counts_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace kvscope
