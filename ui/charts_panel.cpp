#include "charts_panel.h"

#include "chart_legend.h"

#include "metrics/summary.h"

#include "latency_histogram_chart.h"
#include "latency_summary.h"
#include "log_ticker.h"
#include "request_timeline_plot.h"
#include "session_data.h"
#include "simulation_watermark.h"
#include "theme.h"

#include <QGridLayout>
#include <QToolTip>

#include <qcustomplot.h>

namespace kvscope::ui {

namespace {
constexpr double kBucket = 0.5;  // seconds per throughput bucket
constexpr double kMiB = 1024.0 * 1024.0;
}

ChartsPanel::ChartsPanel(SessionData* session, QWidget* parent)
    : QWidget(parent), m_session(session), m_replotTimer(this) {
    auto* grid = new QGridLayout(this);
    grid->setContentsMargins(2, 2, 2, 2);
    grid->setSpacing(4);
    m_charts.reserve(8);

    QCustomPlot* p = addChart("occupancy", tr("Batch occupancy per step"), tr("requests"), 0, 0).plot;
    m_maxSeqs = addGraph(p, tr("limit"), Theme::series(7));
    m_maxSeqs->setPen(QPen(Theme::series(7), 1.5, Qt::DashLine));
    m_batch = addGraph(p, tr("batch"), Theme::series(0), true, true);
    m_running = addGraph(p, tr("running"), Theme::series(2));
    m_waiting = addGraph(p, tr("waiting"), Theme::series(1));

    p = addChart("tokens", tr("Tokens per step"), tr("tokens"), 0, 1).plot;
    m_budget = addGraph(p, tr("budget"), Theme::series(7));
    m_budget->setPen(QPen(Theme::series(7), 1.5, Qt::DashLine));
    // Naive mode's padding rows (computed, thrown away) stack on top of the real tokens.
    m_padding = addGraph(p, tr("padding"), Theme::series(3), true, true);
    m_prefill = addGraph(p, tr("prefill"), Theme::series(4), true, true);
    m_decode = addGraph(p, tr("decode"), Theme::series(0), true, true);

    p = addChart("kv", tr("KV cache usage and waste"), tr("%"), 1, 0).plot;
    m_kvUsage = addGraph(p, tr("usage"), Theme::series(6), true, true);
    m_kvWaste = addGraph(p, tr("waste"), Theme::series(3));
    m_hitRate = addGraph(p, tr("hit rate"), Theme::series(5), false);
    p->yAxis->setRange(0, 105);

    p = addChart("memory", tr("Memory"), tr("MiB"), 1, 1).plot;
    m_weights = addGraph(p, tr("weights"), Theme::series(4), false);
    m_kvPool = addGraph(p, tr("KV"), Theme::series(6), false);
    m_activations = addGraph(p, tr("act."), Theme::series(1), false);
    m_rss = addGraph(p, tr("RSS"), Theme::series(7), false);
    m_gpu = addGraph(p, tr("GPU"), Theme::series(3), false);
    m_gpu->removeFromLegend();  // in the legend once a device reports memory (a CPU run has no GPU line)

    p = addChart("throughput", tr("Throughput (0.5 s buckets)"), tr("tokens/s"), 2, 0).plot;
    m_totalTps = addGraph(p, tr("total"), Theme::series(7), true, false);
    m_outputTps = addGraph(p, tr("output"), Theme::series(2), true, true);

    p = addChart("latency", tr("Latency per request"), tr("ms"), 2, 1).plot;
    m_ttft = addGraph(p, "TTFT", Theme::series(0), false);
    m_tpot = addGraph(p, "TPOT", Theme::series(2), false);
    m_e2el = addGraph(p, "E2EL", Theme::series(1), false);
    const QCPScatterStyle::ScatterShape shapes[] = {QCPScatterStyle::ssDisc, QCPScatterStyle::ssTriangle, QCPScatterStyle::ssSquare};
    int i = 0;
    for (QCPGraph* g : {m_ttft, m_tpot, m_e2el}) {
        g->setLineStyle(QCPGraph::lsNone);
        g->setScatterStyle(QCPScatterStyle(shapes[i++], g->pen().color(), g->pen().color(), 5));
        for (int k = 0; k < 2; ++k) {
            auto* line = new QCPItemStraightLine(p);
            line->setPen(QPen(g->pen().color(), 1, k == 0 ? Qt::DashLine : Qt::DotLine));
            line->setVisible(false);
            m_percentileLines.push_back(line);
        }
    }
    QSharedPointer<QCPAxisTickerLog> log(new LogTicker);
    p->yAxis->setScaleType(QCPAxis::stLogarithmic);
    p->yAxis->setTicker(log);
    p->yAxis->setLabel(tr("ms (log)"));
    p->yAxis->setRange(latencyRange());  // three decades until the first latency arrives
    p->xAxis->setLabel(tr("finish time (s); dashed p50, dotted p99"));
    m_charts.back().engineTimeAxis = false;  // x is request finish time: the step charts carry the markers
    m_charts.back().fromSteps = false;

    Chart* chart = &addChart("latency_histogram", tr("Latency histogram"), tr("requests"), 3, 0);
    chart->engineTimeAxis = false;
    chart->fromSteps = false;
    m_histogramPlot = chart->plot;
    m_histogram = std::make_unique<LatencyHistogramChart>(
        m_histogramPlot, std::vector<LatencyHistogramChart::Metric>{{"TTFT", m_ttft->pen().color()},
                                                                      {"TPOT", m_tpot->pen().color()},
                                                                      {"E2EL", m_e2el->pen().color()}});
    Theme::styleChart(m_histogramPlot);  // the axis rects it added

    p = addChart("request_timeline", tr("Request timeline"), tr("request"), 3, 1).plot;
    m_charts.back().fromSteps = false;  // one lane per request, from the requests' own times
    m_timeline = new RequestTimelinePlot(p->xAxis, p->yAxis);
    m_timeline->removeFromLegend();  // its legend is the phase key: the lane colour is the request's
    p->legend->setWrap(3);           // five keys: two rows, so none is cut off in a narrow chart
    m_timeline->addPhaseLegend();
    p->yAxis->setRangeReversed(true);  // the first request on top, like the request table
    QSharedPointer<QCPAxisTickerFixed> lanes(new QCPAxisTickerFixed);
    lanes->setTickStep(1);
    lanes->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);  // whole lanes only, however far zoomed in
    p->yAxis->setTicker(lanes);
    p->axisRect()->setRangeDrag(Qt::Horizontal | Qt::Vertical);
    p->axisRect()->setRangeZoom(Qt::Horizontal | Qt::Vertical);
    p->setMouseTracking(true);  // hover tooltips without a pressed button
    connect(p, &QCustomPlot::mouseMove, this, [this, p](QMouseEvent* event) {
        const int lane = m_timeline->laneAt(event->position());
        const QString tip = lane < 0 ? eventToolTip(p, event->position()) : m_timeline->toolTip(lane);
        if (tip.isEmpty()) QToolTip::hideText();
        else QToolTip::showText(event->globalPosition().toPoint(), tip, p);
    });

