// Log-probabilities of a sampled token and of the most likely alternatives (OpenAI's logprobs and
// top_logprobs, vLLM's Logprob). They come from the raw logits, log_softmax before penalties, logit
// bias, temperature or the top-k/top-p filters (vLLM's default logprobs_mode, raw_logprobs), so that
// they say what the model thinks, and two engines can be compared on the same file.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace kvscope {

struct TokenLogprobs {
    int32_t token_id = -1;
    float logprob = 0;
    int rank = 0;                                // 1 = the most likely token (ties share the better rank)
    std::vector<std::pair<int32_t, float>> top;  // the num_top most likely (id, logprob), best first,
                                                 // equal values by lower id
};

// logits: [vocab] raw row. num_top in [0, vocab].
TokenLogprobs compute_logprobs(std::span<const float> logits, int32_t token_id, int num_top);

// The largest num_top asked for (OpenAI caps top_logprobs at 20; vLLM's max_logprobs default is 20).
inline constexpr int kMaxLogprobs = 20;

}  // namespace kvscope
