// A one-line label that shows as much of its text as its width holds, elided ("...") where the rest is cut,
// and elides again when resized. Its text sets no width (a long status or note never widens the window);
// fullText() is the whole text. A list of figures is given in parts (setParts) and cut between them.
#pragma once

#include <QLabel>

#include <functional>

namespace kvscope::ui {

// As many whole `parts` as `width` holds, joined by `separator`, then "…" where later ones are cut (cut
// inside, "16 cached" read "16 c"); the first part alone where even it is too wide. `widthOf` measures a
// candidate: QFontMetrics::horizontalAdvance for plain text, a QTextDocument for rich text. Plain text
// may then be elided by character, for a first part wider than `width`.
QString elidedParts(const QStringList& parts, const QString& separator, qreal width,
                    const std::function<qreal(const QString&)>& widthOf);

class ElidedLabel : public QLabel {
    Q_OBJECT
    Q_PROPERTY(QString fullText READ fullText WRITE setFullText)
public:
    explicit ElidedLabel(Qt::TextElideMode mode, QWidget* parent = nullptr);
    QString fullText() const { return m_fullText; }
    void setFullText(const QString& text);
    // Whole parts as elidedParts() fits them; `format` says whether they are rich text (HTML) or plain.
    void setParts(const QStringList& parts, const QString& separator, Qt::TextFormat format = Qt::RichText);

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void elide();
    Qt::TextElideMode m_mode;
    QString m_fullText;
    QStringList m_parts;
    QString m_separator;
};

}  // namespace kvscope::ui