    // Hovering a rebuild line names the event on every time chart (the timeline has its own hover).
    for (const Chart& c : m_charts) {
        if (!c.engineTimeAxis || c.plot == p) continue;
        c.plot->setMouseTracking(true);
        connect(c.plot, &QCustomPlot::mouseMove, this, [this, plot = c.plot](QMouseEvent* event) {
            const QString tip = eventToolTip(plot, event->position());
            if (tip.isEmpty()) QToolTip::hideText();
            else QToolTip::showText(event->globalPosition().toPoint(), tip, plot);
        });
    }
    connect(m_charts.front().plot, &QCustomPlot::afterLayout, this, &ChartsPanel::layoutEventLabels);

    // Before its first data a chart says what it waits for: bare axes from 0 to 1 read as a broken view.
    for (Chart& c : m_charts) {
        auto* hint = c.emptyHint = new QCPItemText(c.plot);
        // In the middle of the (middle) axis rect: across the histogram's three it covered the middle one's ticks.
        hint->position->setType(QCPItemPosition::ptAxisRectRatio);
        hint->position->setAxisRect(c.plot->axisRect(c.plot->axisRectCount() / 2));
        hint->setClipToAxisRect(false);
        hint->position->setCoords(0.5, 0.5);
        hint->setPositionAlignment(Qt::AlignCenter);
        hint->setTextAlignment(Qt::AlignCenter);
        hint->setText(c.fromSteps ? tr("No engine step yet") : c.plot == p ? tr("No request yet") : tr("No latency yet"));
        hint->setPadding(QMargins(6, 3, 6, 3));  // on the chart's background: over the histogram's middle ticks
    }
    styleEmptyHints();

