// FittingTicker: a QCustomPlot ticker for a horizontal axis that places only as many ticks as its
// labels fit side by side at the axis's current width (GUI thread). A narrow axis (the latency
// histogram's three side-by-side axes) gets fewer ticks rather than labels printed over each other,
// and a label that would stick out of its axis rect's outer bounds (into the next chart) is left blank.
// Labels from 1000 on read "1.5k". The ticker learns the width at the plot's last layout;
// requeueIfResized() replots once more when the layout has changed it since.
#pragma once

#include <qcustomplot.h>

namespace kvscope::ui {

class FittingTicker : public QCPAxisTicker {
public:
    explicit FittingTicker(QCPAxis* axis) : m_axis(axis) {}

    void generate(const QCPRange& range, const QLocale& locale, QChar formatChar, int precision, QVector<double>& ticks,
                  QVector<double>* subTicks, QVector<QString>* tickLabels) override;
    // After a layout: true (and a replot queued) when the axis is now a different width than the
    // ticks were placed for.
    bool requeueIfResized();

protected:
    QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override;

private:
    QCPAxis* m_axis;
    int m_width = -1;  // the axis width the last ticks were placed for
};

}  // namespace kvscope::ui
