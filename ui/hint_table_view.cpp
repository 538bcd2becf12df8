#include "hint_table_view.h"

#include <QPainter>

namespace kvscope::ui {

void HintTableView::setEmptyHint(const QString& hint) {
    m_hint = hint;
    viewport()->update();
}

void HintTableView::paintEvent(QPaintEvent* event) {
    QTableView::paintEvent(event);
    if (!showsHint()) return;
    QPainter p(viewport());
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(viewport()->rect().adjusted(12, 8, -12, -8), Qt::AlignCenter | Qt::TextWordWrap, m_hint);
}

}  // namespace kvscope::ui
