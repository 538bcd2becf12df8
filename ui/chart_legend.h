// Where every chart keeps its legend: in a row of the plot layout under the title (row 0), keys laid out
// in columns, never inside the axis rect, where QCustomPlot puts it and where it hid data (the bars of the
// benchmark comparison, the lines of a remote server's /metrics chart). GUI thread only.
#pragma once

class QCustomPlot;
class QFont;

namespace kvscope::ui {

// Moves plot's legend into a new row 1 (the plot layout's row 0 holds the chart's title) and shows it, in
// `font`, with small icons, so that a chart narrowed to a third of a 1024-pixel window keeps its keys.
void placeLegendUnderTitle(QCustomPlot* plot, const QFont& font);

}  // namespace kvscope::ui