    connect(session, &SessionData::stepsAppended, this, &ChartsPanel::appendSteps);
    connect(session, &SessionData::requestChanged, this, [this](int row) {
        m_changedRows.insert(row);
        markDirty();
    });
    connect(session, &SessionData::eventAdded, this, &ChartsPanel::addEventMarker);
    connect(session, &SessionData::cleared, this, &ChartsPanel::reset);
    // One replot at most every 33 ms while data arrives, and no timer at all while nothing changes
    // (PlotJuggler caps redraws the same way).
    m_replotTimer.setInterval(33);
    m_replotTimer.setSingleShot(true);
    connect(&m_replotTimer, &QTimer::timeout, this, [this] {
        if (m_dirty) refresh();
    });
}

QSize ChartsPanel::minimumSizeHint() const {
    const QMargins m = layout()->contentsMargins();
    const int chart = m_charts.empty() ? 0 : m_charts.front().plot->minimumWidth();
    return {chart + m.left() + m.right(), layout()->minimumSize().height()};
}

void ChartsPanel::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    const auto* grid = static_cast<QGridLayout*>(layout());
    const QMargins m = grid->contentsMargins();
    const int chart = m_charts.front().plot->minimumWidth();
    arrangeCharts(width() >= 2 * chart + grid->horizontalSpacing() + m.left() + m.right() ? 2 : 1);
}

void ChartsPanel::arrangeCharts(int columns) {
    if (columns == m_columns) return;
    m_columns = columns;
    auto* grid = static_cast<QGridLayout*>(layout());
    for (const Chart& c : m_charts) grid->removeWidget(c.plot);
    for (size_t i = 0; i < m_charts.size(); ++i) grid->addWidget(m_charts[i].plot, int(i) / columns, int(i) % columns);
    for (int col = 0; col < 2; ++col) grid->setColumnStretch(col, col < columns ? 1 : 0);
    const int rows = int(m_charts.size() + size_t(columns) - 1) / columns;
    for (int row = 0; row < int(m_charts.size()); ++row) grid->setRowStretch(row, row < rows ? 1 : 0);
    updateGeometry();  // the minimum height changed: the scroll area learns it
}

void ChartsPanel::markDirty() {
    m_dirty = true;
    if (!m_replotTimer.isActive()) m_replotTimer.start();
}

ChartsPanel::~ChartsPanel() = default;

