#include "latency_histogram_chart.h"

#include "fitting_ticker.h"
#include "theme.h"

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace kvscope::ui {

LatencyHistogramChart::LatencyHistogramChart(QCustomPlot* plot, const std::vector<Metric>& metrics) {
    // Row 2 of the plot layout (under the title and legend rows) becomes a row of axis rects.
    QCPAxisRect* first = plot->axisRect();
    QCPLayoutGrid* layout = plot->plotLayout();
    int row = 0, col = 0;
    for (int i = 0; i < layout->elementCount(); ++i)
        if (layout->elementAt(i) == first) layout->indexToRowCol(i, row, col);
    layout->take(first);
    auto* strip = new QCPLayoutGrid;
    layout->addElement(row, col, strip);
    strip->setColumnSpacing(2);
    auto* margins = new QCPMarginGroup(plot);  // the three rects keep one height and baseline
    for (size_t i = 0; i < metrics.size(); ++i) {
        Panel p;
        p.rect = i == 0 ? first : new QCPAxisRect(plot);
        strip->addElement(0, int(i), p.rect);
        p.rect->setMarginGroup(QCP::msTop | QCP::msBottom, margins);
        p.rect->setRangeDrag(Qt::Horizontal);
        p.rect->setRangeZoom(Qt::Horizontal);
        QCPAxis* x = p.rect->axis(QCPAxis::atBottom);
        QCPAxis* y = p.rect->axis(QCPAxis::atLeft);
        x->setLabel(metrics[i].name + " (ms)");
        y->setLabel(i == 0 ? QObject::tr("requests") : QString());
        auto ticker = QSharedPointer<FittingTicker>::create(x);
        x->setTicker(ticker);
        QFont small = x->tickLabelFont();  // each axis is a third of a chart wide
        small.setPointSizeF(small.pointSizeF() * 0.85);
        x->setTickLabelFont(small);
        y->ticker()->setTickCount(4);
        p.bars = new QCPBars(x, y);
        p.bars->setName(metrics[i].name);
        p.bars->removeFromLegend();  // the x labels name the metrics; the legend keys the lines
        p.bars->setPen(QPen(metrics[i].color.darker(150), 1));
        QColor fill = metrics[i].color;
        fill.setAlpha(170);
        p.bars->setBrush(fill);
        for (auto [line, style] : {std::pair{&p.p50, Qt::DashLine}, std::pair{&p.p99, Qt::DotLine}}) {
            *line = new QCPItemStraightLine(plot);
            (*line)->setClipAxisRect(p.rect);
            (*line)->point1->setAxes(x, y);
            (*line)->point2->setAxes(x, y);
            (*line)->setPen(QPen(metrics[i].color.lighter(130), 1.5, style));
            (*line)->setSelectable(false);
            (*line)->setVisible(false);
        }
        m_metrics.push_back(p);
    }
    // Ticks are placed before the layout that sizes the axes: after a resize, once more at the new size.
    QObject::connect(plot, &QCustomPlot::afterLayout, plot, [plot] {
        for (QCPAxisRect* rect : plot->axisRects())
            if (auto* t = dynamic_cast<FittingTicker*>(rect->axis(QCPAxis::atBottom)->ticker().data()))
                t->requeueIfResized();
    });
    // Legend entries for the percentile lines: data-less graphs that only carry the line styles.
    for (auto [name, style] : {std::pair{"p50", Qt::DashLine}, std::pair{"p99", Qt::DotLine}}) {
        QCPGraph* key = plot->addGraph(first->axis(QCPAxis::atBottom), first->axis(QCPAxis::atLeft));
        key->setName(name);
        key->setPen(QPen(Theme::series(7), 1.5, style));
    }
}

void LatencyHistogramChart::setSamples(int metric, const std::vector<double>& valuesMs, double p50, double p99) {
    Panel& p = m_metrics[size_t(metric)];
    p.histogram = makeHistogram(valuesMs);
    QVector<double> keys, counts;
    for (size_t i = 0; i < p.histogram.counts.size(); ++i) {
        keys << p.histogram.binCenter(i);
        counts << p.histogram.counts[i];
    }
    p.bars->setWidth(p.histogram.binWidth);
    p.bars->setData(keys, counts, true);
    for (auto [line, v] : {std::pair{p.p50, p50}, std::pair{p.p99, p99}}) {
        line->point1->setCoords(v, 0);
        line->point2->setCoords(v, 1);
        line->setVisible(!valuesMs.empty());
    }
}

void LatencyHistogramChart::clear() {
    for (int i = 0; i < metricCount(); ++i) setSamples(i, {}, 0, 0);
}

void LatencyHistogramChart::rescale() {
    for (Panel& p : m_metrics) {
        const Histogram& h = p.histogram;
        const int peak = h.counts.empty() ? 1 : *std::max_element(h.counts.begin(), h.counts.end());
        const double lo = h.start, hi = h.start + h.binWidth * double(std::max<size_t>(1, h.counts.size()));
        const double pad = (hi - lo) * 0.04;
        p.rect->axis(QCPAxis::atBottom)->setRange(std::max(0.0, lo - pad), hi + pad);
        p.rect->axis(QCPAxis::atLeft)->setRange(0, std::max(1.0, peak * 1.12));
    }
}

bool LatencyHistogramChart::ownsItem(const QCPAbstractItem* item) const {
    return std::any_of(m_metrics.begin(), m_metrics.end(),
                       [item](const Panel& p) { return item == p.p50 || item == p.p99; });
}

}  // namespace kvscope::ui
