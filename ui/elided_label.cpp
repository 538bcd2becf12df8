#include "elided_label.h"

#include <QResizeEvent>

#include <algorithm>

namespace kvscope::ui {

ElidedLabel::ElidedLabel(Qt::TextElideMode mode, QWidget* parent) : QLabel(parent), m_mode(mode) {
    setTextFormat(Qt::PlainText);
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
}

void ElidedLabel::setFullText(const QString& text) {
    if (text == m_fullText) return;
    m_fullText = text;
    elide();
}

void ElidedLabel::resizeEvent(QResizeEvent* event) {
    QLabel::resizeEvent(event);
    elide();
}

void ElidedLabel::elide() {
    const int width = std::max(0, contentsRect().width() - 2 * margin() - 2);
    setText(fontMetrics().elidedText(m_fullText, m_mode, width));
}

}  // namespace kvscope::ui
