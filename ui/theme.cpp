#include "theme.h"

#include "simulation_watermark.h"

#include <QApplication>
#include <QPalette>
#include <QStyleFactory>
#include <qcustomplot.h>

namespace kvscope::ui {

namespace {
bool g_dark = true;
}

void Theme::apply(bool dark) {
    g_dark = dark;
    QApplication::setStyle(QStyleFactory::create("Fusion"));
    QPalette p;
    if (dark) {
        const QColor window(0x25, 0x27, 0x2b), base(0x1b, 0x1d, 0x21), text(0xdc, 0xdf, 0xe4);
        p.setColor(QPalette::Window, window);
        p.setColor(QPalette::WindowText, text);
        p.setColor(QPalette::Base, base);
        p.setColor(QPalette::AlternateBase, QColor(0x22, 0x25, 0x2a));
        p.setColor(QPalette::ToolTipBase, QColor(0x30, 0x33, 0x38));
        p.setColor(QPalette::ToolTipText, text);
        p.setColor(QPalette::Text, text);
        // Secondary text (placeholders, the block map's totals, the engine panel's status) is still
        // text: 4.5:1 on Window and Base like the rest (test_theme_contrast).
        p.setColor(QPalette::PlaceholderText, QColor(0x9c, 0xa1, 0xa8));
        p.setColor(QPalette::Button, QColor(0x2e, 0x31, 0x36));
        p.setColor(QPalette::ButtonText, text);
        p.setColor(QPalette::BrightText, Qt::white);
        p.setColor(QPalette::Highlight, QColor(0x2d, 0x6c, 0xb5));
        p.setColor(QPalette::HighlightedText, Qt::white);
        p.setColor(QPalette::Link, QColor(0x6c, 0xb6, 0xff));
        p.setColor(QPalette::Mid, QColor(0x3a, 0x3d, 0x42));
        p.setColor(QPalette::Dark, QColor(0x18, 0x1a, 0x1d));
        p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x70, 0x74, 0x7a));
        p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x70, 0x74, 0x7a));
        p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(0x70, 0x74, 0x7a));
    } else {
        p = QApplication::style()->standardPalette();
        p.setColor(QPalette::Window, QColor(0xf3, 0xf4, 0xf6));
        p.setColor(QPalette::Highlight, QColor(0x2f, 0x6f, 0xc0));
        p.setColor(QPalette::PlaceholderText, QColor(0x5c, 0x60, 0x66));
    }
    QApplication::setPalette(p);
    for (QWidget* w : QApplication::allWidgets())
        if (auto* plot = qobject_cast<QCustomPlot*>(w)) {
            styleChart(plot);
            plot->replot(QCustomPlot::rpQueuedReplot);
        }
}

bool Theme::isDark() { return g_dark; }

QColor Theme::errorText() { return g_dark ? QColor(0xff, 0x7b, 0x86) : QColor(0xb3, 0x26, 0x1e); }

QColor Theme::chartBackground() { return g_dark ? QColor(0x1b, 0x1d, 0x21) : QColor(Qt::white); }
QColor Theme::chartForeground() { return g_dark ? QColor(0xc8, 0xcc, 0xd2) : QColor(0x30, 0x33, 0x38); }
QColor Theme::chartGrid() { return g_dark ? QColor(0x33, 0x37, 0x3d) : QColor(0xe2, 0xe4, 0xe8); }

QColor Theme::series(int index) {
    static const QColor colors[] = {QColor(0x4e, 0x9a, 0xf0), QColor(0xf0, 0x8a, 0x3c), QColor(0x4c, 0xc2, 0x7a),
                                    QColor(0xe0, 0x5a, 0x6a), QColor(0xa9, 0x7b, 0xe8), QColor(0xd8, 0xc0, 0x40),
                                    QColor(0x40, 0xc8, 0xc8), QColor(0x9a, 0x9e, 0xa6)};
    return colors[index % 8];
}

void Theme::styleChart(QCustomPlot* plot) {
    plot->setBackground(chartBackground());
    const QColor fg = chartForeground(), grid = chartGrid();
    for (QCPAxisRect* rect : plot->axisRects()) {
        rect->setBackground(chartBackground());
        for (QCPAxis* axis : rect->axes()) {
            axis->setBasePen(QPen(fg, 1));
            axis->setTickPen(QPen(fg, 1));
            axis->setSubTickPen(QPen(fg, 1));
            axis->setTickLabelColor(fg);
            axis->setLabelColor(fg);
            axis->grid()->setPen(QPen(grid, 1, Qt::SolidLine));
            axis->grid()->setSubGridVisible(false);
            axis->grid()->setZeroLinePen(Qt::NoPen);
        }
    }
    if (plot->legend) {
        plot->legend->setBrush(QColor(chartBackground().red(), chartBackground().green(), chartBackground().blue(), 200));
        plot->legend->setTextColor(fg);
        plot->legend->setBorderPen(Qt::NoPen);
    }
    for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
        if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i))) title->setTextColor(fg);
    styleSimulationWatermark(plot);
}

}  // namespace kvscope::ui
