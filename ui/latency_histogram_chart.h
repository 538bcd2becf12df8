// LatencyHistogramChart: the latency distribution chart (GUI thread): one axis rect per request
// metric (TTFT, TPOT, E2EL) side by side in one QCustomPlot, each with QCPBars of makeHistogram() and
// its p50 (dashed) and p99 (dotted) as vertical lines, keyed in the legend. ChartsPanel owns the plot
// and feeds the same per-request values as its latency scatter; the chart only turns them into bars.
#pragma once

#include "latency_histogram.h"

#include <QColor>
#include <QString>

#include <vector>

class QCPAbstractItem;
class QCPAxisRect;
class QCPBars;
class QCPItemStraightLine;
class QCustomPlot;

namespace kvscope::ui {

class LatencyHistogramChart {
public:
    struct Metric {
        QString name;  // axis label stem: "TTFT"
        QColor color;
    };
    // Replaces plot's single axis rect (built by ChartsPanel::addChart) with one per metric.
    LatencyHistogramChart(QCustomPlot* plot, const std::vector<Metric>& metrics);

    // values in ms; p50/p99 of the same values (the panel computes them once for both charts).
    void setSamples(int metric, const std::vector<double>& valuesMs, double p50, double p99);
    void clear();
    // Fits every metric's axes to its bars (the panel's "follow" mode).
    void rescale();

    int metricCount() const { return int(m_metrics.size()); }
    QCPBars* bars(int metric) const { return m_metrics[size_t(metric)].bars; }
    const Histogram& histogram(int metric) const { return m_metrics[size_t(metric)].histogram; }
    QCPItemStraightLine* p50Line(int metric) const { return m_metrics[size_t(metric)].p50; }
    QCPItemStraightLine* p99Line(int metric) const { return m_metrics[size_t(metric)].p99; }
    bool ownsItem(const QCPAbstractItem* item) const;

private:
    struct Panel {
        QCPAxisRect* rect = nullptr;
        QCPBars* bars = nullptr;
        QCPItemStraightLine* p50 = nullptr;
        QCPItemStraightLine* p99 = nullptr;
        Histogram histogram;
    };
    std::vector<Panel> m_metrics;
};

}  // namespace kvscope::ui
