// The live charts' axes follow the data (issue 17): a rejected request sets no latency floor (the log
// axis once fell to 1e-200), an idle gap shows zero throughput rather than the last value, time starts
// at the first step rather than at the model load, and a limit line far above the data does not flatten
// it; rebuild labels never overlap or get cut; the "simulated" watermark fits small charts; a narrow
// panel lays its charts out in one column. Fed through SessionData like the engine feeds it; no engine,
// no clock.
#include "charts_panel.h"
#include "log_ticker.h"
#include "session_data.h"
#include "finished_request.h"
#include "simulation_watermark.h"

#include <QScrollArea>
#include <QScrollBar>

#include <QtTest>
#include <qcustomplot.h>

using namespace kvscope;
using namespace kvscope::ui;

namespace {

using test::finished_request;

// A decode step at time t with `running` requests, one output token each.
StepRecord step(double t, int running, int maxNumSeqs = 256) {
    StepRecord r;
    r.stats.start_time = t;
    r.stats.duration = 0.01;
    r.stats.num_running = running;
    r.stats.num_scheduled_seqs = running;
    r.stats.num_decode_tokens = running;
    r.stats.max_num_seqs = maxNumSeqs;
    r.stats.max_num_batched_tokens = 2048;
    r.numOutputTokens = running;
    return r;
}

QCustomPlot* chart(const ChartsPanel& panel, const QString& name) {
    for (const auto& c : panel.charts())
        if (c.name == name) return c.plot;
    return nullptr;
}

QCPGraph* graph(QCustomPlot* plot, const QString& name) {
    for (int i = 0; i < plot->graphCount(); ++i)
        if (plot->graph(i)->name() == name) return plot->graph(i);
    return nullptr;
}

}  // namespace

class TestChartAxes : public QObject {
    Q_OBJECT
private slots:
    // A log axis over less than a couple of decades (8 to 200 ms) gets 1-2-5 ticks: QCPAxisTickerLog's
    // linear fallback put 50, 100, 150, 200 there, crowded at the top with no label under 50.
    void logTicksUnderTwoDecades() {
        LogTicker ticker;
        auto ticks = [&](double lo, double hi, int count) {
            ticker.setTickCount(count);
            QVector<double> t;
            ticker.generate(QCPRange(lo, hi), QLocale::c(), 'g', 6, t, nullptr, nullptr);
            return t;
        };
        QCOMPARE(ticks(8, 200, 5), (QVector<double>{10, 20, 50, 100, 200}));
        QCOMPARE(ticks(8, 2000, 5), (QVector<double>{10, 30, 100, 300, 1000}));  // 1-2-5 would be 8 ticks
        QCOMPARE(ticks(0.5, 3000, 6), (QVector<double>{1, 10, 100, 1000}));
        const QVector<double> narrow = ticks(100, 150, 4);  // under a factor of 2: linear
        QVERIFY2(narrow.size() >= 2 && narrow.front() >= 100 && narrow.back() <= 150, qPrintable(QString::number(narrow.size())));
    }

    // The memory chart's legend lists GPU once a device reports its memory: on the CPU it named a line that
    // never came.
    void gpuMemoryIsInTheLegendOnlyWithADevice() {
        SessionData session;
        ChartsPanel panel(&session);
        QCustomPlot* memory = chart(panel, "memory");
        QVERIFY(memory && graph(memory, "GPU"));
        auto inLegend = [&] { return memory->legend->hasItemWithPlottable(graph(memory, "GPU")); };
        EngineUpdate cpu;
        cpu.steps.push_back(step(0.5, 1));
        session.applyUpdate(cpu);
        QVERIFY(!inLegend());
        EngineUpdate gpu;
        StepRecord s = step(1.0, 1);
        s.stats.memory.device_total_bytes = int64_t(80) << 30;
        s.stats.memory.device_used_bytes = int64_t(20) << 30;
        gpu.steps.push_back(s);
        session.applyUpdate(gpu);
        QVERIFY(inLegend());
        session.clear();  // the next model: on the CPU again
        QVERIFY(!inLegend());
    }

    // Before its first data a chart says what it waits for (bare axes from 0 to 1 read as a broken view); the
    // step charts lose the hint at the first step, the latency charts at the first finished request, the
    // timeline at the first request; a cleared session brings the hints back.
    void emptyChartsSayWhatTheyWaitFor() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(1000, 900);
        panel.replotNow();
        for (const auto& c : panel.charts()) QVERIFY2(panel.emptyHint(c.plot).endsWith(" yet"), qPrintable(c.name));
        QCOMPARE(panel.emptyHint(chart(panel, "occupancy")), QString("No engine step yet"));

