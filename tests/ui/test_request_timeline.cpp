// The request timeline: phases computed from known per-request timestamps (queued, prefill chunks,
// decode, preempted, with their exact boundaries, also while a request runs); the engine records the
// timestamps they need (prefill chunks, preemptions for seats and for a pool rebuild) on dummy:tiny;
// and the charts panel draws one lane per session request with those phases, its colour, and a
// hover tooltip with the phase durations.
#include "charts_panel.h"
#include "llm_engine.h"
#include "metrics/step_recorder.h"
#include "model/model.h"
#include "request_phases.h"
#include "request_timeline_plot.h"
#include "session_data.h"

#include <QtTest>
#include <qcustomplot.h>

#include <algorithm>
#include <numeric>

using namespace kvscope;
using namespace kvscope::ui;


namespace {

RequestMetrics timings(double arrival, std::vector<double> chunks, std::vector<double> tokens,
                       std::vector<double> preemptions, double finish) {
    RequestMetrics m;
    m.request_id = "r";
    m.arrival_time = arrival;
    m.first_scheduled_time = chunks.empty() ? -1 : chunks.front();
    m.prefill_chunk_times = std::move(chunks);
    m.num_output_tokens = int(tokens.size());
    m.token_times = std::move(tokens);
    m.preemption_times = std::move(preemptions);
    m.num_preemptions = int(m.preemption_times.size());
    m.finish_time = finish;
    m.finish_reason = finish >= 0 ? FinishReason::LENGTH : FinishReason::NONE;
    return m;
}

// "Q0-1 P1-2 D2-5": phase letter (X = preempted) and boundaries; the test data is exact in binary.
QString describe(const std::vector<PhaseSpan>& spans) {
    QStringList parts;
    for (const PhaseSpan& s : spans)
        parts << QString("%1%2-%3").arg("QPDX"[int(s.phase)]).arg(s.start).arg(s.end);
    return parts.join(' ');
}

// The phase letters with repeats collapsed: "QPDXPD".
QString shape(const std::vector<PhaseSpan>& spans) {
    QString out;
    for (const PhaseSpan& s : spans)
        if (out.isEmpty() || out.back() != QChar("QPDX"[int(s.phase)])) out += QChar("QPDX"[int(s.phase)]);
    return out;
}

int count(const std::vector<PhaseSpan>& spans, RequestPhase phase, double from = -1, double to = 1e300) {
    return int(std::count_if(spans.begin(), spans.end(),
                             [&](const PhaseSpan& s) { return s.phase == phase && s.start >= from && s.end <= to; }));
}

// Contiguous spans from arrival to the end, each of positive length.
QString checkContiguous(const std::vector<PhaseSpan>& spans, double arrival, double end) {
    if (spans.empty()) return "no spans";
    if (spans.front().start != arrival) return QString("starts at %1, arrival %2").arg(spans.front().start).arg(arrival);
    if (spans.back().end != end) return QString("ends at %1, expected %2").arg(spans.back().end).arg(end);
    for (size_t i = 0; i < spans.size(); ++i) {
        if (!(spans[i].end > spans[i].start)) return QString("span %1 is empty").arg(i);
        if (i && spans[i].start != spans[i - 1].end) return QString("gap before span %1").arg(i);
    }
    return {};
}

int ceilDiv(int a, int b) { return (a + b - 1) / b; }

}  // namespace

