// The latency histogram: nice bin widths, bin edges and counts of known samples (a value on an edge
// belongs to the bin above), and the charts panel's histogram chart: one QCPBars per metric holding
// the bins of exactly the values its latency scatter plots, with p50/p99 lines where the scatter's are.
#include "charts_panel.h"
#include "latency_histogram.h"
#include "latency_histogram_chart.h"
#include "latency_summary.h"
#include "metrics/summary.h"
#include "session_data.h"
#include "finished_request.h"

#include <QtTest>
#include <qcustomplot.h>

#include <numeric>

using namespace kvscope;
using namespace kvscope::ui;

Q_DECLARE_METATYPE(std::vector<double>)
Q_DECLARE_METATYPE(std::vector<int>)

namespace {

using test::finished_request;

std::vector<double> barCounts(const QCPBars* bars) {
    std::vector<double> out;
    for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it) out.push_back(it->value);
    return out;
}

}  // namespace

class TestLatencyHistogram : public QObject {
    Q_OBJECT
private slots:
    void niceBinWidth_data() {
        QTest::addColumn<double>("raw");
        QTest::addColumn<double>("expected");
        QTest::newRow("exact 1") << 1.0 << 1.0;
        QTest::newRow("exact 2") << 2.0 << 2.0;
        QTest::newRow("3 is nearer 2 than 5") << 3.0 << 2.0;
        QTest::newRow("3.4 is nearer 5 than 2") << 3.4 << 5.0;
        QTest::newRow("7.5 is nearer 10 than 5") << 7.5 << 10.0;
        QTest::newRow("exact 10") << 10.0 << 10.0;
        QTest::newRow("sub-ms") << 0.3 << 0.2;
        QTest::newRow("exact 1e-3") << 1e-3 << 1e-3;
        QTest::newRow("large") << 333.3 << 500.0;
    }
    void niceBinWidth() {
        QFETCH(double, raw);
        QFETCH(double, expected);
        QVERIFY2(qAbs(kvscope::ui::niceBinWidth(raw) - expected) <= expected * 1e-12,
                 qPrintable(QString::number(kvscope::ui::niceBinWidth(raw))));
    }

