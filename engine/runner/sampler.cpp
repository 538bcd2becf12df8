#include "runner/sampler.h"

#include <algorithm>
#include <cmath>

namespace kvscope {

int32_t argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::optional<SamplingRow> device_sampling_row(const SamplingParams& p, int num_output_tokens, uint64_t seed) {
    if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) return std::nullopt;
    if (num_output_tokens < p.min_tokens || !p.logit_bias.empty()) return std::nullopt;
    SamplingRow row;
    row.temperature = p.greedy() ? 0.0f : p.temperature;
    row.top_k = p.top_k;
    row.top_p = p.top_p;
    row.min_p = p.min_p;
    row.seed = seed;
    row.offset = static_cast<uint64_t>(num_output_tokens);
    return row;
}

int32_t Sampler::sample(std::span<float> logits, const SamplingParams& p, std::span<const int32_t> prompt_tokens,
                        std::span<const int32_t> output_tokens, std::mt19937_64& rng) {
    const int vocab = static_cast<int>(logits.size());
    // Penalties (vLLM semantics): repetition over prompt + output, presence/frequency over output.
    if (p.repetition_penalty != 1.0f) {
        auto penalize = [&](int32_t t) {
            if (t < 0 || t >= vocab) return;
            float& l = logits[t];
            l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
        };
        std::vector<bool> seen(vocab, false);
        for (auto ts : {prompt_tokens, output_tokens})
            for (int32_t t : ts)
                if (t >= 0 && t < vocab && !seen[t]) {
                    seen[t] = true;
                    penalize(t);
                }
    }
    if (p.presence_penalty != 0 || p.frequency_penalty != 0) {
        counts_.assign(vocab, 0);
        for (int32_t t : output_tokens)
            if (t >= 0 && t < vocab) ++counts_[t];
        for (int t = 0; t < vocab; ++t)
            if (counts_[t]) logits[t] -= p.frequency_penalty * counts_[t] + p.presence_penalty;
    }
    if (p.greedy()) return argmax(logits);

    candidates_.clear();
    for (int t = 0; t < vocab; ++t) candidates_.emplace_back(logits[t] / p.temperature, t);
    auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
    size_t keep = candidates_.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
        std::partial_sort(candidates_.begin(), candidates_.begin() + p.top_k, candidates_.end(), by_logit);
        keep = p.top_k;
    } else {
        std::sort(candidates_.begin(), candidates_.end(), by_logit);
    }
    candidates_.resize(keep);
    const float max_logit = candidates_.front().first;
    double sum = 0;
    for (auto& c : candidates_) sum += (c.first = std::exp(c.first - max_logit));
    for (auto& c : candidates_) c.first = static_cast<float>(c.first / sum);
    // min_p: drop tokens less likely than min_p x the most likely one.
    if (p.min_p > 0) {
        const float floor = p.min_p * candidates_.front().first;
        while (candidates_.size() > 1 && candidates_.back().first < floor) candidates_.pop_back();
    }
    double total = 0;
    for (const auto& c : candidates_) total += c.first;
    // top_p: the smallest prefix whose mass reaches top_p of what top-k and min-p left (vLLM renormalizes
    // over those survivors before its nucleus).
    if (p.top_p < 1.0f) {
        double mass = 0;
        size_t n = 0;
        while (n < candidates_.size()) {
            mass += candidates_[n++].first;
            if (mass >= p.top_p * total) break;
        }
        candidates_.resize(std::max<size_t>(n, 1));
        total = mass;
    }
    const double u = std::uniform_real_distribution<double>(0.0, total)(rng);
    double acc = 0;
    for (const auto& c : candidates_) {
        acc += c.first;
        if (u < acc) return c.second;
    }
    return candidates_.back().second;
}

}  // namespace kvscope