class TestRequestTimeline : public QObject {
    Q_OBJECT
private slots:
    void phasesFromKnownTimings_data() {
        QTest::addColumn<RequestMetrics>("m");
        QTest::addColumn<double>("now");
        QTest::addColumn<QString>("expected");
        QTest::newRow("queued, two chunks, decode")
            << timings(0, {1, 2}, {3, 4, 5}, {}, 5) << 9.0 << "Q0-1 P1-2 P2-3 D3-5";
        QTest::newRow("preempted while decoding, recompute")
            << timings(0, {0.5, 6}, {1, 2, 3, 7, 8}, {4}, 8) << 9.0 << "Q0-0.5 P0.5-1 D1-4 X4-6 P6-7 D7-8";
        QTest::newRow("preempted between prefill chunks")
            << timings(1, {2, 3, 5, 6}, {7, 8}, {4}, 8) << 9.0 << "Q1-2 P2-3 P3-4 X4-5 P5-6 P6-7 D7-8";
        QTest::newRow("preempted twice, the second time by a drain")
            << timings(0, {1, 4, 7}, {2, 3, 5, 8}, {3.5, 6}, 8) << 9.0 << "Q0-1 P1-2 D2-3.5 X3.5-4 P4-5 D5-6 X6-7 P7-8";
        QTest::newRow("resumed without a prefill chunk (all but the last token cached)")
            << timings(0, {1}, {2, 3, 5, 6}, {4}, 6) << 9.0 << "Q0-1 P1-2 D2-4 X4-5 D5-6";
        QTest::newRow("aborted while queued") << timings(0, {}, {}, {}, 2) << 9.0 << "Q0-2";
        QTest::newRow("running: prefill until now") << timings(0, {1, 2}, {}, {}, -1) << 10.0 << "Q0-1 P1-2 P2-10";
        QTest::newRow("running: preempted until now") << timings(0, {1}, {2, 3}, {4}, -1) << 10.0 << "Q0-1 P1-2 D2-4 X4-10";
        QTest::newRow("running: still queued") << timings(3, {}, {}, {}, -1) << 4.0 << "Q3-4";
        RequestMetrics noChunks = timings(0, {}, {3, 4}, {}, 4);
        noChunks.first_scheduled_time = 1;  // metrics recorded before chunk times existed
        QTest::newRow("no chunk record: first scheduled starts prefill") << noChunks << 9.0 << "Q0-1 P1-3 D3-4";
    }
    void phasesFromKnownTimings() {
        QFETCH(RequestMetrics, m);
        QFETCH(double, now);
        QFETCH(QString, expected);
        const std::vector<PhaseSpan> spans = requestPhases(m, now);
        QCOMPARE(describe(spans), expected);
        const QString broken = checkContiguous(spans, m.arrival_time, m.finish_time >= 0 ? m.finish_time : now);
        QVERIFY2(broken.isEmpty(), qPrintable(broken));
    }

    void totalsPerPhase() {
        const PhaseTotals t = phaseTotals(requestPhases(timings(1, {2, 3, 5, 6}, {7, 8}, {4}, 8), 9));
        QCOMPARE(t.seconds[int(RequestPhase::Queued)], 1.0);
        QCOMPARE(t.seconds[int(RequestPhase::Prefill)], 4.0);
        QCOMPARE(t.spans[int(RequestPhase::Prefill)], 4);
        QCOMPARE(t.seconds[int(RequestPhase::Preempted)], 1.0);
        QCOMPARE(t.spans[int(RequestPhase::Preempted)], 1);
        QCOMPARE(t.seconds[int(RequestPhase::Decode)], 1.0);
    }

