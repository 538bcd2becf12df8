// RemoteServerView: what stands in for the KV block map while the workbench is connected to a remote
// engine (GUI thread). A remote engine exposes no block table, so the view says so and shows what its
// /metrics reports instead: a KV-usage gauge and a chart of KV usage, requests running and waiting over
// time (EngineController::serverSamples(), on the requests' clock). A series the engine does not report
// is named so in the legend ("running (not reported)") and left out, never drawn as zero: in the legend,
// not in a line of its own. The target is one line, elided to the width (the whole note in its tooltip):
// a wrapped note grew past the height the splitter gave the view at 1024x700 and cut the chart's axis.
// So the view keeps one height whatever the target and whatever the engine reports. The chart is exported
// as charts/server_metrics.png.
#pragma once

#include "remote_target.h"

#include <QWidget>

class QCustomPlot;
class QProgressBar;

namespace kvscope::ui {

class ElidedLabel;

class RemoteServerView : public QWidget {
    Q_OBJECT
public:
    explicit RemoteServerView(QWidget* parent = nullptr);
    QCustomPlot* chart() const { return m_chart; }
    QProgressBar* gauge() const { return m_gauge; }
    // The whole note: the target and why there is no block map (the label shows the target, elided).
    QString noteText() const;

public slots:
    void setTarget(const kvscope::ui::RemoteTarget& target);
    // Every sample so far (the chart is redrawn from them: one per second, cheap).
    void setSamples(const kvscope::ui::ServerSamples& samples);
    // While the latest scrape failed, the note line says why (in the error colour) instead of the target.
    void setScrapeHealth(const kvscope::ui::ScrapeHealth& health);
    void restyle();

private:
    void showNote();

    RemoteTarget m_target;
    ScrapeHealth m_health;
    ElidedLabel* m_note;
    QProgressBar* m_gauge;
    QCustomPlot* m_chart;
};

}  // namespace kvscope::ui
