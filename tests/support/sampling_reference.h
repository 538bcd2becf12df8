// The host sampler's filters (engine/runner/sampler.cpp) over one row of logits, as the reference of
// Backend::sample: the structural cases of tests/kernels/test_backend_ops.cpp and the frequency checks of
// tests/gpu/test_cuda_backend_ops.cpp.
#pragma once

#include "backend.h"
#include "cpu/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace kvscope::test {

// Each token's probability after temperature, top-k, min-p and top-p, renormalized over the survivors
// (0 = filtered out). `slack` widens the min-p and top-p boundaries, so the set is a superset of a
// device's (float sums).
inline std::vector<double> filtered_probs(const float* logits, int vocab, const SamplingRow& p, double slack = 0) {
    std::vector<double> probs(vocab, 0.0);
    if (p.temperature == 0) {
        int32_t best = 0;
        cpu::argmax_ref(logits, 1, vocab, &best);
        probs[best] = 1;
        return probs;
    }
    std::vector<std::pair<float, int>> c;
    for (int t = 0; t < vocab; ++t) c.emplace_back(logits[t] / p.temperature, t);
    std::sort(c.begin(), c.end(),
              [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    if (p.top_k > 0 && p.top_k < vocab) c.resize(p.top_k);
    std::vector<double> w(c.size());
    double sum = 0;
    for (size_t i = 0; i < c.size(); ++i) sum += (w[i] = std::exp(static_cast<double>(c[i].first) - c[0].first));
    for (double& x : w) x /= sum;
    size_t keep = c.size();
    if (p.min_p > 0)
        while (keep > 1 && w[keep - 1] < p.min_p * w[0] * (1 - slack)) --keep;
    if (p.top_p < 1) {  // of the mass that top-k and min-p left
        double left = 0;
        for (size_t i = 0; i < keep; ++i) left += w[i];
        double mass = 0;
        size_t n = 0;
        while (n < keep) {
            mass += w[n++];
            if (mass >= (p.top_p + slack) * left) break;
        }
        keep = std::max<size_t>(n, 1);
    }
    double total = 0;
    for (size_t i = 0; i < keep; ++i) total += w[i];
    for (size_t i = 0; i < keep; ++i) probs[c[i].second] = w[i] / total;
    return probs;
}

inline SamplingRow sampling_row(float temperature, int top_k, float top_p, float min_p, uint64_t seed, uint64_t offset) {
    SamplingRow r;
    r.temperature = temperature;
    r.top_k = top_k;
    r.top_p = top_p;
    r.min_p = min_p;
    r.seed = seed;
    r.offset = offset;
    return r;
}

}  // namespace kvscope::test
