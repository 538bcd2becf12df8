#include "sched/sampling_params.h"

#include "runner/logprobs.h"
#include "util/errors.h"

#include <cmath>

namespace kvscope {

void SamplingParams::validate() const {
    auto bad = [](const std::string& what) { throw BadInput("invalid sampling parameter: " + what); };
    if (!(temperature >= 0) || !std::isfinite(temperature)) bad("temperature must be a finite number >= 0, got " + std::to_string(temperature));
    if (!(top_p > 0 && top_p <= 1)) bad("top_p must be in (0, 1], got " + std::to_string(top_p));
    if (top_k < 0) bad("top_k must be >= 0 (0 = off), got " + std::to_string(top_k));
    if (!(min_p >= 0 && min_p <= 1)) bad("min_p must be in [0, 1], got " + std::to_string(min_p));
    if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty))
        bad("repetition_penalty must be a finite number > 0, got " + std::to_string(repetition_penalty));
    if (!std::isfinite(presence_penalty) || presence_penalty < -2 || presence_penalty > 2)
        bad("presence_penalty must be in [-2, 2], got " + std::to_string(presence_penalty));
    if (!std::isfinite(frequency_penalty) || frequency_penalty < -2 || frequency_penalty > 2)
        bad("frequency_penalty must be in [-2, 2], got " + std::to_string(frequency_penalty));
    if (max_tokens < 1) bad("max_tokens must be >= 1, got " + std::to_string(max_tokens));
    if (min_tokens < 0 || min_tokens > max_tokens)
        bad("min_tokens must be in [0, max_tokens], got " + std::to_string(min_tokens));
    if (n < 1 || n > 64) bad("n must be in [1, 64], got " + std::to_string(n));
    if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs))
        bad("logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(*logprobs));
    if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > kMaxLogprobs))
        bad("prompt_logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(*prompt_logprobs));
    for (const auto& s : stop)
        if (s.empty()) bad("stop strings must not be empty");
    for (const auto& [id, bias] : logit_bias)
        if (!std::isfinite(bias) || bias < -100 || bias > 100)
            bad("logit_bias for token " + std::to_string(id) + " must be in [-100, 100], got " + std::to_string(bias));
}

}  // namespace kvscope
