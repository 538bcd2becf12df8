// Engine set-ups that the engine suites share: greedy sampling that runs every request to max_tokens,
// and a small engine config that checks the scheduler and pool invariants after every step.
#pragma once

#include "engine_config.h"
#include "sched/sampling_params.h"

namespace kvscope::test {

// Temperature 0 with ignore_eos: every request decodes exactly max_tokens tokens, so batches stay whole
// and runs compare token for token.
inline SamplingParams greedy(int max_tokens) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

// max_model_len 512 on 2 threads, invariants checked after every step (EngineConfig::check_invariants).
inline EngineConfig checked_engine_config() {
    EngineConfig c;
    c.scheduler.max_model_len = 512;
    c.num_threads = 2;
    c.check_invariants = true;
    return c;
}

}  // namespace kvscope::test