    // A 40-token prompt under a 16-token budget prefills in 3 chunks; a higher-priority request takes
    // the only seat (preemption, recompute in chunks), then a block_size change drains the pool.
    void engineRecordsChunksAndPreemptions() {
        EngineConfig c;
        c.num_threads = 2;
        c.num_blocks = 64;
        c.scheduler.max_model_len = 256;
        c.scheduler.max_num_batched_tokens = 16;
        c.scheduler.max_num_seqs = 1;
        c.scheduler.policy = SchedulerPolicy::PRIORITY;
        c.scheduler.enable_prefix_caching = false;  // recompute really recomputes: chunk counts are exact
        c.check_invariants = true;
        LlmEngine engine(load_model("dummy:tiny"), c);
        StepRecorder recorder;
        engine.set_metrics_sink(&recorder);
        SamplingParams p;
        p.temperature = 0;
        p.ignore_eos = true;
        p.max_tokens = 30;
        std::vector<int32_t> prompt(40);
        std::iota(prompt.begin(), prompt.end(), 1);
        engine.add_request({"low", prompt, p, 10, ""});
        auto outputs = [&](const char* id) { return int(engine.request_output_token_ids(id).size()); };
        while (outputs("low") < 3) engine.step();
        p.max_tokens = 4;
        engine.add_request({"high", {1, 2, 3, 4, 5, 6, 7, 8}, p, 0, ""});
        engine.step();
        QCOMPARE(engine.request_info("low")->status, RequestStatus::PREEMPTED);
        // Live: the preempted span runs until now.
        const std::vector<PhaseSpan> live = requestPhases(*engine.request_metrics("low"), engine.now());
        QCOMPARE(live.back().phase, RequestPhase::Preempted);
        QCOMPARE(shape(live), QString("QPDX"));
        while (engine.request_info("high")->status != RequestStatus::FINISHED) engine.step();
        const int resumedAt = outputs("low");
        while (outputs("low") < resumedAt + 3) engine.step();
        EngineConfig next = engine.config();
        next.block_size = 32;
        engine.reconfigure(next);  // drain and rebuild: low is preempted again
        while (engine.has_unfinished_requests()) engine.step();

        const auto& finished = recorder.requests();
        const auto it = std::find_if(finished.begin(), finished.end(),
                                     [](const RequestMetrics& m) { return m.request_id == "low"; });
        QVERIFY(it != finished.end());
        const RequestMetrics& m = *it;
        QCOMPARE(m.num_preemptions, 2);
        QCOMPARE(int(m.preemption_times.size()), 2);
        QCOMPARE(m.first_scheduled_time, m.prefill_chunk_times.front());
        const std::vector<PhaseSpan> spans = requestPhases(m, engine.now());
        const QString broken = checkContiguous(spans, m.arrival_time, m.finish_time);
        QVERIFY2(broken.isEmpty(), qPrintable(broken));
        QCOMPARE(shape(spans), QString("QPDXPDXPD"));
        // Every run recomputes the prompt and the tokens sampled so far, 16 per chunk.
        const double p0 = m.preemption_times[0], p1 = m.preemption_times[1];
        auto sampledBefore = [&](double t) {
            return int(std::lower_bound(m.token_times.begin(), m.token_times.end(), t) - m.token_times.begin());
        };
        QCOMPARE(count(spans, RequestPhase::Prefill, 0, p0), 3);
        QCOMPARE(count(spans, RequestPhase::Prefill, p0, p1), ceilDiv(40 + sampledBefore(p0), 16));
        QCOMPARE(count(spans, RequestPhase::Prefill, p1), ceilDiv(40 + sampledBefore(p1), 16));
        QCOMPARE(int(m.prefill_chunk_times.size()), count(spans, RequestPhase::Prefill));
        // Preempted from the seat loss until the first recompute chunk.
        const auto x = std::find_if(spans.begin(), spans.end(),
                                    [](const PhaseSpan& s) { return s.phase == RequestPhase::Preempted; });
        QCOMPARE(x->start, p0);
        QCOMPARE(x->end, *std::upper_bound(m.prefill_chunk_times.begin(), m.prefill_chunk_times.end(), p0));
    }

    void panelDrawsOneLanePerRequest() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.setColorProvider([](const QString&) { return QColor(0x12, 0x34, 0x56); });
        panel.resize(1200, 1000);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        session.addRequest("pane-req", "pane 1", QColor(0xf0, 0x8a, 0x3c));
        EngineUpdate u;
        u.engineTime = 10;
        RequestMetrics done = timings(0, {0.5, 6}, {1, 2, 3, 7, 8}, {4}, 8);
        done.request_id = "pane-req";
        u.finished.push_back(done);
        RequestProgress running;  // a benchmark request still running: phases come with the progress
        running.requestId = "bench-1";
        running.status = RequestStatus::RUNNING;
        running.arrivalTime = 2;
        running.phases = requestPhases(timings(2, {3}, {4}, {}, -1), 10);
        u.requests.push_back(running);
        session.applyUpdate(u);
        panel.replotNow();

        const RequestTimelinePlot& timeline = panel.requestTimeline();
        QCOMPARE(int(timeline.lanes().size()), 2);
        const TimelineLane& first = timeline.lanes()[size_t(session.indexOf("pane-req"))];
        QCOMPARE(describe(first.phases), QString("Q0-0.5 P0.5-1 D1-4 X4-6 P6-7 D7-8"));
        QCOMPARE(first.color, QColor(0xf0, 0x8a, 0x3c));  // the pane's colour
        QCOMPARE(first.finishTime, 8.0);
        const TimelineLane& second = timeline.lanes()[size_t(session.indexOf("bench-1"))];
        QCOMPARE(describe(second.phases), QString("Q2-3 P3-4 D4-10"));
        QCOMPARE(second.color, QColor(0x12, 0x34, 0x56));  // no pane: the provider's (block map) colour
        QCOMPARE(second.finishTime, -1.0);

