#include "engine_status.h"

#include <QCoreApplication>

namespace kvscope::ui {

QStringList statusParts(const EngineStatus& s) {
    auto tr = [](const char* text) { return QCoreApplication::translate("EngineStatus", text); };
    if (!s.remote.isEmpty()) {
        // A remote engine has no steps or block table here: its name, the client's requests in flight and
        // what its /metrics says.
        QStringList parts = {s.remote, s.idle ? tr("idle") : tr("running"), tr("%1 in flight").arg(s.numRunning)};
        if (s.serverKvUsage >= 0) parts << tr("KV %1% used (server)").arg(s.serverKvUsage * 100, 0, 'f', 1);
        return parts;
    }
    QString requests = tr("%1 running, %2 waiting").arg(s.numRunning).arg(s.numWaiting);
    if (s.numPreempted) requests += tr(" (%1 preempted)").arg(s.numPreempted);
    // The state first: a window of 1024 px cuts the line's end, and it had cut "running" / "idle".
    QStringList parts = {s.idle ? tr("idle") : tr("running"), tr("step %1").arg(s.step), requests};
    // Before it, so a narrow window cuts the counts, never the word that says none of it was measured; only its
    // device ("simulated NVIDIA H100 SXM 80GB"): the model and step-time model are in every chart's label.
    if (!s.simulation.isEmpty()) parts.prepend(s.simulation.section(", ", 0, 0));
    // The preemptions before the KV figures: only this line counts them, where the block map's caption repeats
    // the KV figures (at 1024 px the count was cut off the end).
    parts << (s.totalPreemptions == 1 ? tr("1 preemption") : tr("%1 preemptions").arg(s.totalPreemptions));
    if (s.kv) {
        // Free counts the cached-free blocks too (vLLM's free queue holds them: evictable); said, as the
        // block map shows the two apart.
        // Two figures: a narrow window keeps the usage and drops the block counts.
        parts << tr("KV %1% used").arg(s.kv->usage * 100, 0, 'f', 1);
        QString free = tr("%1/%2 blocks free").arg(s.kv->num_free_blocks).arg(s.kv->num_blocks);
        if (s.kv->num_cached_free_blocks > 0) free += tr(" (%1 cached)").arg(s.kv->num_cached_free_blocks);
        parts << free;
    }
    return parts;
}

QString statusText(const EngineStatus& s) { return statusParts(s).join(kStatusSeparator); }

}  // namespace kvscope::ui