ChartsPanel::Chart& ChartsPanel::addChart(const QString& name, const QString& title, const QString& yLabel, int row, int col) {
    auto* plot = new QCustomPlot(this);
    plot->installEventFilter(this);  // its paints: a chart that went stale out of view replots (eventFilter)
    plot->setMinimumSize(280, 140);  // four rows of charts still fit a 900-pixel-high window
    plot->setNoAntialiasingOnDrag(true);
    plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot->axisRect()->setRangeDrag(Qt::Horizontal);
    plot->axisRect()->setRangeZoom(Qt::Horizontal);
    plot->plotLayout()->insertRow(0);
    auto* titleElement = new QCPTextElement(plot, title, QFont(font().family(), font().pointSize(), QFont::Bold));
    plot->plotLayout()->addElement(0, 0, titleElement);
    plot->xAxis->setLabel(tr("engine time (s)"));
    plot->yAxis->setLabel(yLabel);
    placeLegendUnderTitle(plot, font());
    plot->setPlottingHints(QCP::phFastPolylines | QCP::phCacheLabels);
    plot->setNotAntialiasedElements(QCP::aeGrid | QCP::aeAxes | QCP::aePlottables | QCP::aeFills);
    static_cast<QGridLayout*>(layout())->addWidget(plot, row, col);
    m_charts.push_back({name, title, plot, true});
    const size_t index = m_charts.size() - 1;
    // Any manual zoom or pan stops following the live edge; a double click resumes it.
    connect(plot, &QCustomPlot::mousePress, this, [this, index] { m_charts[index].follow = false; });
    connect(plot, &QCustomPlot::mouseWheel, this, [this, index] { m_charts[index].follow = false; });
    connect(plot, &QCustomPlot::mouseDoubleClick, this, [this, index] {
        m_charts[index].follow = true;
        markDirty();
    });
    // As many y labels as fit the chart's height (two text lines apart: a nice step may add some), set
    // at each layout for every axis rect (the histogram has three); a changed count replots once more.
    connect(plot, &QCustomPlot::afterLayout, this, [plot] {
        // At least as tall as its title, legend rows and axis rect need (their margins are known only
        // after a layout): at 140 px the timeline's two key rows made QCustomPlot squeeze every row
        // under its text, and the keys lost their descenders at 1024x700.
        const int needed = plot->plotLayout()->minimumOuterSizeHint().height();
        if (needed > plot->minimumHeight()) plot->setMinimumHeight(needed);
        bool changed = false;
        for (QCPAxisRect* rect : plot->axisRects()) {
            QCPAxis* y = rect->axis(QCPAxis::atLeft);
            const int fit = std::clamp(rect->height() / (2 * QFontMetrics(y->tickLabelFont()).height()), 2, 6);
            changed |= y->ticker()->tickCount() != fit;
            y->ticker()->setTickCount(fit);
        }
        if (changed) plot->replot(QCustomPlot::rpQueuedReplot);
    });
    Theme::styleChart(plot);
    return m_charts.back();
}

QCPGraph* ChartsPanel::addGraph(QCustomPlot* plot, const QString& name, const QColor& color, bool step, bool fill) {
    QCPGraph* g = plot->addGraph();
    g->setName(name);
    g->setPen(QPen(color, 1.5));
    if (step) g->setLineStyle(QCPGraph::lsStepLeft);
    if (fill) {
        QColor c = color;
        c.setAlpha(60);
        g->setBrush(c);
    }
    g->setAdaptiveSampling(true);
    return g;
}

void ChartsPanel::appendSteps(int first, int count) {
    const auto& steps = m_session->steps();
    for (int i = first; i < first + count; ++i) {
        const StepStats& s = steps[size_t(i)].stats;
        const double t = s.start_time;
        m_running->addData(t, s.num_running);
        m_waiting->addData(t, s.num_waiting);
        m_batch->addData(t, s.num_scheduled_seqs);
        m_maxSeqs->addData(t, s.max_num_seqs);
        // Stacked: padding on top of prefill on top of decode.
        m_padding->addData(t, s.num_prefill_tokens + s.num_decode_tokens + s.num_padding_tokens);
        m_prefill->addData(t, s.num_prefill_tokens + s.num_decode_tokens);
        m_decode->addData(t, s.num_decode_tokens);
        m_budget->addData(t, s.max_num_batched_tokens);
        m_kvUsage->addData(t, s.kv_usage * 100);
        m_kvWaste->addData(t, s.kv_waste * 100);
        m_hitRate->addData(t, s.prefix_cache_queries ? 100.0 * double(s.prefix_cache_hits) / double(s.prefix_cache_queries) : 0.0);
        m_weights->addData(t, double(s.memory.weights_bytes) / kMiB);
        m_kvPool->addData(t, double(s.memory.kv_pool_bytes) / kMiB);
        m_activations->addData(t, double(s.memory.activation_bytes) / kMiB);
        m_rss->addData(t, double(s.memory.host_rss_bytes) / kMiB);
        if (s.memory.device_total_bytes > 0) m_gpu->addData(t, double(s.memory.device_used_bytes) / kMiB);
        // A step that left nothing to run is followed by idle time: its work ends with it (the step lines
        // would otherwise hold its batch across the gap to the next request).
        if (s.num_running == 0 && s.num_waiting == 0)
            for (QCPGraph* g : {m_batch, m_padding, m_prefill, m_decode}) g->addData(t + s.duration, 0);
        // The step's tokens spread over the buckets its time overlaps: a long step is not a spike in the
        // bucket where it ends.
        const double end = t + s.duration, output = steps[size_t(i)].numOutputTokens,
                     computed = s.num_prefill_tokens + s.num_decode_tokens;
        for (auto b = static_cast<long long>(t / kBucket); b <= static_cast<long long>(end / kBucket); ++b) {
            const double overlap = std::min(end, double(b + 1) * kBucket) - std::max(t, double(b) * kBucket);
            const double share = s.duration > 0 ? std::max(0.0, overlap) / s.duration : 1.0;
            if (share <= 0) continue;
            auto& bucket = m_buckets[b];
            bucket.first += output * share;
            bucket.second += computed * share;
        }
    }
    if (!m_gpu->data()->isEmpty()) m_gpu->addToLegend();  // no-op when there already
    markDirty();
}

