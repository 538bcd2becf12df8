#include "log_ticker.h"

#include <cmath>

namespace kvscope::ui {

QVector<double> LogTicker::createTickVector(double tickStep, const QCPRange& range) {
    if (!(range.lower > 0) || !(range.upper > range.lower)) return QCPAxisTickerLog::createTickVector(tickStep, range);
    if (std::log10(range.upper / range.lower) >= tickCount()) return QCPAxisTickerLog::createTickVector(tickStep, range);
    // Mantissas per decade, densest first: the densest set that gives no more ticks than asked (and at least 2).
    static const QVector<QVector<double>> kSets = {{1, 2, 5}, {1, 3}, {1}};
    const int first = int(std::floor(std::log10(range.lower))), last = int(std::ceil(std::log10(range.upper)));
    QVector<double> best;
    for (const QVector<double>& set : kSets) {
        QVector<double> ticks;
        for (int e = first; e <= last; ++e)
            for (double m : set) {
                const double v = m * std::pow(10.0, e);
                if (v >= range.lower && v <= range.upper) ticks << v;
            }
        if (ticks.size() >= 2) best = ticks;
        if (ticks.size() >= 2 && ticks.size() <= tickCount() + 1) return ticks;
    }
    // Under a factor of 2 (one or no 1-2-5 value inside): linear ticks read well there.
    return best.size() >= 2 ? best : QCPAxisTicker::createTickVector(tickStep, range);
}

QVector<double> LogTicker::createSubTickVector(int subTickCount, const QVector<double>& ticks) {
    for (double t : ticks) {
        const double e = std::log10(t);
        if (std::abs(e - std::round(e)) > 1e-9) return {};
    }
    return QCPAxisTickerLog::createSubTickVector(subTickCount, ticks);
}

}  // namespace kvscope::ui
