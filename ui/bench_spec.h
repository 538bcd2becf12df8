// A benchmark run as the GUI describes it (the workloads and arrivals of `kvscope-cli bench`) and its
// result (vLLM `bench serve` keys). Values only: built on the GUI thread, run on the engine thread.
#pragma once

#include "metrics/request_metrics.h"

#include <QJsonObject>
#include <QMetaType>
#include <QString>

#include <string>
#include <vector>

namespace kvscope::ui {

struct BenchSpec {
    QString name;                     // label in the results table and the charts
    QString dataset = "random";       // random | shared-prefix | sharegpt
    QString datasetPath;              // sharegpt: the JSON file
    int numPrompts = 64;
    int inputLen = 128;
    int outputLen = 64;
    double rangeRatio = 0.0;          // lengths drawn from [len * (1 - r), len * (1 + r)]
    int prefixLen = 64;               // shared-prefix: tokens every prompt starts with
    double requestRate = 0.0;         // requests/s; 0 = all at once (vLLM's inf)
    double burstiness = 1.0;          // gamma shape of the inter-arrival times (1 = Poisson)
    int maxConcurrency = 0;           // 0 = unlimited
    quint64 seed = 0;

    QJsonObject toJson() const;
    static BenchSpec fromJson(const QJsonObject& o);  // missing keys keep their defaults
};

struct BenchResult {
    BenchSpec spec;
    QJsonObject summary;  // vLLM keys: completed, mean_ttft_ms, p99_itl_ms, output_throughput, ...
    QJsonObject config;   // engine config at the end of the run
    std::vector<RequestMetrics> requests;  // workload order, arrival by the benchmark driver's rule
    std::vector<double> submitTimes;       // when each entered the engine (-1: refused)
    std::vector<std::string> errors;       // "" or why it failed
    QString source;       // "" = this session; else the JSON file it was loaded from
};

}  // namespace kvscope::ui

Q_DECLARE_METATYPE(kvscope::ui::BenchSpec)
Q_DECLARE_METATYPE(kvscope::ui::BenchResult)
