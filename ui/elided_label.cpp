#include "elided_label.h"

#include <QResizeEvent>
#include <QTextDocument>

#include <algorithm>

namespace kvscope::ui {

QString elidedParts(const QStringList& parts, const QString& separator, qreal width,
                    const std::function<qreal(const QString&)>& widthOf) {
    if (parts.isEmpty()) return {};
    for (qsizetype n = parts.size(); n >= 1; --n) {
        const QString text = QStringList(parts.mid(0, n)).join(separator) + (n < parts.size() ? separator + "\u2026" : "");
        if (widthOf(text) <= width) return text;
    }
    return parts.front();
}

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

void ElidedLabel::setParts(const QStringList& parts, const QString& separator, Qt::TextFormat format) {
    if (parts == m_parts && separator == m_separator && format == textFormat() && !parts.isEmpty()) return;
    m_parts = parts;
    m_separator = separator;
    m_fullText = parts.join(separator);
    setTextFormat(format);
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
    if (textFormat() != Qt::RichText) {
        const QFontMetrics metrics = fontMetrics();
        const QString fitted = elidedParts(m_parts, m_separator, width, [&](const QString& t) { return metrics.horizontalAdvance(t); });
        setText(metrics.elidedText(fitted, m_mode, width));  // a first part wider than the label, by character
        return;
    }
    QTextDocument measure;
    measure.setDefaultFont(font());
    measure.setDocumentMargin(0);
    setText(elidedParts(m_parts, m_separator, width, [&](const QString& t) {
        measure.setHtml(t);
        return measure.idealWidth();
    }));
}

}  // namespace kvscope::ui
