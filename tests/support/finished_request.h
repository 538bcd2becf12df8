// A finished request's metrics with given TTFT and TPOT (E2EL follows from them), for tests that feed
// charts and histograms without an engine or a clock.
#pragma once

#include "metrics/request_metrics.h"

#include <string>

namespace kvscope::test {

inline RequestMetrics finished_request(const std::string& id, double arrival, double ttft_ms, double tpot_ms,
                                       int output_tokens) {
    RequestMetrics m;
    m.request_id = id;
    m.arrival_time = arrival;
    m.first_scheduled_time = arrival;
    m.prefill_chunk_times = {arrival};
    m.num_output_tokens = output_tokens;
    for (int i = 0; i < output_tokens; ++i) m.token_times.push_back(arrival + (ttft_ms + i * tpot_ms) / 1e3);
    m.finish_time = m.token_times.back();
    m.finish_reason = FinishReason::LENGTH;
    return m;
}

}  // namespace kvscope::test
