// StallMonitor: measures how long the GUI thread's event loop is blocked. A 5 ms precise timer records
// how late each tick fires; the longest lateness is the worst stall a user could have felt. It ticks
// only while active (the engine works or a model loads): an idle window runs no timer.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

namespace kvscope::ui {

class StallMonitor : public QObject {
    Q_OBJECT
public:
    explicit StallMonitor(QObject* parent = nullptr);
    void start();
    // Starts or pauses the ticks; a pause is not a stall.
    void setActive(bool active);
    void reset();
    // The next tick's lateness is not counted (call after deliberate blocking work such as a screenshot).
    void skipInterval() { m_lastNs = -1; }
    double maxStallMs() const { return m_maxStallMs; }
    double meanLatenessMs() const { return m_ticks ? m_sumLatenessMs / double(m_ticks) : 0; }
    qint64 ticks() const { return m_ticks; }
    int stallsOver(int ms) const { return ms >= 50 ? m_over50 : m_over16; }

private:
    static constexpr int kIntervalMs = 5;
    QTimer m_timer;
    QElapsedTimer m_clock;
    qint64 m_lastNs = -1;
    double m_maxStallMs = 0;
    double m_sumLatenessMs = 0;
    qint64 m_ticks = 0;
    int m_over16 = 0;
    int m_over50 = 0;
};

}  // namespace kvscope::ui