void ChartsPanel::appendRequests() {
    const auto& requests = m_session->requests();
    QCPGraph* const graphs[] = {m_ttft, m_tpot, m_e2el};
    bool added = false;
    for (size_t i = 0; i < requests.size(); ++i) {
        const RequestRecord& r = requests[i];
        if (!r.metrics || m_plottedRequests.count(int(i))) continue;
        const RequestMetrics& m = *r.metrics;
        if (m.finish_reason == FinishReason::ABORT || m.finish_reason == FinishReason::ERROR) continue;
        m_plottedRequests.insert(int(i));
        const double seconds[] = {m.ttft(), m.tpot(), m.e2el()};
        for (size_t k = 0; k < 3; ++k) {
            if (seconds[k] <= 0) continue;  // no such figure (one token: no TPOT); log axis
            m_latencyMs[k].push_back(seconds[k] * 1e3);
            graphs[k]->addData(m.finish_time, seconds[k] * 1e3);
        }
        added = true;
    }
    if (!added) return;
    // The scatter's lines and the histogram mark the same percentiles of the same values.
    for (size_t k = 0; k < 3; ++k) {
        const std::vector<double>& values = m_latencyMs[k];
        const double p50 = kvscope::percentile(values, 50), p99 = kvscope::percentile(values, 99);
        for (size_t j = 0; j < 2; ++j) {
            QCPItemStraightLine* l = m_percentileLines[2 * k + j];
            l->point1->setCoords(0, j == 0 ? p50 : p99);
            l->point2->setCoords(1, j == 0 ? p50 : p99);
            l->setVisible(!values.empty());
        }
        m_histogram->setSamples(int(k), values, p50, p99);
    }
}

void ChartsPanel::updateTimeline() {
    const auto& requests = m_session->requests();
    auto& lanes = m_timeline->lanes();
    lanes.resize(requests.size());  // rows only grow between clears: one lane per row
    for (int row : m_changedRows) {
        if (row < 0 || row >= int(requests.size())) continue;
        const RequestRecord& r = requests[size_t(row)];
        TimelineLane& lane = lanes[size_t(row)];
        lane.requestId = r.requestId;
        lane.origin = r.origin;
        lane.color = r.color.isValid() ? r.color : m_colorOf ? m_colorOf(r.requestId) : Theme::series(7);
        lane.phases = r.phases;
        lane.finishTime = r.metrics ? r.metrics->finish_time : -1;
        lane.finishReason = r.metrics ? r.metrics->finish_reason : FinishReason::NONE;
    }
    m_changedRows.clear();
}