        // Hover: the pixel of lane 0 at t = 5 (preempted) finds it; the tooltip has its id and durations.
        QCustomPlot* plot = timeline.parentPlot();
        const QPointF inside(plot->xAxis->coordToPixel(5), plot->yAxis->coordToPixel(0));
        QCOMPARE(timeline.laneAt(inside), 0);
        const QString tip = timeline.toolTip(0);
        QVERIFY2(tip.contains("pane-req") && tip.contains("preempted: 2000 ms") && tip.contains("in 2 chunks"),
                 qPrintable(tip));
        // Before lane 1 arrived there is nothing to hover.
        QCOMPARE(timeline.laneAt(QPointF(plot->xAxis->coordToPixel(1), plot->yAxis->coordToPixel(1))), -1);
        // Lanes follow the live edge: the whole session, first request on top.
        QVERIFY(plot->xAxis->range().contains(10));
        QVERIFY(plot->yAxis->rangeReversed());
        QCOMPARE(plot->yAxis->range().upper, 1.5);

        // The next update moves the running lane on; a model load clears the lanes.
        EngineUpdate later;
        later.engineTime = 12;
        running.phases = requestPhases(timings(2, {3}, {4}, {}, -1), 12);
        later.requests.push_back(running);
        session.applyUpdate(later);
        panel.replotNow();
        QCOMPARE(timeline.lanes()[size_t(session.indexOf("bench-1"))].phases.back().end, 12.0);
        session.clear();
        panel.replotNow();
        QVERIFY(timeline.lanes().empty());
    }

    // A prefill chunk far narrower than a pixel, starting the instant a rebuild ended (as a request
    // resumes after one), still shows in its colour: neither the rebuild's marker line nor the decode
    // that follows in the same pixel paints over it.
    void subPixelPrefillStaysVisible() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(1000, 800);
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        const QColor color(0xf0, 0x8a, 0x3c);
        session.addRequest("resumed", "pane 2", color);
        EngineUpdate atRebuild;
        atRebuild.engineTime = 100;
        session.applyUpdate(atRebuild);
        session.addEvent("rebuild: block_size 32 (2 requests requeued)");
        EngineUpdate u;
        u.engineTime = 200;
        RequestMetrics done = timings(90, {100}, {100.0005, 150}, {}, 150);
        done.request_id = "resumed";
        u.finished.push_back(done);
        session.applyUpdate(u);
        panel.replotNow();

        QCustomPlot* plot = panel.requestTimeline().parentPlot();
        const QImage image = plot->toPixmap(plot->width(), plot->height()).toImage();
        const double x = plot->xAxis->coordToPixel(100);
        QVERIFY(plot->xAxis->coordToPixel(100.0005) - x < 0.1);  // the chunk is well under a pixel wide
        const QRgb prefill = color.lighter(115).rgb();
        int found = 0;
        for (int y = 0; y < image.height(); ++y)
            for (int dx = -2; dx <= 2; ++dx) found += image.pixel(int(x) + dx, y) == prefill;
        QVERIFY2(found >= 4, qPrintable(QString("%1 prefill pixels at the rebuild line").arg(found)));
    }

    // Fifty lanes in a short chart: the lane labels stay a text line apart, never printed over each other.
    void laneLabelsDoNotOverlap() {
        SessionData session;
        ChartsPanel panel(&session);
        panel.resize(1000, 560);  // four rows of charts at their minimum height
        panel.show();
        QVERIFY(QTest::qWaitForWindowExposed(&panel));
        EngineUpdate u;
        for (int i = 0; i < 50; ++i) {
            const QString id = QString("r%1").arg(i);
            session.addRequest(id, "pane 1", QColor(0x4e, 0x9a, 0xf0));
            RequestMetrics m = timings(0.01 * i, {0.01 * i + 0.005}, {0.01 * i + 0.008}, {}, 0.01 * i + 0.008);
            m.request_id = id.toStdString();
            u.finished.push_back(m);
        }
        u.engineTime = 1;
        session.applyUpdate(u);
        panel.replotNow();
        QCustomPlot* plot = panel.requestTimeline().parentPlot();
        QVERIFY(plot->axisRect()->height() < 100);  // short: the case that squeezed the labels
        const int line = QFontMetrics(plot->yAxis->tickLabelFont()).height();
        auto closest = [plot] {
            const QVector<double> ticks = plot->yAxis->tickVector();
            double gap = 1e9;
            for (int i = 1; i < ticks.size(); ++i)
                gap = std::min(gap, std::abs(plot->yAxis->coordToPixel(ticks[i]) - plot->yAxis->coordToPixel(ticks[i - 1])));
            return gap;
        };
        QTRY_VERIFY2_WITH_TIMEOUT(closest() >= line, qPrintable(QString("labels %1 px apart").arg(closest())), 2000);
        QVERIFY(plot->yAxis->tickVector().size() >= 2);
    }
};

QTEST_MAIN(TestRequestTimeline)
#include "test_request_timeline.moc"
