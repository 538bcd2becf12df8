#include "simulation_watermark.h"

#include "theme.h"

#include <QFontMetrics>

#include <qcustomplot.h>

#include <algorithm>

namespace kvscope::ui {

namespace {
const char* const kName = "simulationWatermark";
const char* const kLabel = "simulationLabel";  // the whole label, whatever the chart has room to show

// Lays the label out for the axis rect's width: "simulated <GPU>" on the first line, the rest (model,
// step-time model) packed onto as many lines as it needs, broken at its commas; a part wider than the
// chart on its own is elided with a visible ellipsis. Run at each layout, so a resize refits it.
void fit(QCustomPlot* plot, QCPItemText* text) {
    const QString label = text->property(kLabel).toString();
    const QMargins pad = text->padding();
    // From the axis rect's left edge to the plot's right one: the histogram's first axis rect is a third
    // of its plot, and the label may run over the others.
    const int room = std::max(40, plot->viewport().right() - plot->axisRect()->left() - pad.left() - pad.right() - 6);
    const QFontMetrics fm(text->font());
    const QStringList parts = label.split(", ");
    QStringList lines;
    for (int i = 0; i < parts.size(); ++i) {
        // A comma ends every part but the GPU's line and the last one, as in the label.
        const QString part = parts[i] + (i > 0 && i + 1 < parts.size() ? "," : "");
        if (i >= 2 && fm.horizontalAdvance(lines.back() + " " + part) <= room) lines.back() += " " + part;
        else lines << part;
    }
    for (QString& line : lines) line = fm.elidedText(line, Qt::ElideRight, room);
    const QString shown = lines.join("\n");
    if (shown != text->text()) text->setText(shown);
}

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
        // Under the data (above the grid): a watermark that hides a line or a point costs the chart its
        // data; drawn beneath them it still marks every picture, exports included.
        if (plot->layer("grid")) text->setLayer("grid");
        text->setClipToAxisRect(false);
        text->position->setType(QCPItemPosition::ptAxisRectRatio);
        // Top left: a label wider than a small chart runs off to the right, never over the y axis.
        text->position->setCoords(0.005, 0.005);
        text->setPositionAlignment(Qt::AlignTop | Qt::AlignLeft);
        text->setTextAlignment(Qt::AlignLeft);
        text->setPadding(QMargins(4, 1, 4, 1));
        QFont f = plot->font();
        f.setBold(true);
        f.setPointSizeF(std::max(6.5, f.pointSizeF() * 0.75));
        text->setFont(f);
        QObject::connect(plot, &QCustomPlot::afterLayout, text, [plot, text] { fit(plot, text); });
    }
    text->setProperty(kLabel, label);
    styleSimulationWatermark(plot);
    fit(plot, text);
}

void styleSimulationWatermark(QCustomPlot* plot) {
    QCPItemText* text = find(plot);
    if (!text) return;
    // Amber on the chart's own background, a little translucent over the grid lines: dark amber on the light
    // palette (the light one on grey was hard to read there).
    const bool dark = Theme::isDark();
    text->setColor(dark ? QColor(0xe0, 0xa0, 0x40) : QColor(0x9a, 0x5b, 0x00));
    QColor panel = Theme::chartBackground();
    panel.setAlpha(190);
    text->setBrush(panel);
}

QString simulationWatermark(const QCustomPlot* plot) {
    const QCPItemText* text = find(plot);
    return text ? text->property(kLabel).toString() : QString();
}

bool isSimulationWatermark(const QCPAbstractItem* item) { return item && item->objectName() == kName; }

}  // namespace kvscope::ui
