#include "request_table_model.h"

#include "session_data.h"

#include <QBrush>

namespace kvscope::ui {

RequestTableModel::RequestTableModel(SessionData* session, QObject* parent)
    : QAbstractTableModel(parent), m_session(session) {
    m_rows = int(session->requests().size());
    connect(session, &SessionData::requestsAdded, this, [this](int first, int last) {
        beginInsertRows({}, first, last);
        m_rows = last + 1;
        endInsertRows();
    });
    connect(session, &SessionData::requestChanged, this, [this](int row) {
        if (row < m_rows) emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
    });
    connect(session, &SessionData::cleared, this, [this] {
        beginResetModel();
        m_rows = 0;
        endResetModel();
    });
}

int RequestTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : m_rows; }
int RequestTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RequestTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    static const char* names[] = {"Request", "Origin", "State", "Prompt", "Output", "Cached", "Preempt.", "Blocks",
                                  "TTFT ms", "TPOT ms", "E2EL ms"};
    static const char* tips[] = {"request_id", "The pane or benchmark that sent it",
                                 "waiting, running, preempted or finished (finish reason)", "Prompt tokens",
                                 "Output tokens so far", "Prompt tokens served from the prefix cache",
                                 "Times preempted (blocks taken back, recomputed later)", "KV blocks in its block table",
                                 "Time to first token", "Time per output token (vLLM): (E2EL - TTFT) / (output - 1)",
                                 "End-to-end latency"};
    if (role == Qt::DisplayRole) return tr(names[section]);
    if (role == Qt::ToolTipRole) return tr(tips[section]);
    return {};
}

QVariant RequestTableModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const RequestRecord& r = m_session->requests()[size_t(index.row())];
    if (role == RequestIdRole) return r.requestId;
    if (role == Qt::DecorationRole && index.column() == Id) return r.color.isValid() ? QVariant(r.color) : QVariant();
    if (role == Qt::TextAlignmentRole && index.column() >= Prompt) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && !r.error.isEmpty()) return r.error;
    if (role != Qt::DisplayRole) return {};
    auto ms = [](double s) { return s >= 0 ? QVariant(QString::number(s * 1e3, 'f', 1)) : QVariant(QString()); };
    switch (Column(index.column())) {
    case Id: return r.requestId;
    case Origin: return r.origin;
    case State:
        return r.status == RequestStatus::FINISHED ? QString("finished (%1)").arg(finishReasonName(r.finishReason))
                                                   : statusName(r.status);
    case Prompt: return r.numPromptTokens;
    case Output: return r.numOutputTokens;
    case Cached: return r.numCachedTokens;
    case Preemptions: return r.numPreemptions;
    case Blocks: return int(r.blockTable.size());
    case Ttft: return ms(r.ttft);
    case Tpot: return r.metrics ? ms(r.metrics->tpot()) : QVariant(QString());
    case E2el: return r.metrics ? ms(r.metrics->e2el()) : QVariant(QString());
    case ColumnCount: break;
    }
    return {};
}

}  // namespace kvscope::ui
