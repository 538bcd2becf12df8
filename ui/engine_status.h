// EngineStatus: what the status bar says about the engine, taken from one EngineUpdate (GUI thread):
// the request counts the worker read when it made the update and the KV snapshot the block map shows.
// Nothing here is remembered from earlier steps, so after a stop, a reload, a rebuild or a benchmark's
// end the status bar, the block map and the panes cannot disagree.
#pragma once

#include "kv/kv_cache_snapshot.h"

#include <QString>
#include <QStringList>

#include <memory>

namespace kvscope::ui {

struct EngineStatus {
    qint64 step = 0;              // steps the current engine has run
    int numRunning = 0;           // requests with status RUNNING
    int numWaiting = 0;           // WAITING or PREEMPTED: not in the batch
    int numPreempted = 0;         // of numWaiting: preempted, to be recomputed
    qint64 totalPreemptions = 0;  // since the model was loaded
    bool idle = true;             // EngineController::isIdle() when the update was applied
    std::shared_ptr<const KvCacheSnapshot> kv;  // null before the first snapshot
    QString simulation;  // the loaded engine's simulation label; empty on a real backend
    QString remote;      // RemoteTarget::label() while connected to a remote engine; empty for the local one
    double serverKvUsage = -1;  // remote: the KV usage its /metrics reported last (0..1); -1 = not reported
};

// The line's figures, most important first (a narrow window drops the last ones), and the line itself.
inline const QString kStatusSeparator = QStringLiteral("  |  ");
QStringList statusParts(const EngineStatus& status);
QString statusText(const EngineStatus& status);

}  // namespace kvscope::ui
