// Arrival times of benchmark requests, as `vllm bench serve` draws them: all at once for an infinite
// rate, otherwise gamma-distributed gaps with shape = burstiness and mean 1 / rate (burstiness 1 is a
// Poisson process; < 1 burstier, > 1 more regular). Seeded.
#pragma once

#include <cstdint>
#include <vector>

namespace kvscope {

// Offsets in seconds from the start of the run, non-decreasing; the first request arrives at 0.
// rate <= 0 or infinite: every offset is 0. Throws BadInput for burstiness <= 0.
std::vector<double> arrival_offsets(int num_requests, double request_rate, double burstiness, uint64_t seed);

}  // namespace kvscope
