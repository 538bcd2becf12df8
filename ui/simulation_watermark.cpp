#include "simulation_watermark.h"

#include <qcustomplot.h>

#include <algorithm>

namespace kvscope::ui {

namespace {
const char* const kName = "simulationWatermark";

QCPItemText* find(const QCustomPlot* plot) {
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(plot->item(i)); t && t->objectName() == kName) return t;
    return nullptr;
}
}  // namespace

void setSimulationWatermark(QCustomPlot* plot, const QString& label) {
    QCPItemText* text = find(plot);
    if (label.isEmpty()) {
        if (text) plot->removeItem(text);
        return;
    }
    if (!text) {
        text = new QCPItemText(plot);
        text->setObjectName(kName);
        if (plot->layer("overlay")) text->setLayer("overlay");
        text->setClipToAxisRect(false);
        text->position->setType(QCPItemPosition::ptAxisRectRatio);
        // Top left: a label wider than a small chart runs off to the right, never over the y axis.
        text->position->setCoords(0.005, 0.005);
        text->setPositionAlignment(Qt::AlignTop | Qt::AlignLeft);
        text->setTextAlignment(Qt::AlignLeft);
        text->setPadding(QMargins(4, 1, 4, 1));
        // Amber on a translucent panel: readable on the dark and the light palette, over any series.
        text->setColor(QColor(0xe0, 0xa0, 0x40));
        text->setBrush(QColor(0, 0, 0, 110));
        QFont f = plot->font();
        f.setBold(true);
        f.setPointSizeF(std::max(6.5, f.pointSizeF() * 0.75));
        text->setFont(f);
    }
    // "simulated <GPU>" on a line of its own: what must show when a small chart cuts the rest.
    QString lines = label;
    const int comma = lines.indexOf(", ");
    if (comma > 0) lines.replace(comma, 2, "\n");
    text->setText(lines);
}

QString simulationWatermark(const QCustomPlot* plot) {
    const QCPItemText* text = find(plot);
    return text ? QString(text->text()).replace("\n", ", ") : QString();
}

bool isSimulationWatermark(const QCPAbstractItem* item) { return item && item->objectName() == kName; }

}  // namespace kvscope::ui
