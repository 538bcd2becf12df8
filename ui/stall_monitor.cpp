#include "stall_monitor.h"

#include <algorithm>

namespace kvscope::ui {

StallMonitor::StallMonitor(QObject* parent) : QObject(parent), m_timer(this) {
    m_timer.setTimerType(Qt::PreciseTimer);
    m_timer.setInterval(kIntervalMs);
    connect(&m_timer, &QTimer::timeout, this, [this] {
        const qint64 now = m_clock.nsecsElapsed();
        if (m_lastNs >= 0) {
            const double late = std::max(0.0, double(now - m_lastNs) / 1e6 - kIntervalMs);
            m_maxStallMs = std::max(m_maxStallMs, late);
            m_sumLatenessMs += late;
            ++m_ticks;
            if (late > 16) ++m_over16;
            if (late > 50) ++m_over50;
        }
        m_lastNs = now;
    });
}

void StallMonitor::start() {
    m_clock.start();
    m_lastNs = -1;
    m_timer.start();
}

void StallMonitor::setActive(bool active) {
    if (active == m_timer.isActive()) return;
    if (!active) {
        m_timer.stop();
        return;
    }
    if (!m_clock.isValid()) m_clock.start();
    m_lastNs = -1;
    m_timer.start();
}

void StallMonitor::reset() {
    m_maxStallMs = m_sumLatenessMs = 0;
    m_ticks = m_over16 = m_over50 = 0;
    m_lastNs = -1;
}

}  // namespace kvscope::ui
