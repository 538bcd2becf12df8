// Dark and light palettes (Fusion style) for the whole application, and the matching colours for
// QCustomPlot charts, which do not follow the widget palette by themselves. GUI thread only.
#pragma once

#include <QColor>

class QCustomPlot;

namespace kvscope::ui {

class Theme {
public:
    static void apply(bool dark);
    static bool isDark();
    static void styleChart(QCustomPlot* plot);
    static QColor chartBackground();
    static QColor chartForeground();
    static QColor chartGrid();
    // Text that reports a failure, readable (4.5:1) on this theme's Window and Base.
    static QColor errorText();
    // Series colours that read on both palettes.
    static QColor series(int index);
};

}  // namespace kvscope::ui
