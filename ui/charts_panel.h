// ChartsPanel: the live QCustomPlot charts of a session (GUI thread): batch occupancy, tokens per
// step, KV usage and waste, memory, throughput, per-request latency (scatter and histogram) and the
// request timeline (one swimlane per request). Fed incrementally from SessionData; replotted by a
// 33 ms timer with rpQueuedReplot, so data may arrive at any rate; a chart out of view (the other tab,
// scrolled away) is replotted when it is next painted instead.
// Rebuild events (drain-and-rebuild) are vertical markers on every time chart, labelled on the first
// without overlap and named on hover.
// Zoom and pan with the mouse; double-click returns a chart to following the live edge.
// Two columns of charts where two fit at their minimum width, one column below that (a narrow window
// scrolls down through the charts rather than cutting the right column off).
#pragma once

#include <QPointF>
#include <QTimer>
#include <QWidget>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

class QCustomPlot;
class QCPGraph;
class QCPItemStraightLine;
class QCPItemText;
class QCPRange;

namespace kvscope::ui {

class LatencyHistogramChart;
class RequestTimelinePlot;
class SessionData;
struct SessionEvent;

class ChartsPanel : public QWidget {
    Q_OBJECT
public:
    explicit ChartsPanel(SessionData* session, QWidget* parent = nullptr);
    ~ChartsPanel() override;

    struct Chart {
        QString name;  // file-name stem: occupancy, tokens, kv, memory, throughput, latency,
                       // latency_histogram, request_timeline
        QString title;
        QCustomPlot* plot = nullptr;
        bool follow = true;
        bool engineTimeAxis = true;  // x is engine time: rebuild markers are drawn on it
        bool fromSteps = true;       // drawn from the engine's per-step figures (a remote engine has none)
        QCPItemText* emptyHint = nullptr;  // shown while the chart has no data ("No engine step yet")
    };
    const std::vector<Chart>& charts() const { return m_charts; }
    const LatencyHistogramChart& latencyHistogram() const { return *m_histogram; }
    const RequestTimelinePlot& requestTimeline() const { return *m_timeline; }
    // The colour of a request's lane when the session has none for it (benchmark requests): the
    // block map's colour, so a request looks the same everywhere.
    void setColorProvider(std::function<QColor(const QString&)> colorOf) { m_colorOf = std::move(colorOf); }
    // The rebuild events whose marker line is within a few pixels of a point on a time chart (rich
    // text, one per line; empty for none): the hover text, also for a label that had no room.
    QString eventToolTip(const QCustomPlot* plot, const QPointF& pixel) const;

    // Every chart says "simulated ..." in its plot while the engine is simulated ("" = a real backend).
    void setSimulationLabel(const QString& label);
    // While connected to a remote engine, which reports no steps, the step charts say so in the plot
    // (an export too) instead of standing empty; "" removes the note.
    void setStepChartsNote(const QString& note);
    QString stepChartsNote(const QCustomPlot* plot) const;  // "" when the chart has none
    // What an empty chart says it waits for ("No engine step yet", ...); "" once it has data (or a note).
    QString emptyHint(const QCustomPlot* plot) const;

    int columnCount() const { return m_columns; }
    // As narrow as one column: a scroll area gives the panel its width, and the panel fits its columns.
    QSize minimumSizeHint() const override;

public slots:
    void replotNow();  // applies pending data and replots synchronously (export, tests)
    void restyle();

protected:
    void resizeEvent(QResizeEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void arrangeCharts(int columns);
    Chart& addChart(const QString& name, const QString& title, const QString& yLabel, int row, int col);
    QCPGraph* addGraph(QCustomPlot* plot, const QString& name, const QColor& color, bool step = true, bool fill = false);
    void appendSteps(int first, int count);
    void appendRequests();
    void updateTimeline();
    void addEventMarker(const SessionEvent& event);
    void layoutEventLabels();  // on the first chart, at each of its layouts
    void styleEmptyHints();    // the theme's text colour on the chart's background
    void reset();
    void refresh();
    QCPRange latencyRange() const;  // the latency chart's log y axis, ms

    SessionData* m_session;
    std::vector<Chart> m_charts;
    int m_columns = 2;
    // Schedules a replot (at most one per 33 ms): the single-shot timer runs only after a change.
    void markDirty();
    QTimer m_replotTimer;
    bool m_dirty = false;

    QCPGraph *m_running, *m_waiting, *m_batch, *m_maxSeqs;
    QCPGraph *m_padding, *m_prefill, *m_decode, *m_budget;
    QCPGraph *m_kvUsage, *m_kvWaste, *m_hitRate;
    QCPGraph *m_weights, *m_kvPool, *m_activations, *m_rss, *m_gpu;
    QCPGraph *m_outputTps, *m_totalTps;
    QCPGraph *m_ttft, *m_tpot, *m_e2el;
    std::vector<QCPItemStraightLine*> m_percentileLines;
    std::array<std::vector<double>, 3> m_latencyMs;  // TTFT, TPOT, E2EL as plotted: the histogram's samples
    std::unique_ptr<LatencyHistogramChart> m_histogram;
    QCustomPlot* m_histogramPlot;
    RequestTimelinePlot* m_timeline;  // owned by its plot
    std::set<int> m_changedRows;      // session rows whose timeline lane is stale
    std::function<QColor(const QString&)> m_colorOf;
    std::map<long long, std::pair<double, double>> m_buckets;  // 0.5 s bucket -> (output, total) tokens
    std::set<int> m_plottedRequests;
    struct EventMarker {
        double time;
        QString text;
        QCPItemText* label;  // owned by the first chart
    };
    std::vector<EventMarker> m_events;
    std::set<QCustomPlot*> m_stalePlots;  // out of view at the last refresh: replotted when next painted
    std::vector<QCPItemText*> m_notes;  // setStepChartsNote's, one per step chart, owned by its plot
};

}  // namespace kvscope::ui
