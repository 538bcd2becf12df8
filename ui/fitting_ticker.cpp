#include "fitting_ticker.h"

#include <cmath>

namespace kvscope::ui {

QString FittingTicker::getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) {
    if (std::abs(tick) >= 1000) return QString::number(tick / 1000, 'g', 3) + 'k';
    return QCPAxisTicker::getTickLabel(tick, locale, formatChar, precision);
}

void FittingTicker::generate(const QCPRange& range, const QLocale& locale, QChar formatChar, int precision,
                             QVector<double>& ticks, QVector<double>* subTicks, QVector<QString>* tickLabels) {
    QCPAxisRect* rect = m_axis->axisRect();
    m_width = rect->width();
    const QFontMetrics metrics(m_axis->tickLabelFont());
    const double gap = metrics.horizontalAdvance(QStringLiteral("00"));  // between neighbouring labels
    auto pixel = [&](double t) { return (t - range.lower) / range.size() * m_width; };
    // From six ticks down: the nice step QCustomPlot picks for a count may give more ticks than asked.
    for (int count = 6; count >= 1; --count) {
        setTickCount(count);
        QCPAxisTicker::generate(range, locale, formatChar, precision, ticks, subTicks, tickLabels);
        if (!tickLabels || m_width <= 0) return;
        bool fits = true;
        for (int i = 1; i < ticks.size() && fits; ++i) {
            const double halves = (metrics.horizontalAdvance((*tickLabels)[i - 1]) +
                                   metrics.horizontalAdvance((*tickLabels)[i])) / 2.0;
            fits = pixel(ticks[i]) - pixel(ticks[i - 1]) >= halves + gap;
        }
        if (fits) break;
    }
    // A label centred near an edge may reach past the rect's margins, where the neighbouring chart's
    // labels are: its tick stays, its text goes.
    const QMargins margins = rect->margins();
    for (int i = 0; i < ticks.size(); ++i) {
        const double half = metrics.horizontalAdvance((*tickLabels)[i]) / 2.0, x = pixel(ticks[i]);
        if (x - half < -margins.left() || x + half > m_width + margins.right()) (*tickLabels)[i].clear();
    }
}

bool FittingTicker::requeueIfResized() {
    if (m_axis->axisRect()->width() == m_width) return false;
    m_axis->parentPlot()->replot(QCustomPlot::rpQueuedReplot);
    return true;
}

}  // namespace kvscope::ui
