// A one-line label that shows as much of its text as its width holds, elided ("...") where the rest is cut,
// and elides again when resized. Its text sets no width (a long status or note never widens the window);
// fullText() is the whole text.
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

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void elide();
    Qt::TextElideMode m_mode;
    QString m_fullText;
};

}  // namespace kvscope::ui