        EngineUpdate u;
        u.steps.push_back(step(1.0, 1));
        u.engineTime = 1.01;
        session.applyUpdate(u);
        session.addRequest("r1", "pane 1", Qt::red);
        panel.replotNow();
        for (const auto& c : panel.charts()) {
            const bool waits = c.name == "latency" || c.name == "latency_histogram";
            QVERIFY2(panel.emptyHint(c.plot).isEmpty() != waits, qPrintable(c.name));
        }
        QCOMPARE(panel.emptyHint(chart(panel, "latency")), QString("No latency yet"));

        EngineUpdate done;
        done.finished.push_back(finished_request("r1", 1.0, 20, 5, 8));
        done.engineTime = 2;
        session.applyUpdate(done);
        panel.replotNow();
        for (const auto& c : panel.charts()) QVERIFY2(panel.emptyHint(c.plot).isEmpty(), qPrintable(c.name));

        session.clear();
        panel.replotNow();
        for (const auto& c : panel.charts()) QVERIFY2(!panel.emptyHint(c.plot).isEmpty(), qPrintable(c.name));
    }

    void rejectedRequestSetsNoLatencyFloor() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(1000, 900);
        session.addRequest("bad", "pane 1", Qt::red);
        session.rejectRequest("bad", "prompt of 300 tokens does not fit max_model_len 256");
        panel.replotNow();
        QCustomPlot* latency = chart(panel, "latency");
        QVERIFY(latency);
        // Nothing plotted yet: a sane default decade range, not a floor near zero.
        QVERIFY2(latency->yAxis->range().lower >= 0.1, qPrintable(QString::number(latency->yAxis->range().lower)));

        EngineUpdate u;
        u.finished.push_back(finished_request("ok-1", 1.0, 20, 5, 8));
        u.finished.push_back(finished_request("ok-2", 1.2, 40, 6, 8));
        RequestMetrics aborted = finished_request("stopped", 1.1, 0, 0, 1);  // aborted at once: a zero TTFT
        aborted.finish_reason = FinishReason::ABORT;
        u.finished.push_back(aborted);
        u.engineTime = 2;
        session.applyUpdate(u);
        panel.replotNow();
        const QCPRange y = latency->yAxis->range();
        // The smallest plotted value is the 5 ms TPOT, the largest the E2EL of ok-2 (40 + 7 * 6 ms).
        QVERIFY2(y.lower > 1 && y.lower < 5, qPrintable(QString::number(y.lower)));
        QVERIFY2(y.upper > 82 && y.upper < 1000, qPrintable(QString::number(y.upper)));
    }

    void idleGapShowsZeroThroughput() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(1000, 900);
        EngineUpdate busy;
        for (double t = 10.0; t < 11.0; t += 0.05) busy.steps.push_back(step(t, 2));
        busy.engineTime = 11.0;
        session.applyUpdate(busy);
        EngineUpdate again;  // idle from 11 s to 14 s
        for (double t = 14.0; t < 14.5; t += 0.05) again.steps.push_back(step(t, 3));
        again.engineTime = 15.8;  // and idle again since 14.5 s
        session.applyUpdate(again);
        panel.replotNow();

        QCustomPlot* throughput = chart(panel, "throughput");
        QVERIFY(throughput);
        QCPGraph* output = graph(throughput, "output");
        QVERIFY(output);
        int zerosInGap = 0, nonZero = 0;
        double lastKey = 0;
        for (auto it = output->data()->constBegin(); it != output->data()->constEnd(); ++it) {
            if (it->key >= 11.0 && it->key < 14.0) {
                QCOMPARE(it->value, 0.0);
                ++zerosInGap;
            }
            nonZero += it->value > 0;
            lastKey = it->key;
        }
        QCOMPARE(zerosInGap, 6);  // six 0.5 s buckets of nothing
        QVERIFY(nonZero >= 3);
        QCOMPARE(lastKey, 15.8);  // the idle tail is drawn up to now, at zero
        QCOMPARE((output->data()->constEnd() - 1)->value, 0.0);

        // Time starts at the first step (10 s after the model load), not at 0.
        for (const char* name : {"occupancy", "throughput", "tokens", "request_timeline"}) {
            const QCPRange x = chart(panel, name)->xAxis->range();
            QVERIFY2(x.lower >= 10.0 && x.lower < 10.5, qPrintable(QString("%1: %2").arg(name).arg(x.lower)));
            QVERIFY2(x.upper >= 15.8, name);
        }
    }

    // The step that finishes the last request leaves nothing running: the batch and token lines drop to
    // zero where it ends instead of holding its batch across the idle time to the next request. Its output
    // tokens count in the throughput buckets its time overlaps, not all in the one where it ends.
    void idleGapShowsEmptyBatch() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(1000, 900);
        EngineUpdate u;
        u.steps.push_back(step(1.0, 2));
        StepRecord last = step(1.01, 2);
        last.stats.num_running = 0;  // both finished in this step
        last.stats.duration = 0.6;   // a long step: ends at 1.61, in the next bucket
        last.numOutputTokens = 60;
        u.steps.push_back(last);
        u.steps.push_back(step(5.0, 3));
        u.engineTime = 5.01;
        session.applyUpdate(u);
        panel.replotNow();
        for (const auto& [chartName, graphName] : {std::pair{"occupancy", "batch"}, std::pair{"tokens", "decode"}}) {
            QCPGraph* g = graph(chart(panel, chartName), graphName);
            QVERIFY(g);
            bool zeroAtEnd = false;
            for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) {
                if (it->key > 1.01 && it->key < 5.0) QCOMPARE(it->value, 0.0);
                zeroAtEnd |= qFuzzyCompare(it->key, 1.61) && it->value == 0.0;
            }
            QVERIFY2(zeroAtEnd, graphName);
        }
        // Bucket [1.0, 1.5) holds 2 tokens plus 0.49 / 0.6 of the long step's 60; [1.5, 2.0) the rest.
        QCPGraph* output = graph(chart(panel, "throughput"), "output");
        QVERIFY(output);
        const auto at = [&](double key) {
            for (auto it = output->data()->constBegin(); it != output->data()->constEnd(); ++it)
                if (qFuzzyCompare(it->key, key)) return it->value;
            return -1.0;
        };
        QCOMPARE(at(1.0), (2 + 60 * 0.49 / 0.6) / 0.5);
        QCOMPARE(at(1.5), 60 * 0.11 / 0.6 / 0.5);
    }

    void limitLineDoesNotFlattenData() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(1000, 900);
        EngineUpdate u;
        for (int i = 0; i < 20; ++i) u.steps.push_back(step(0.1 * i, 1 + i % 3, 256));
        u.engineTime = 2;
        session.applyUpdate(u);
        panel.replotNow();
        QCustomPlot* occupancy = chart(panel, "occupancy");
        QVERIFY(occupancy->yAxis->range().upper >= 3);
        QVERIFY2(occupancy->yAxis->range().upper < 10, qPrintable(QString::number(occupancy->yAxis->range().upper)));

        // Near the limit, the limit is in view.
        EngineUpdate full;
        full.steps.push_back(step(2.1, 200, 256));
        full.engineTime = 2.2;
        session.applyUpdate(full);
        panel.replotNow();
        QVERIFY(occupancy->yAxis->range().upper >= 256);
    }

    // Rebuild labels on the step charts: a burst of rebuilds and one at the live edge give labels that
    // neither overlap nor leave the chart (stacked in rows, flipped left at the right edge), at a narrow
    // and a wide size; any label without room is hidden, and every event is named by hovering its line.
    void eventLabelsNeverOverlap_data() {
        QTest::addColumn<int>("width");
        QTest::newRow("narrow") << 600;
        QTest::newRow("wide") << 1900;
    }
    void eventLabelsNeverOverlap() {
        QFETCH(int, width);
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(width, 900);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        std::vector<double> times;
        auto rebuildAt = [&](double t, const QString& what) {
            EngineUpdate u;
            u.steps.push_back(step(t, 2));
            u.engineTime = t;
            session.applyUpdate(u);
            session.addEvent("rebuild: " + what + " (2 requests requeued)");
            times.push_back(t);
        };
        EngineUpdate start;
        start.steps.push_back(step(0, 1));
        session.applyUpdate(start);
        for (int i = 0; i < 8; ++i) rebuildAt(2.0 + 0.02 * i, QString("block_size %1").arg(8 << (i % 3)));
        // At the live edge, two rebuilds in one step (the engine joins them with "; "): both named.
        rebuildAt(10.0, "kv_cache_dtype float16 (2 -> 2 blocks); aborted 1 request; rebuild: prefix caching on");
        panel.replotNow();

        QCustomPlot* plot = chart(panel, "occupancy");
        const QRect area = plot->axisRect()->rect();
        std::vector<QRectF> shown;
        for (int i = 0; i < plot->itemCount(); ++i) {
            auto* label = qobject_cast<QCPItemText*>(plot->item(i));
            if (!label || !label->visible()) continue;
            const QRectF box(label->topLeft->pixelPosition(), label->bottomRight->pixelPosition());
            QVERIFY2(area.contains(box.toAlignedRect()), qPrintable(label->text() + " is cut off"));
            for (const QRectF& other : shown) QVERIFY2(!box.intersects(other), qPrintable(label->text() + " overlaps"));
            shown.push_back(box);
            // Its arrow points at a line it touches: the left edge right of a line, the right edge left of one.
            const bool pointsLeft = label->text().startsWith(QString::fromUtf8("\u25C2 "));
            QVERIFY2(pointsLeft || label->text().endsWith(QString::fromUtf8(" \u25B8")), qPrintable(label->text()));
            bool touches = false;
            for (double t : times)
                touches |= std::abs((pointsLeft ? box.left() : box.right()) - plot->xAxis->coordToPixel(t)) <= 5;
            QVERIFY2(touches, qPrintable(label->text() + " is at no line"));
        }
        QVERIFY(shown.size() >= 3);  // stacked, not all hidden
        bool newestShown = false;  // the live edge's label has priority over an older burst's
        for (int i = 0; i < plot->itemCount(); ++i)
            if (auto* label = qobject_cast<QCPItemText*>(plot->item(i)))
                newestShown |= label->visible() && label->text().contains(width > 1000 ? "kv_cache_dtype float16, prefix caching on"
                                                                                      : "kv_cache_dtype float16 +1");
        QVERIFY(newestShown);
        for (double t : times) {
            const QString tip = panel.eventToolTip(plot, QPointF(plot->xAxis->coordToPixel(t) + 1, area.center().y()));
            QVERIFY2(tip.contains("requeued"), qPrintable(QString("no hover text at %1 s").arg(t)));
        }
        QVERIFY(panel.eventToolTip(plot, QPointF(plot->xAxis->coordToPixel(6.0), area.center().y())).isEmpty());
        // Another chart's line names the event too.
        QCustomPlot* tokens = chart(panel, "tokens");
        QVERIFY(panel.eventToolTip(tokens, QPointF(tokens->xAxis->coordToPixel(10.0), tokens->axisRect()->rect().center().y()))
                    .contains("kv_cache_dtype"));
    }

    // Every chart's y labels (the histogram's three axes too) stay a text line apart at the smallest
    // chart height, where the default tick count printed them over each other.
    void yLabelsDoNotOverlapInShortCharts() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(1000, 560);  // four rows of charts at their minimum height
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        EngineUpdate u;
        for (int i = 0; i < 40; ++i) u.steps.push_back(step(0.02 * i, 1 + i % 17, 16));
        for (int i = 0; i < 30; ++i) u.finished.push_back(finished_request("r" + std::to_string(i), 0.02 * i, 5 + 3 * i, 1 + 0.1 * i, 4));
        u.engineTime = 1;
        session.applyUpdate(u);
        panel.replotNow();
        auto problem = [&panel]() -> QString {
            for (const auto& c : panel.charts())
                for (QCPAxisRect* rect : c.plot->axisRects()) {
                    QCPAxis* y = rect->axis(QCPAxis::atLeft);
                    const QVector<double> ticks = y->tickVector();
                    const int line = QFontMetrics(y->tickLabelFont()).height();
                    for (int i = 1; i < ticks.size(); ++i)
                        if (std::abs(y->coordToPixel(ticks[i]) - y->coordToPixel(ticks[i - 1])) < line)
                            return QString("%1: labels %2 and %3 overlap").arg(c.name).arg(ticks[i - 1]).arg(ticks[i]);
                }
            return {};
        };
        QTRY_COMPARE_WITH_TIMEOUT(problem(), QString(), 2000);
    }

    // Every legend key is drawn whole (its item as tall as its text) in a one-column panel at its charts'
    // minimum height, as at 1024x700: the request timeline's two key rows were squeezed into less than
    // their height and the keys lost their descenders ("queued", "preempted").
    void legendKeysAreWhole() {
        SessionData session;
        auto* panel = new ChartsPanel(&session);
        QScrollArea area;
        area.setWidgetResizable(true);
        area.setWidget(panel);
        area.resize(340, 600);
        area.show();
        QVERIFY(QTest::qWaitForWindowExposed(&area));
        QTRY_COMPARE(panel->columnCount(), 1);
        QCoreApplication::processEvents();
        panel->replotNow();
        for (const auto& c : panel->charts()) {
            QCOMPARE(c.plot->height(), c.plot->minimumHeight());
            for (int i = 0; i < c.plot->legend->itemCount(); ++i) {
                const QCPAbstractLegendItem* item = c.plot->legend->item(i);
                if (!item || !item->visible()) continue;
                QVERIFY2(item->outerRect().height() >= item->minimumOuterSizeHint().height(),
                         qPrintable(QString("%1: key %2 is %3 px high, its text %4")
                                        .arg(c.name).arg(i).arg(item->outerRect().height())
                                        .arg(item->minimumOuterSizeHint().height())));
            }
        }
    }

    // The "simulated ..." watermark fits a chart of any width (issue 20): every line it shows lies within
    // the chart's axis rect, the model and step-time model break onto lines of their own or end in a
    // visible ellipsis rather than being cut, and the whole label stays the watermark's (exports, tests).
    void watermarkFitsSmallCharts() {
        SessionData session;
        ChartsPanel panel(&session);
        const QString label = "simulated NVIDIA H100 SXM 80GB, dummy:llama-3-8b, step-time model sim-v1";
        panel.setSimulationLabel(label);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        for (int width : {300, 620, 1600}) {
            panel.resize(width, 1400);
            QCoreApplication::processEvents();
            panel.replotNow();
            for (const auto& c : panel.charts()) {
                QCOMPARE(simulationWatermark(c.plot), label);
                const auto* text = c.plot->findChild<QCPItemText*>("simulationWatermark");
                QVERIFY(text);
                // Beneath the data: it covered lines, points and bars before.
                QVERIFY2(text->layer()->index() < c.plot->layer("main")->index(), qPrintable(c.name));
                const QFontMetrics fm(text->font());
                const int room = c.plot->width() - c.plot->axisRect()->left();  // the label may span the histogram's rects
                const QStringList lines = text->text().split('\n');
                QVERIFY2(lines.front().startsWith("simulated"), qPrintable(c.name + ": " + text->text()));
                for (const QString& line : lines)
                    QVERIFY2(fm.horizontalAdvance(line) + 8 <= room,
                             qPrintable(QString("%1 at %2: '%3' in %4 px").arg(c.name).arg(width).arg(line).arg(room)));
                const QString shown = lines.join(' ');
                QVERIFY2(shown.contains("step-time model sim-v1") || shown.contains(QChar(0x2026)), qPrintable(shown));
                if (width >= 1600) QCOMPARE(lines.size(), 2);  // room enough: GPU, then model and step-time model
            }
        }
    }

    // In a scroll area narrower than two charts side by side the panel lays its charts out in one column
    // and nothing scrolls sideways (at 1024x700 the right column was cut); wide, two columns again.
    void narrowPanelHasOneColumn() {
        SessionData session;
        auto* panel = new ChartsPanel(&session);
        QScrollArea area;
        area.setWidgetResizable(true);
        area.setWidget(panel);
        area.resize(420, 700);
        area.show();
        QVERIFY(QTest::qWaitForWindowExposed(&area));
        QTRY_COMPARE(panel->columnCount(), 1);
        QCoreApplication::processEvents();
        QCOMPARE(area.horizontalScrollBar()->maximum(), 0);
        for (const auto& c : panel->charts()) {
            QVERIFY2(c.plot->geometry().right() < area.viewport()->width(), qPrintable(c.name));
            QVERIFY(c.plot->width() >= c.plot->minimumWidth());
        }
        QVERIFY(area.verticalScrollBar()->maximum() > 0);  // the charts keep their height and scroll down
        area.resize(1300, 900);
        QTRY_COMPARE(panel->columnCount(), 2);
        QCoreApplication::processEvents();
        QCOMPARE(area.horizontalScrollBar()->maximum(), 0);
        QCOMPARE(panel->charts()[0].plot->y(), panel->charts()[1].plot->y());  // side by side
        QVERIFY(panel->charts()[1].plot->geometry().right() < area.viewport()->width());
    }
};

QTEST_MAIN(TestChartAxes)
#include "test_chart_axes.moc"
