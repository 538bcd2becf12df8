// RequestTableModel: every request of the session as a table row (GUI thread), fed by SessionData.
// Keeps its own row count so that inserts are announced before views see them.
#pragma once

#include <QAbstractTableModel>

namespace kvscope::ui {

class SessionData;

class RequestTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Id, Origin, State, Prompt, Output, Cached, Preemptions, Blocks, Ttft, Tpot, E2el, ColumnCount };
    static constexpr int RequestIdRole = Qt::UserRole + 1;

    explicit RequestTableModel(SessionData* session, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    SessionData* m_session;
    int m_rows = 0;
};

}  // namespace kvscope::ui