void ChartsPanel::addEventMarker(const SessionEvent& event) {
    if (!event.text.startsWith("rebuild")) return;  // model loads restart the charts anyway
    for (size_t i = 0; i < m_charts.size(); ++i) {
        if (!m_charts[i].engineTimeAxis) continue;
        QCustomPlot* plot = m_charts[i].plot;
        auto* line = new QCPItemStraightLine(plot);
        line->setPen(QPen(QColor(0xe0, 0x5a, 0x6a), 1.2, Qt::DashDotLine));
        line->point1->setCoords(event.time, 0);
        line->point2->setCoords(event.time, 1);
        line->setSelectable(false);
        // Under the data: a rebuild is followed at once by prefill chunks narrower than the line, which
        // it would hide.
        line->setLayer(QStringLiteral("grid"));
    }
    // One label, on the first chart (the others show the line); placed by layoutEventLabels().
    auto* label = new QCPItemText(m_charts.front().plot);
    label->setColor(QColor(0xe0, 0x5a, 0x6a));
    label->position->setType(QCPItemPosition::ptAbsolute);
    label->setSelectable(false);
    m_events.push_back({event.time, event.text, label});
    markDirty();
}

void ChartsPanel::layoutEventLabels() {
    // At every layout, in pixels, newest first (the live edge matters most): each label goes in the first
    // row where it clears the labels placed there, right of its line, or left of it where the chart's
    // right edge would cut it. A label with no free row (or no room either side) is hidden: its line's
    // tooltip still names it.
    if (m_events.empty()) return;
    QCustomPlot* plot = m_charts.front().plot;
    const QRect area = plot->axisRect()->rect();
    const QFontMetrics metrics(m_events.front().label->font());
    const int rowHeight = metrics.height() + 1, pad = 3;
    std::vector<std::vector<std::pair<double, double>>> rows(size_t(std::max(1, int(area.height() * 0.45) / rowHeight)));
    QColor backdrop = Theme::chartBackground();  // the text stays readable over the data lines
    backdrop.setAlpha(210);
    for (auto e = m_events.rbegin(); e != m_events.rend(); ++e) {
        // An arrow points at the label's line: two close rebuilds put one label right of its line and the
        // other left of its own, both between the lines, and neither said which line it was.
        // Every change of the step's rebuilds: a step's event joins its rebuilds with "; ", a rebuild its
        // changes with ", " (the label named the first rebuild alone, and hid "prefix caching on" behind
        // "block_size 16 -> 32"). Where the whole list fits neither side of the line, the first change and
        // how many more (the tooltip has them all).
        QStringList changes;
        for (const QString& part : e->text.split("; "))
            if (part.startsWith("rebuild")) changes << part.section('(', 0, 0).section(':', 1).trimmed().split(", ");
        const double x = plot->xAxis->coordToPixel(e->time);
        bool right = true;
        for (const QString& name : {changes.join(", "), changes.value(0) + QString(" +%1").arg(changes.size() - 1)}) {
            const QString toRight = QString::fromUtf8("\u25C2 ") + name, toLeft = name + QString::fromUtf8(" \u25B8");
            right = x + metrics.horizontalAdvance(toRight) + pad <= area.right();
            e->label->setText(right ? toRight : toLeft);
            if (right || x - metrics.horizontalAdvance(toLeft) - pad >= area.left() || changes.size() < 2) break;
        }
        const double width = metrics.horizontalAdvance(e->label->text()) + pad;
        const double left = right ? x : x - width;
        auto row = std::find_if(rows.begin(), rows.end(), [&](const auto& spans) {
            return std::none_of(spans.begin(), spans.end(), [&](const std::pair<double, double>& s) {
                return left < s.second + pad && s.first < left + width + pad;
            });
        });
        const bool fits = x >= area.left() && x <= area.right() && left >= area.left() && row != rows.end();
        e->label->setVisible(fits);
        if (!fits) continue;
        row->push_back({left, left + width});
        e->label->setBrush(backdrop);
        e->label->setPositionAlignment((right ? Qt::AlignLeft : Qt::AlignRight) | Qt::AlignTop);
        e->label->setPadding(right ? QMargins(pad, 0, 0, 0) : QMargins(0, 0, pad, 0));
        e->label->position->setCoords(x, area.top() + 2 + double(row - rows.begin()) * rowHeight);
    }
}

QString ChartsPanel::eventToolTip(const QCustomPlot* plot, const QPointF& pixel) const {
    if (!plot->axisRect()->rect().contains(pixel.toPoint())) return {};
    QStringList lines;
    for (const EventMarker& e : m_events)
        if (std::abs(plot->xAxis->coordToPixel(e.time) - pixel.x()) <= 4)
            lines << QString("%1 s: %2").arg(e.time, 0, 'f', 2).arg(e.text.toHtmlEscaped());
    return lines.join("<br>");
}

