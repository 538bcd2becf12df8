// Chooses the next token of a request from its logits row: penalties, temperature, top-k, min-p, top-p
// (over what top-k and min-p left, as vLLM), then a draw from the request's own generator (seeded per request, so its text does not depend on
// what else is in the batch). temperature 0 is greedy argmax (lowest index on ties).
// device_sampling_row() says when a backend's device sampler can choose instead (Backend::sample: the
// same filters, its own counter-based draw), so only token ids need to come back.
#pragma once

#include "backend.h"
#include "sched/sampling_params.h"

#include <cstdint>
#include <optional>
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

// The device sampler's settings for a request's next token (output index num_output_tokens, which is the
// draw's offset under the request's seed), or nullopt when only the host can choose it: penalties, or
// EOS and stop tokens still banned by min_tokens.
std::optional<SamplingRow> device_sampling_row(const SamplingParams& p, int num_output_tokens, uint64_t seed);

}  // namespace kvscope
