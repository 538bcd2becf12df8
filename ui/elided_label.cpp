#include "elided_label.h"

#include <QResizeEvent>
#include <QTextDocument>

#include <algorithm>

namespace kvscope::ui {

ElidedLabel::ElidedLabel(Qt::TextElideMode mode, QWidget* parent) : QLabel(parent), m_mode(mode) {
    setTextFormat(Qt::PlainText);
    setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
}

void ElidedLabel::setFullText(const QString& text) {
    if (text == m_fullText && m_parts.isEmpty()) return;
    m_parts.clear();
    setTextFormat(Qt::PlainText);
    m_fullText = text;
    elide();
}

void ElidedLabel::setParts(const QStringList& parts, const QString& separator) {
    if (parts == m_parts && separator == m_separator && !parts.isEmpty()) return;
    m_parts = parts;
    m_separator = separator;
    m_fullText = parts.join(separator);
    setTextFormat(Qt::RichText);
    elide();
}

void ElidedLabel::resizeEvent(QResizeEvent* event) {
    QLabel::resizeEvent(event);
    elide();
}

void ElidedLabel::elide() {
    const int width = std::max(0, contentsRect().width() - 2 * margin() - 2);
    if (m_parts.isEmpty()) {
        setText(fontMetrics().elidedText(m_fullText, m_mode, width));
        return;
    }
    QTextDocument measure;
    measure.setDefaultFont(font());
    measure.setDocumentMargin(0);
    for (qsizetype n = m_parts.size(); n >= 1; --n) {
        const QString text = n == m_parts.size() ? m_fullText : QStringList(m_parts.mid(0, n)).join(m_separator) + m_separator + "\u2026";
        measure.setHtml(text);
        if (measure.idealWidth() <= width) {
            setText(text);
            return;
        }
    }
    setText(m_parts.front());  // the first part alone, cut by the edge where even it is too wide
}

}  // namespace kvscope::ui
