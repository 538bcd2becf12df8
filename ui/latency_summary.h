// Summaries of finished requests with vLLM `bench serve` key names (docs/DESIGN.md section 3): mean,
// median, std and percentiles of TTFT, TPOT, ITL and E2EL in ms, and the throughputs. Pure functions.
#pragma once

#include "metrics/request_metrics.h"

#include <QJsonObject>
#include <QList>

#include <vector>

namespace kvscope::ui {

struct Distribution {
    double mean = 0, median = 0, stddev = 0;
    std::vector<std::pair<int, double>> percentiles;  // (p, value)
};

// Linear-interpolated percentile of the values (numpy's default). 0 for an empty list.
double percentile(std::vector<double> values, double p);
Distribution distribution(const std::vector<double>& values, const QList<int>& percentiles);

// duration: seconds the run took (first arrival to last finish when <= 0).
QJsonObject summarizeRequests(const std::vector<RequestMetrics>& requests, double duration = 0,
                              const QList<int>& percentiles = {50, 90, 99});

// The definitions shown in the UI and written into every export.
QJsonObject metricDefinitions();

}  // namespace kvscope::ui
