// RemoteServerView: what stands in for the KV block map while the workbench is connected to a remote
// engine (GUI thread). A remote engine exposes no block table, so the view says so and shows what its
// /metrics reports instead: a KV-usage gauge and a chart of KV usage, requests running and waiting over
// time (EngineController::serverSamples(), on the requests' clock). Series the engine does not report
// are named as such. The chart is exported as charts/server_metrics.png.
#pragma once

#include "remote_target.h"

#include <QWidget>

class QCustomPlot;
class QLabel;
class QProgressBar;

namespace kvscope::ui {

class RemoteServerView : public QWidget {
    Q_OBJECT
public:
    explicit RemoteServerView(QWidget* parent = nullptr);
    QCustomPlot* chart() const { return m_chart; }
    QProgressBar* gauge() const { return m_gauge; }
    QString noteText() const;

public slots:
    void setTarget(const kvscope::ui::RemoteTarget& target);
    // Every sample so far (the chart is redrawn from them: one per second, cheap).
    void setSamples(const kvscope::ui::ServerSamples& samples);
    void restyle();

private:
    QLabel* m_note;
    QProgressBar* m_gauge;
    QLabel* m_unreported;
    QCustomPlot* m_chart;
};

}  // namespace kvscope::ui
