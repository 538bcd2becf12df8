// A one-line label that shows as much of its text as its width holds, elided ("...") where the rest is cut,
// and elides again when resized. Its text sets no width (a long status or note never widens the window);
// fullText() is the whole text. Rich text is given in parts (setParts) and cut between them.
#pragma once

#include <QLabel>

namespace kvscope::ui {

class ElidedLabel : public QLabel {
    Q_OBJECT
    Q_PROPERTY(QString fullText READ fullText WRITE setFullText)
public:
    explicit ElidedLabel(Qt::TextElideMode mode, QWidget* parent = nullptr);
    QString fullText() const { return m_fullText; }
    void setFullText(const QString& text);
    // Rich text: as many whole `parts` as the width holds, joined by `separator`, then "…" where later ones
    // are cut (cut inside, "16 cached" read "16 c").
    void setParts(const QStringList& parts, const QString& separator);

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
