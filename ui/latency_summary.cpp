#include "latency_summary.h"

#include "json_bridge.h"
#include "metrics/export.h"
#include "metrics/summary.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvscope::ui {

QJsonObject summarizeRequests(const std::vector<RequestMetrics>& requests, double duration,
                              const QList<int>& percentiles) {
    if (duration <= 0) {
        double first = 1e300, last = -1e300;
        for (const RequestMetrics& m : requests) {
            first = std::min(first, m.arrival_time);
            last = std::max(last, m.finish_time);
        }
        duration = last > first ? last - first : 0;
    }
    std::vector<double> ps(percentiles.begin(), percentiles.end());
    // The engine's summary (engine/metrics/summary.h) writes vLLM's keys; the CLI uses the same code.
    QJsonObject o = toQJsonObject(kvscope::summarize(requests, duration, ps).to_json());
    qint64 cached = 0, preemptions = 0;
    for (const RequestMetrics& m : requests) {
        cached += m.num_cached_tokens;
        preemptions += m.num_preemptions;
    }
    o["total_cached_tokens"] = cached;
    o["total_preemptions"] = preemptions;
    return o;
}

QJsonObject metricDefinitions() { return toQJsonObject(metric_definitions()); }

}  // namespace kvscope::ui
