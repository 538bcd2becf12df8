#include "chart_legend.h"

#include <QFont>
#include <qcustomplot.h>

namespace kvscope::ui {

void placeLegendUnderTitle(QCustomPlot* plot, const QFont& font) {
    QCPLegend* legend = plot->legend;
    legend->setVisible(true);
    QFont legendFont = font;
    legendFont.setPointSizeF(legendFont.pointSizeF() * 0.82);
    legend->setFont(legendFont);
    legend->setFillOrder(QCPLegend::foColumnsFirst);
    legend->setBorderPen(Qt::NoPen);
    legend->setIconSize(14, 8);
    legend->setColumnSpacing(6);
    legend->setMargins(QMargins(4, 0, 4, 0));
    if (legend->layout()) legend->layout()->take(legend);  // out of the axis rect's inset layout
    plot->plotLayout()->insertRow(1);
    plot->plotLayout()->addElement(1, 0, legend);
    plot->plotLayout()->setRowStretchFactor(1, 0.001);
    plot->plotLayout()->setRowSpacing(0);
}

}  // namespace kvscope::ui