void ChartsPanel::reset() {
    for (Chart& c : m_charts) {
        for (int i = 0; i < c.plot->graphCount(); ++i) c.plot->graph(i)->data()->clear();
        for (int i = c.plot->itemCount() - 1; i >= 0; --i) {
            QCPAbstractItem* item = c.plot->item(i);
            // The engine's, not the data's.
            if (isSimulationWatermark(item) || item == c.emptyHint || std::find(m_notes.begin(), m_notes.end(), item) != m_notes.end())
                continue;
            if (std::find(m_percentileLines.begin(), m_percentileLines.end(), item) == m_percentileLines.end() &&
                !m_histogram->ownsItem(item))
                c.plot->removeItem(item);
            else
                item->setVisible(false);
        }
        c.follow = true;
    }
    m_gpu->removeFromLegend();
    for (auto& values : m_latencyMs) values.clear();
    m_histogram->clear();
    m_timeline->lanes().clear();
    m_changedRows.clear();
    m_buckets.clear();
    m_plottedRequests.clear();
    m_events.clear();  // their labels went with the other items
    markDirty();
}

void ChartsPanel::setSimulationLabel(const QString& label) {
    for (Chart& c : m_charts) setSimulationWatermark(c.plot, label);
    markDirty();
}

void ChartsPanel::setStepChartsNote(const QString& note) {
    for (QCPItemText* t : m_notes) t->parentPlot()->removeItem(t);
    m_notes.clear();
    if (!note.isEmpty()) {
        for (Chart& c : m_charts) {
            if (!c.fromSteps) continue;
            auto* text = new QCPItemText(c.plot);
            text->position->setType(QCPItemPosition::ptAxisRectRatio);
            text->position->setCoords(0.5, 0.5);
            text->setPositionAlignment(Qt::AlignCenter);
            text->setTextAlignment(Qt::AlignCenter);
            text->setText(note);
            text->setColor(c.plot->xAxis->labelColor());  // the theme's, as restyle() keeps it
            m_notes.push_back(text);
        }
    }
    markDirty();
}

QString ChartsPanel::emptyHint(const QCustomPlot* plot) const {
    for (const Chart& c : m_charts)
        if (c.plot == plot && c.emptyHint->visible()) return c.emptyHint->text();
    return {};
}

QString ChartsPanel::stepChartsNote(const QCustomPlot* plot) const {
    for (const QCPItemText* t : m_notes)
        if (t->parentPlot() == plot) return t->text();
    return {};
}

