// Summaries of finished requests with vLLM `bench serve` key names (docs/DESIGN.md section 3), for the
// GUI: the engine's summary (metrics/summary.h, the same code as the CLI's) as a QJsonObject, plus the
// session's cached-token and preemption totals. Pure functions.
#pragma once

#include "metrics/request_metrics.h"

#include <QJsonObject>
#include <QList>

#include <vector>

namespace kvscope::ui {

// duration: seconds the run took (first arrival to last finish when <= 0).
QJsonObject summarizeRequests(const std::vector<RequestMetrics>& requests, double duration = 0,
                              const QList<int>& percentiles = {50, 90, 99});

// The definitions shown in the UI and written into every export (metrics/export.h's).
QJsonObject metricDefinitions();

}  // namespace kvscope::ui
