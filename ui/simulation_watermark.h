// The "simulated <GPU>, <model>, step-time model vN" line every chart of a simulated run carries
// (GUI thread): in the plot itself, so an exported PNG or PDF cannot be passed off as a measurement.
#pragma once

#include <QString>

class QCustomPlot;
class QCPAbstractItem;

namespace kvscope::ui {

// Shows `label` in the top left corner of the plot's axis rect, beneath the data; an empty label
// removes it. Replots nothing: the caller's next replot shows it.
void setSimulationWatermark(QCustomPlot* plot, const QString& label);
// Its colours for the current theme (Theme::styleChart calls it).
void styleSimulationWatermark(QCustomPlot* plot);
// The watermark's text, "" when the plot has none (views, tests).
QString simulationWatermark(const QCustomPlot* plot);
// The watermark is the plot's own, not data: resets that clear a chart's items keep it.
bool isSimulationWatermark(const QCPAbstractItem* item);

}  // namespace kvscope::ui
