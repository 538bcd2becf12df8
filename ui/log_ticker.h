// LogTicker: ticks for a logarithmic axis that spans less than a few decades (the latency chart: TPOT of
// 8 ms to E2EL of 200 ms). QCPAxisTickerLog falls back to linear ticks below 1.6 decades, which on a log
// scale crowd the top (100, 150, 200 over each other) and leave the bottom without a label. This one takes
// the 1-2-5 values of each decade (or 1-3, or the powers of ten alone) in the range, as many as the tick
// count allows; wider ranges keep QCPAxisTickerLog's decades.
#pragma once

#include <qcustomplot.h>

namespace kvscope::ui {

class LogTicker : public QCPAxisTickerLog {
protected:
    QVector<double> createTickVector(double tickStep, const QCPRange& range) override;
    // None between 1-2-5 ticks (QCPAxisTickerLog's would be spaced for decades); a decade's as before.
    QVector<double> createSubTickVector(int subTickCount, const QVector<double>& ticks) override;
};

}  // namespace kvscope::ui
