#include "runner/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvscope {

TokenLogprobs compute_logprobs(std::span<const float> logits, int32_t token_id, int num_top) {
    const int vocab = static_cast<int>(logits.size());
    float max = -std::numeric_limits<float>::infinity();
    for (float l : logits) max = std::max(max, l);
    // log_softmax(x)_i = x_i - max - log(sum exp(x_j - max)); the sum in double so that a 150k
    // vocabulary loses nothing to rounding.
    double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
    const double lse = max + std::log(sum);
    auto logprob = [&](int32_t i) { return static_cast<float>(logits[i] - lse); };

    TokenLogprobs out;
    out.token_id = token_id;
    out.logprob = logprob(token_id);
    const float own = logits[token_id];
    out.rank = 1 + static_cast<int>(std::count_if(logits.begin(), logits.end(), [&](float l) { return l > own; }));

    // Best num_top by a min-heap of (value, -id): the worst kept candidate sits on top.
    num_top = std::clamp(num_top, 0, vocab);
    using Entry = std::pair<float, int32_t>;  // (logit, -id): larger is better, lower id wins ties
    std::vector<Entry> heap;
    heap.reserve(num_top + 1);
    auto worse = [](const Entry& a, const Entry& b) { return a > b; };
    for (int32_t i = 0; i < vocab && num_top > 0; ++i) {
        const Entry e{logits[i], -i};
        if (static_cast<int>(heap.size()) < num_top) {
            heap.push_back(e);
            std::push_heap(heap.begin(), heap.end(), worse);
        } else if (e > heap.front()) {
            std::pop_heap(heap.begin(), heap.end(), worse);
            heap.back() = e;
            std::push_heap(heap.begin(), heap.end(), worse);
        }
    }
    std::sort(heap.begin(), heap.end(), [](const Entry& a, const Entry& b) { return a > b; });
    for (const auto& [l, neg_id] : heap) out.top.emplace_back(-neg_id, logprob(-neg_id));
    return out;
}

}  // namespace kvscope