void ChartsPanel::refresh() {
    m_dirty = false;
    appendRequests();
    updateTimeline();
    // Throughput from 0.5 s buckets (the last one is still filling: scaled by its elapsed part). A
    // bucket without a step is 0, up to now: idle time reads as no throughput, not as the last value.
    QVector<double> keys, out, total;
    const double now = m_session->lastEngineTime();
    if (!m_buckets.empty()) {
        const long long last = std::max(m_buckets.rbegin()->first, static_cast<long long>(now / kBucket));
        for (long long bucket = m_buckets.begin()->first; bucket <= last; ++bucket) {
            const auto it = m_buckets.find(bucket);
            const double start = double(bucket) * kBucket;
            const double span = std::clamp(now - start, 0.05, kBucket);
            keys << start;
            out << (it == m_buckets.end() ? 0.0 : it->second.first / span);
            total << (it == m_buckets.end() ? 0.0 : it->second.second / span);
        }
        // The last bucket is drawn up to now (a step line's last point has no width of its own).
        keys << std::max(keys.last(), std::min(now, keys.last() + kBucket));
        out << out.last();
        total << total.last();
    }
    m_outputTps->setData(keys, out, true);
    m_totalTps->setData(keys, total, true);
    // Time starts at the first step, not at the model load: a session's first requests are not a
    // sliver at the right edge.
    const auto& steps = m_session->steps();
    const double begin = steps.empty() ? 0.0 : std::floor(steps.front().stats.start_time);
    const double end = std::max(begin + 1.0, now);
    const QCPRange time(begin, end + (end - begin) * 0.02);
    const bool noLatency = std::all_of(m_latencyMs.begin(), m_latencyMs.end(), [](const auto& v) { return v.empty(); });
    for (Chart& c : m_charts) {
        const bool empty = c.fromSteps ? steps.empty() : c.plot == m_timeline->parentPlot() ? m_timeline->lanes().empty() : noLatency;
        c.emptyHint->setVisible(empty && stepChartsNote(c.plot).isEmpty());
        if (c.follow && c.plot == m_histogramPlot) {
            m_histogram->rescale();
        } else if (c.follow && c.plot == m_timeline->parentPlot()) {
            c.plot->xAxis->setRange(time);
            c.plot->yAxis->setRange(-0.5, std::max(1.0, double(m_timeline->lanes().size())) - 0.5);
        } else if (c.follow) {
            // y follows the data; a limit line (max_num_seqs, the token budget) sets the scale only when
            // the data comes near it, so values of 1-3 under a limit of 256 do not lie flat on the axis.
            double data = 0, limit = 0;
            for (int i = 0; i < c.plot->graphCount(); ++i) {
                bool found = false;
                const QCPRange r = c.plot->graph(i)->getValueRange(found, QCP::sdBoth);
                if (!found) continue;
                const bool isLimit = c.plot->graph(i) == m_maxSeqs || c.plot->graph(i) == m_budget;
                (isLimit ? limit : data) = std::max(isLimit ? limit : data, r.upper);
            }
            const double top = limit > 0 && data >= 0.5 * limit ? std::max(data, limit) : data;
            c.plot->xAxis->setRange(time);
            if (c.name == "latency") c.plot->yAxis->setRange(latencyRange());
            else if (c.name != "kv") c.plot->yAxis->setRange(0, std::max(1.0, top * 1.12));
        }
        // Out of view, the replot waits for the chart's next paint (eventFilter): at 1024x700 most of the
        // grid is scrolled away, and a replot costs the GUI thread milliseconds per chart.
        if (c.plot->visibleRegion().isEmpty()) m_stalePlots.insert(c.plot);
        else c.plot->replot(QCustomPlot::rpQueuedReplot);
    }
}

bool ChartsPanel::eventFilter(QObject* watched, QEvent* event) {
    // A stale chart coming into view paints its old buffer once, then its replot follows at once.
    if (event->type() == QEvent::Paint) {
        if (auto it = m_stalePlots.find(qobject_cast<QCustomPlot*>(watched)); it != m_stalePlots.end()) {
            (*it)->replot(QCustomPlot::rpQueuedReplot);
            m_stalePlots.erase(it);
        }
    }
    return QWidget::eventFilter(watched, event);
}

QCPRange ChartsPanel::latencyRange() const {
    // From the plotted latencies alone (every one > 0): a rejected or empty request adds none, so the
    // log axis never reaches down to QCustomPlot's 1e-200 floor.
    double lo = 0, hi = 0;
    for (const std::vector<double>& values : m_latencyMs)
        for (double v : values) {
            lo = lo > 0 ? std::min(lo, v) : v;
            hi = std::max(hi, v);
        }
    if (lo <= 0) return QCPRange(1, 1000);
    return QCPRange(lo / 1.5, std::max(hi * 1.5, lo * 10));
}

void ChartsPanel::replotNow() {
    refresh();
    m_stalePlots.clear();
    for (Chart& c : m_charts) c.plot->replot(QCustomPlot::rpImmediateRefresh);
}

void ChartsPanel::styleEmptyHints() {
    for (const Chart& c : m_charts) {
        c.emptyHint->setColor(c.plot->xAxis->labelColor());
        c.emptyHint->setBrush(Theme::chartBackground());
    }
}

void ChartsPanel::restyle() {
    for (Chart& c : m_charts) Theme::styleChart(c.plot);
    for (QCPItemText* t : m_notes) t->setColor(t->parentPlot()->xAxis->labelColor());
    styleEmptyHints();
    markDirty();
}

}  // namespace kvscope::ui
