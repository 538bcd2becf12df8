#include "bench/arrivals.h"

#include "util/errors.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kvscope {

std::vector<double> arrival_offsets(int n, double rate, double burstiness, uint64_t seed) {
    if (!(burstiness > 0)) throw BadInput("--burstiness must be > 0 (got " + std::to_string(burstiness) + ")");
    std::vector<double> out(static_cast<size_t>(std::max(n, 0)), 0.0);
    if (!(rate > 0) || std::isinf(rate)) return out;
    std::mt19937_64 rng(seed);
    // vLLM: theta = 1 / (rate * burstiness); gap ~ Gamma(shape = burstiness, scale = theta).
    std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
    double t = 0;
    for (size_t i = 1; i < out.size(); ++i) out[i] = (t += gap(rng));
    return out;
}

}  // namespace kvscope