    void binsOfKnownSamples_data() {
        QTest::addColumn<std::vector<double>>("values");
        QTest::addColumn<double>("start");
        QTest::addColumn<double>("width");
        QTest::addColumn<std::vector<int>>("counts");
        // sqrt(10) -> 4 bins over a span of 3 -> width 0.75 -> nice 1.
        QTest::newRow("staircase") << std::vector<double>{1, 2, 2, 3, 3, 3, 4, 4, 4, 4} << 1.0 << 1.0
                                   << std::vector<int>{1, 2, 3, 4};
        // 11 values -> 4 bins -> width 25 -> nice 20: 20, 40, ... 100 open the next bins.
        QTest::newRow("edges go up") << std::vector<double>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100} << 0.0 << 20.0
                                     << std::vector<int>{2, 2, 2, 2, 2, 1};
        // 0.3 / 0.1 is 2.9999... in binary: still the third bin, and the bin count covers it.
        QTest::newRow("decimal edges") << std::vector<double>{0.1, 0.2, 0.3, 0.3} << 0.1 << 0.1 << std::vector<int>{1, 1, 2};
        // 2 bins over 0.6 -> 0.3 -> nice 0.2, from 0: an empty bin stays in place.
        QTest::newRow("sub-ms, unsorted") << std::vector<double>{0.3, 0.1, 0.2, 0.7} << 0.0 << 0.2
                                          << std::vector<int>{1, 2, 0, 1};
        QTest::newRow("one value") << std::vector<double>{5} << 5.0 << 0.5 << std::vector<int>{1};
        QTest::newRow("empty") << std::vector<double>{} << 0.0 << 1.0 << std::vector<int>{};
    }
    void binsOfKnownSamples() {
        QFETCH(std::vector<double>, values);
        QFETCH(double, start);
        QFETCH(double, width);
        QFETCH(std::vector<int>, counts);
        const Histogram h = makeHistogram(values);
        QCOMPARE(h.start, start);
        QCOMPARE(h.binWidth, width);
        QCOMPARE(h.counts, counts);
    }

    void manyValuesAreCappedAtTargetBins() {
        std::vector<double> values(10000);
        std::iota(values.begin(), values.end(), 0.0);
        // 30 bins over 9999 -> 333.3 -> nice 500: 20 bins of 500 values each.
        const Histogram h = makeHistogram(values, 30);
        QCOMPARE(h.binWidth, 500.0);
        QCOMPARE(h.counts, std::vector<int>(20, 500));
    }

    void chartBinsWhatTheScatterPlots() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(1000, 900);
        const double ttfts[] = {20, 25, 30, 35, 40, 45, 50, 55, 120};
        EngineUpdate u;
        int i = 0;
        for (double ttft : ttfts) u.finished.push_back(finished_request("r" + std::to_string(i), 0.1 * i, ttft, 4 + i, 5)), ++i;
        // Aborted requests and single-token ones have no TPOT: the histograms must skip them like the scatter.
        RequestMetrics aborted = finished_request("aborted", 0.05, 1, 1, 3);
        aborted.finish_reason = FinishReason::ABORT;
        u.finished.push_back(aborted);
        u.finished.push_back(finished_request("one-token", 0.2, 70, 0, 1));
        u.engineTime = 2;
        session.applyUpdate(u);
        panel.replotNow();

        const LatencyHistogramChart& chart = panel.latencyHistogram();
        QCOMPARE(chart.metricCount(), 3);
        std::vector<double> ttftMs(std::begin(ttfts), std::end(ttfts));
        ttftMs.push_back(70);
        // 10 TTFTs -> 4 bins over 100 ms -> width 25 -> nice 20 from 20: [20,40) 4, [40,60) 4, [60,80) 1,
        // two empty bins, [120,140) 1.
        QCOMPARE(barCounts(chart.bars(0)), (std::vector<double>{4, 4, 1, 0, 0, 1}));
        QCOMPARE(chart.histogram(0).binWidth, 20.0);
        QCOMPARE(chart.bars(0)->width(), 20.0);
        QCOMPARE(chart.bars(0)->data()->constBegin()->key, 30.0);  // bars centred on their bins
        QCOMPARE(chart.p50Line(0)->point1->coords().x(), kvscope::percentile(ttftMs, 50));
        QCOMPARE(chart.p99Line(0)->point1->coords().x(), kvscope::percentile(ttftMs, 99));
        QVERIFY(chart.p99Line(0)->visible());
        // TPOT: 9 requests with 4..12 ms (the one-token request has none).
        const std::vector<double> tpots = barCounts(chart.bars(1));
        QCOMPARE(std::accumulate(tpots.begin(), tpots.end(), 0.0), 9.0);
        const std::vector<double> e2els = barCounts(chart.bars(2));
        QCOMPARE(std::accumulate(e2els.begin(), e2els.end(), 0.0), 10.0);

        // The scatter on the latency chart plots the same values: same count and same p50 line.
        QCustomPlot* scatter = nullptr;
        bool hasHistogram = false;
        for (const auto& c : panel.charts()) {
            if (c.name == "latency") scatter = c.plot;
            hasHistogram |= c.name == "latency_histogram" && c.plot == chart.bars(0)->parentPlot();
        }
        QVERIFY(hasHistogram);
        QVERIFY(scatter);
        QCOMPARE(scatter->graph(0)->dataCount(), int(ttftMs.size()));

        // Live: one more request adds to its bin at the next refresh.
        EngineUpdate more;
        more.finished.push_back(finished_request("late", 1.5, 130, 5, 3));
        more.engineTime = 3;
        session.applyUpdate(more);
        panel.replotNow();
        QCOMPARE(barCounts(chart.bars(0)), (std::vector<double>{4, 4, 1, 0, 0, 2}));

        // A model load clears the session: the bars and the percentile lines go.
        session.clear();
        panel.replotNow();
        QCOMPARE(chart.bars(0)->dataCount(), 0);
        QVERIFY(!chart.p50Line(0)->visible());
    }

    // At any window size the three axes' tick labels neither overlap each other (also across axes)
    // nor leave the chart, and each axis still reads: at least two labels where it has the room.
    void tickLabelsNeverOverlap_data() {
        QTest::addColumn<int>("panelWidth");
        QTest::addColumn<double>("scale");  // latencies in ms are multiplied by it: wide "12.3k" or "0.0125" labels
        for (int width : {560, 800, 1200, 1920, 3000})
            for (double scale : {0.001, 1.0, 137.0}) QTest::newRow(qPrintable(QString("%1 px, x%2").arg(width).arg(scale))) << width << scale;
    }
    void tickLabelsNeverOverlap() {
        QFETCH(int, panelWidth);
        QFETCH(double, scale);
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(panelWidth, 900);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        EngineUpdate u;
        for (int i = 0; i < 40; ++i)
            u.finished.push_back(finished_request("r" + std::to_string(i), 0.01 * i, (13 + 7.7 * i) * scale, (1.3 + 0.21 * i) * scale, 6));
        u.engineTime = 2;
        session.applyUpdate(u);
        panel.replotNow();
        QCustomPlot* plot = panel.latencyHistogram().bars(0)->parentPlot();

        struct Label { double left, right; QString text; };
        auto labels = [plot] {
            std::vector<Label> out;
            for (QCPAxisRect* rect : plot->axisRects()) {
                QCPAxis* x = rect->axis(QCPAxis::atBottom);
                const QFontMetrics metrics(x->tickLabelFont());
                const QVector<double> ticks = x->tickVector();
                const QVector<QString> texts = x->tickVectorLabels();
                for (int i = 0; i < ticks.size(); ++i) {
                    const QString text = texts[i];
                    if (text.isEmpty()) continue;
                    const double center = x->coordToPixel(ticks[i]), half = metrics.horizontalAdvance(text) / 2.0;
                    out.push_back({center - half, center + half, text});
                }
            }
            std::sort(out.begin(), out.end(), [](const Label& a, const Label& b) { return a.left < b.left; });
            return out;
        };
        auto problem = [&]() -> QString {
            const std::vector<Label> all = labels();
            for (size_t i = 0; i < all.size(); ++i) {
                if (all[i].left < 0 || all[i].right > plot->width()) return all[i].text + " leaves the chart";
                if (i && all[i].left < all[i - 1].right) return all[i - 1].text + " overlaps " + all[i].text;
            }
            for (QCPAxisRect* rect : plot->axisRects()) {
                QCPAxis* x = rect->axis(QCPAxis::atBottom);
                const QVector<QString> texts = x->tickVectorLabels();  // a copy: begin and end of one vector
                const int shown = int(std::count_if(texts.begin(), texts.end(), [](const QString& t) { return !t.isEmpty(); }));
                if (shown < (rect->width() >= 120 ? 2 : 1)) return x->label() + QString(": %1 labels").arg(shown);
            }
            return {};
        };
        // The first frame after a resize places ticks for the old width; the queued replot settles it.
        QTRY_COMPARE_WITH_TIMEOUT(problem(), QString(), 2000);
    }
};

QTEST_MAIN(TestLatencyHistogram)
#include "test_latency_histogram.moc"
