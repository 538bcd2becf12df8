// EngineController: the GUI thread's handle on the engine. Owns the engine QThread and its
// EngineWorker; forwards commands as queued invocations (the GUI never blocks, also while a model
// loads) and turns the worker's coalesced updates into SessionData and per-request signals.
#pragma once

#include "bench_spec.h"
#include "engine_status.h"
#include "engine_types.h"
#include "remote_target.h"
#include "session_data.h"

#include <QColor>
#include <QHash>
#include <QObject>
#include <QThread>

#include <memory>

namespace kvscope::ui {

class EngineWorker;
class RemoteWorker;

class EngineController : public QObject {
    Q_OBJECT
public:
    explicit EngineController(QObject* parent = nullptr);
    ~EngineController() override;

    SessionData* session() { return &m_session; }
    const EngineConfig& config() const { return m_config; }
    const ModelSummary& modelSummary() const { return m_model; }
    bool isModelLoaded() const { return m_modelLoaded; }
    bool isLoading() const { return m_loading; }
    bool isIdle() const { return m_idle; }
    bool isBenchmarkRunning() const { return m_benchRunning; }
    std::shared_ptr<const KvCacheSnapshot> latestSnapshot() const { return m_status.kv; }
    // The engine as of the latest update: what the status bar shows (see engine_status.h).
    const EngineStatus& status() const { return m_status; }
    QColor colorFor(const QString& requestId) const;
    // The default configuration of a model load (max_model_len 0 = the model's, up to 8192).
    static EngineConfig defaultConfig();

    // Connected to a remote engine: panes, benchmarks and aborts go to it (RemoteWorker) until the next
    // model load, which switches back to the local engine.
    bool isRemote() const { return m_remote; }
    bool isConnecting() const { return m_connecting; }
    const RemoteTarget& remoteTarget() const { return m_remoteTarget; }
    // Every /metrics sample scraped since the connection, times on the requests' clock.
    const ServerSamples& serverSamples() const { return m_serverSamples; }
    const ScrapeHealth& scrapeHealth() const { return m_scrapeHealth; }

public slots:
    void loadModel(const QString& spec, const kvscope::EngineConfig& config = defaultConfig());
    // Returns the request id (generated when command.requestId is empty).
    QString submitRequest(kvscope::ui::SubmitCommand command, const QString& origin = {}, const QColor& color = {});
    void abortRequest(const QString& requestId);
    void reconfigure(const kvscope::EngineConfig& config);
    void runBenchmark(const kvscope::ui::BenchSpec& spec);
    void cancelBenchmark();
    void setSnapshotWanted(bool wanted);
    // The key travels to the remote worker only; nothing here keeps it.
    void connectToEndpoint(const kvscope::ui::RemoteConnection& connection);

signals:
    void remoteConnected(const kvscope::ui::RemoteTarget& target);
    void remoteConnectFailed(const QString& message);
    void serverSampled();
    void modelLoadStarted(const QString& spec);
    void modelLoaded(const kvscope::ui::ModelSummary& summary);
    // The summary changed without a load (a new KV cache type): views that show it redraw.
    void modelSummaryChanged(const kvscope::ui::ModelSummary& summary);
    void modelLoadFailed(const QString& spec, const QString& message);
    void configChanged(const kvscope::EngineConfig& config);
    void requestUpdated(const kvscope::ui::RequestProgress& progress);
    void requestRejected(const QString& requestId, const QString& message);
    void historyTrimmed(const QString& requestId, int droppedMessages);
    void snapshotUpdated(std::shared_ptr<const kvscope::KvCacheSnapshot> snapshot);
    void updateApplied();
    void becameIdle();
    void errorOccurred(const QString& message);
    void reconfigureRefused(const QString& message);
    void benchmarkProgressed(int finished, int total);
    void benchmarkFinished(const kvscope::ui::BenchResult& result);

private:
    void applyUpdate(const EngineUpdate& update, quint64 commandsSent);
    void leaveRemote();

    QThread m_thread;
    EngineWorker* m_worker = nullptr;  // lives on m_thread, deleted when it finishes
    SessionData m_session;
    EngineConfig m_config;
    ModelSummary m_model;
    bool m_modelLoaded = false;
    bool m_loading = false;
    bool m_idle = true;
    bool m_benchRunning = false;
    EngineStatus m_status;
    QHash<QString, QColor> m_colors;
    int m_nextRequest = 0;
    quint64 m_commandsSent = 0;  // idle only counts once the worker has taken every command

    QThread m_remoteThread;
    RemoteWorker* m_remoteWorker = nullptr;  // lives on m_remoteThread
    bool m_remote = false;
    bool m_connecting = false;
    RemoteTarget m_remoteTarget;
    ServerSamples m_serverSamples;
    ScrapeHealth m_scrapeHealth;
    quint64 m_remoteCommandsSent = 0;
};

}  // namespace kvscope::ui
