#include "remote_server_view.h"

#include "chart_legend.h"
#include "elided_label.h"
#include "theme.h"

#include <QProgressBar>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>

namespace kvscope::ui {

RemoteServerView::RemoteServerView(QWidget* parent) : QWidget(parent) {
    setObjectName("remoteServerView");
    m_note = new ElidedLabel(Qt::ElideMiddle, this);
    m_note->setObjectName("remoteNote");
    QFont bold = m_note->font();
    bold.setBold(true);
    m_note->setFont(bold);
    m_note->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
    m_gauge = new QProgressBar(this);
    m_gauge->setObjectName("remoteKvGauge");
    m_gauge->setRange(0, 1000);
    m_gauge->setFormat(tr("KV cache usage: not reported yet"));
    m_gauge->setToolTip(tr("KV cache usage as the server's /metrics reports it (vllm:kv_cache_usage_perc, "
                           "sglang:token_usage, llamacpp:kv_cache_usage_ratio, kvscope:kv_cache_usage_perc)"));
    m_chart = new QCustomPlot(this);
    m_chart->setMinimumHeight(170);  // room for both axes and the legend at 1024x700
    m_chart->plotLayout()->insertRow(0);
    m_chart->plotLayout()->addElement(0, 0, new QCPTextElement(m_chart, tr("Server /metrics over time (s)"),
                                                               QFont(font().family(), font().pointSize(), QFont::Bold)));
    // No x label: the title says seconds, and a short window keeps the tick labels.
    m_chart->yAxis->setLabel(tr("requests"));
    m_chart->yAxis2->setVisible(true);
    m_chart->yAxis2->setLabel(tr("KV usage %"));
    m_chart->yAxis2->setRange(0, 100);
    placeLegendUnderTitle(m_chart, font());
    m_chart->addGraph(m_chart->xAxis, m_chart->yAxis2)->setName(tr("KV usage %"));
    m_chart->addGraph()->setName(tr("running"));
    m_chart->addGraph()->setName(tr("waiting"));
    restyle();
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(m_note);
    layout->addWidget(m_gauge);
    layout->addWidget(m_chart, 1);
}

QString RemoteServerView::noteText() const { return m_note->toolTip(); }

void RemoteServerView::restyle() {
    Theme::styleChart(m_chart);
    const int colors[] = {0, 1, 3};
    for (int i = 0; i < m_chart->graphCount(); ++i) {
        QPen pen(Theme::series(colors[i]), 2);
        m_chart->graph(i)->setPen(pen);
        m_chart->graph(i)->setLineStyle(QCPGraph::lsStepLeft);
    }
    showNote();  // the error colour is the theme's
    m_chart->replot(QCustomPlot::rpQueuedReplot);
}

void RemoteServerView::setTarget(const RemoteTarget& target) {
    m_target = target;
    m_health = {};
    showNote();
    setSamples({});
}

void RemoteServerView::setScrapeHealth(const ScrapeHealth& health) {
    if (health == m_health) return;
    m_health = health;
    showNote();
}

void RemoteServerView::showNote() {
    const QString about = tr("A remote engine exposes no block table, so there is no block map: this is what its "
                             "/metrics reports, scraped every second.");
    if (m_health.failing) {
        // A server without /metrics (llama-server without --metrics answers 501) or one that stopped
        // answering: the chart would otherwise just stop, as if nothing ran.
        // The URL is the target's (in the tooltip): the line keeps the status and the server's reason, whose
        // end is often the hint ("Start it with `--metrics`"), so it is elided in the middle.
        const QString why =
            tr("/metrics fails (%1 of %2 scrapes): %3").arg(m_health.failed).arg(m_health.scrapes).arg(m_health.lastError);
        m_note->setFullText(why);
        QPalette error = palette();
        error.setColor(QPalette::WindowText, Theme::errorText());
        m_note->setPalette(error);
        m_note->setToolTip(why + "\n" + m_target.label() + "\n" + about);
    } else {
        m_note->setFullText(m_target.label());
        m_note->setPalette(palette());
        m_note->setToolTip(m_target.label() + "\n" + about);
    }
}

void RemoteServerView::setSamples(const ServerSamples& samples) {
    QVector<double> t, kv, running, waiting;
    QVector<double> tKv;
    bool anyKv = false, anyRunning = false, anyWaiting = false;
    for (const ServerSample& s : samples) {
        // A series the engine does not report is left out, never drawn as zero.
        if (s.kv_cache_usage) {
            tKv << s.time;
            kv << *s.kv_cache_usage * 100;
            anyKv = true;
        }
        t << s.time;
        running << s.num_requests_running.value_or(qQNaN());
        waiting << s.num_requests_waiting.value_or(qQNaN());
        anyRunning |= bool(s.num_requests_running);
        anyWaiting |= bool(s.num_requests_waiting);
    }
    m_chart->graph(0)->setData(tKv, kv, true);
    m_chart->graph(1)->setData(t, running, true);
    m_chart->graph(2)->setData(t, waiting, true);
    // Before the first sample nothing is known to be missing.
    const QString unreported = samples.empty() ? QString() : tr(" (not reported)");
    m_chart->graph(0)->setName(tr("KV usage %") + (anyKv ? QString() : unreported));
    m_chart->graph(1)->setName(tr("running") + (anyRunning ? QString() : unreported));
    m_chart->graph(2)->setName(tr("waiting") + (anyWaiting ? QString() : unreported));
    if (anyKv) {
        m_gauge->setValue(int(kv.back() * 10));
        m_gauge->setFormat(tr("KV cache usage %1% (server)").arg(kv.back(), 0, 'f', 1));
    } else {
        m_gauge->setValue(0);
        m_gauge->setFormat(samples.empty() ? tr("KV cache usage: not reported yet") : tr("KV cache usage: not reported"));
    }
    if (!t.isEmpty()) {
        m_chart->xAxis->setRange(t.front(), std::max(t.back(), t.front() + 1));
        double peak = 1;
        for (double v : running + waiting)
            if (!qIsNaN(v)) peak = std::max(peak, v);
        m_chart->yAxis->setRange(0, peak * 1.15);
    }
    m_chart->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace kvscope::ui
