// HintTableView: a QTableView that, while its model has no rows, says in its empty viewport what
// fills it and how (a first run's request table otherwise is a blank grid that teaches nothing).
#pragma once

#include <QTableView>

namespace kvscope::ui {

class HintTableView : public QTableView {
    Q_OBJECT
public:
    using QTableView::QTableView;
    void setEmptyHint(const QString& hint);
    QString emptyHint() const { return m_hint; }
    bool showsHint() const { return !m_hint.isEmpty() && (!model() || model()->rowCount() == 0); }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QString m_hint;
};

}  // namespace kvscope::ui
