// Where the engine delivers metrics: one sink interface shared by the UI worker, the benchmark and the
// server. Called on the engine thread, synchronously: implementations copy what they need and return.
#pragma once

#include "metrics/request_metrics.h"
#include "metrics/step_stats.h"

namespace kvscope {

class MetricsSink {
public:
    virtual ~MetricsSink() = default;
    virtual void on_step(const StepStats& stats) = 0;
    virtual void on_request_finished(const RequestMetrics& metrics) = 0;
};

}  // namespace kvscope
