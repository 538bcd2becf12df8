#include "engine_controller.h"

#include "engine_worker.h"
#include "remote_worker.h"

#include <algorithm>

namespace kvscope::ui {

EngineController::EngineController(QObject* parent) : QObject(parent) {
    registerEngineMetaTypes();
    qRegisterMetaType<BenchSpec>();
    qRegisterMetaType<BenchResult>();
    qRegisterMetaType<std::shared_ptr<const KvCacheSnapshot>>();
    m_thread.setObjectName("engine");
    m_worker = new EngineWorker;
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);

    connect(m_worker, &EngineWorker::modelLoadStarted, this, &EngineController::modelLoadStarted);
    connect(m_worker, &EngineWorker::modelLoaded, this, [this](const ModelSummary& s, const EngineConfig& c) {
        m_loading = false;
        m_modelLoaded = true;
        m_model = s;
        m_status.simulation = s.simulationLabel;
        m_config = c;
        m_session.clear();
        m_session.addEvent(tr("model loaded: %1").arg(s.spec));
        // The config first: modelLoaded starts a script, whose first `set` reads the tuning panel (it read
        // the defaults and undid the script's engine settings).
        emit configChanged(c);
        emit modelLoaded(s);
    });
    connect(m_worker, &EngineWorker::modelLoadFailed, this, [this](const QString& spec, const QString& message) {
        m_loading = false;
        emit modelLoadFailed(spec, message);
    });
    connect(m_worker, &EngineWorker::updated, this, [this](const EngineUpdate& u) {
        if (!m_remote) applyUpdate(u, m_commandsSent);
    });
    connect(m_worker, &EngineWorker::requestRejected, this, [this](const QString& id, const QString& message) {
        m_session.rejectRequest(id, message);
        emit requestRejected(id, message);
    });
    connect(m_worker, &EngineWorker::errorOccurred, this, &EngineController::errorOccurred);
    connect(m_worker, &EngineWorker::historyTrimmed, this, &EngineController::historyTrimmed);
    connect(m_worker, &EngineWorker::reconfigureRefused, this, &EngineController::reconfigureRefused);
    connect(m_worker, &EngineWorker::configApplied, this, [this](const EngineConfig& c) {
        m_config = c;
        emit configChanged(c);
    });
    connect(m_worker, &EngineWorker::kvCacheResolved, this, [this](const QString& dtype, qint64 bytesPerToken) {
        if (dtype == m_model.kvCacheDtype && bytesPerToken == m_model.kvBytesPerToken) return;
        m_model.kvCacheDtype = dtype;  // the engine panel and the export said float32 after a switch to float16
        m_model.kvBytesPerToken = bytesPerToken;
        emit modelSummaryChanged(m_model);
    });
    connect(m_worker, &EngineWorker::benchmarkProgressed, this, &EngineController::benchmarkProgressed);
    auto benchmarkDone = [this](const BenchResult& r) {
        m_benchRunning = false;
        if (!r.summary.isEmpty()) m_session.addBenchmark(r);
        emit benchmarkFinished(r);
    };
    connect(m_worker, &EngineWorker::benchmarkFinished, this, benchmarkDone);
    m_thread.start();

    // The remote engine's worker: the same signals, value types and session.
    qRegisterMetaType<RemoteConnection>();
    qRegisterMetaType<RemoteTarget>();
    qRegisterMetaType<ServerSamples>();
    qRegisterMetaType<ScrapeHealth>();
    m_remoteThread.setObjectName("remote");
    m_remoteWorker = new RemoteWorker;
    m_remoteWorker->moveToThread(&m_remoteThread);
    connect(&m_remoteThread, &QThread::finished, m_remoteWorker, &QObject::deleteLater);
    connect(m_remoteWorker, &RemoteWorker::connected, this, [this](const RemoteTarget& t) {
        m_connecting = false;
        m_remote = true;
        m_remoteTarget = t;
        m_serverSamples.clear();
        m_scrapeHealth = {};
        m_status = EngineStatus{};
        m_status.remote = t.label();
        m_session.clear();
        m_session.addEvent(tr("connected: %1").arg(t.label()));
        emit remoteConnected(t);
    });
    connect(m_remoteWorker, &RemoteWorker::connectFailed, this, [this](const QString& message) {
        m_connecting = false;
        emit remoteConnectFailed(message);
    });
    connect(m_remoteWorker, &RemoteWorker::updated, this, [this](const EngineUpdate& u) {
        if (m_remote) applyUpdate(u, m_remoteCommandsSent);
    });
    connect(m_remoteWorker, &RemoteWorker::serverSampled, this, [this](const ServerSamples& samples, const ScrapeHealth& health) {
        if (!m_remote) return;
        m_serverSamples.insert(m_serverSamples.end(), samples.begin(), samples.end());
        m_scrapeHealth = health;
        // While scrapes fail the last reading is stale: the status bar says "not reported" rather than keep it.
        const ServerSample* last = m_serverSamples.empty() || health.failing ? nullptr : &m_serverSamples.back();
        m_status.serverKvUsage = last && last->kv_cache_usage ? *last->kv_cache_usage : -1;
        emit serverSampled();
    });
    connect(m_remoteWorker, &RemoteWorker::requestRejected, this, [this](const QString& id, const QString& message) {
        m_session.rejectRequest(id, message);
        emit requestRejected(id, message);
    });
    connect(m_remoteWorker, &RemoteWorker::errorOccurred, this, &EngineController::errorOccurred);
    connect(m_remoteWorker, &RemoteWorker::benchmarkProgressed, this, &EngineController::benchmarkProgressed);
    connect(m_remoteWorker, &RemoteWorker::benchmarkFinished, this, benchmarkDone);
    m_remoteThread.start();
}

EngineController::~EngineController() {
    m_remoteThread.quit();
    m_remoteThread.wait();
    m_thread.quit();
    m_thread.wait();
}

void EngineController::connectToEndpoint(const RemoteConnection& connection) {
    m_connecting = true;
    ++m_remoteCommandsSent;
    QMetaObject::invokeMethod(m_remoteWorker, "connectEndpoint", Qt::QueuedConnection,
                              Q_ARG(kvscope::ui::RemoteConnection, connection));
}

void EngineController::leaveRemote() {
    if (!m_remote) return;
    m_remote = false;
    m_benchRunning = false;
    m_status.remote.clear();
    m_status.serverKvUsage = -1;
    ++m_remoteCommandsSent;
    QMetaObject::invokeMethod(m_remoteWorker, "disconnectEndpoint", Qt::QueuedConnection);
}

EngineConfig EngineController::defaultConfig() {
    EngineConfig c;
    c.scheduler.max_model_len = 0;
    c.scheduler.max_num_seqs = 64;
    c.scheduler.max_num_batched_tokens = 2048;
    c.kv_cache_memory = 0;  // the engine's default_kv_cache_memory, in the cache's own type, as the CLI's
    return c;
}

void EngineController::loadModel(const QString& spec, const EngineConfig& config) {
    leaveRemote();  // a model load is the way back to the local engine
    m_loading = true;
    ++m_commandsSent;
    QMetaObject::invokeMethod(m_worker, "loadModel", Qt::QueuedConnection, Q_ARG(QString, spec),
                              Q_ARG(kvscope::EngineConfig, config));
}

QString EngineController::submitRequest(SubmitCommand command, const QString& origin, const QColor& color) {
    if (command.requestId.isEmpty()) command.requestId = QString("req-%1").arg(++m_nextRequest);
    if (color.isValid()) m_colors.insert(command.requestId, color);
    m_session.addRequest(command.requestId, origin.isEmpty() ? QStringLiteral("script") : origin, colorFor(command.requestId));
    m_idle = false;
    if (m_remote) {
        ++m_remoteCommandsSent;
        QMetaObject::invokeMethod(m_remoteWorker, "submitRequest", Qt::QueuedConnection,
                                  Q_ARG(kvscope::ui::SubmitCommand, command));
        return command.requestId;
    }
    ++m_commandsSent;
    QMetaObject::invokeMethod(m_worker, "submitRequest", Qt::QueuedConnection,
                              Q_ARG(kvscope::ui::SubmitCommand, command));
    return command.requestId;
}

void EngineController::abortRequest(const QString& requestId) {
    if (m_remote) {
        ++m_remoteCommandsSent;
        QMetaObject::invokeMethod(m_remoteWorker, "abortRequest", Qt::QueuedConnection, Q_ARG(QString, requestId));
        return;
    }
    ++m_commandsSent;
    QMetaObject::invokeMethod(m_worker, "abortRequest", Qt::QueuedConnection, Q_ARG(QString, requestId));
}

void EngineController::reconfigure(const EngineConfig& config) {
    ++m_commandsSent;
    QMetaObject::invokeMethod(m_worker, "reconfigure", Qt::QueuedConnection, Q_ARG(kvscope::EngineConfig, config));
}

void EngineController::runBenchmark(const BenchSpec& spec) {
    m_benchRunning = true;
    m_idle = false;
    if (m_remote) {
        ++m_remoteCommandsSent;
        QMetaObject::invokeMethod(m_remoteWorker, "runBenchmark", Qt::QueuedConnection, Q_ARG(kvscope::ui::BenchSpec, spec));
        return;
    }
    ++m_commandsSent;
    QMetaObject::invokeMethod(m_worker, "runBenchmark", Qt::QueuedConnection, Q_ARG(kvscope::ui::BenchSpec, spec));
}

void EngineController::cancelBenchmark() {
    if (m_remote) {
        // Not a counted command: the worker's thread answers it from the benchmark's own thread.
        QMetaObject::invokeMethod(m_remoteWorker, "cancelBenchmark", Qt::QueuedConnection);
        return;
    }
    QMetaObject::invokeMethod(m_worker, "cancelBenchmark", Qt::QueuedConnection);
}

void EngineController::setSnapshotWanted(bool wanted) { m_worker->setSnapshotWanted(wanted); }

QColor EngineController::colorFor(const QString& requestId) const {
    if (auto it = m_colors.constFind(requestId); it != m_colors.constEnd()) return *it;
    // Requests without a pane (benchmark, script) get a stable muted hue from their id.
    const int hue = int(qHash(requestId) % 360);
    return QColor::fromHsl(hue, 110, 140);
}

void EngineController::applyUpdate(const EngineUpdate& u, quint64 commandsSent) {
    m_session.applyUpdate(u);
    for (const RequestProgress& p : u.requests) emit requestUpdated(p);
    if (u.snapshot) {
        m_status.kv = u.snapshot;
        emit snapshotUpdated(u.snapshot);
    }
    // Idle is decided before anyone hears of the update, so that every view reads the same state.
    const bool wasIdle = m_idle;
    m_idle = u.idle && !m_benchRunning && u.commandsReceived == commandsSent;
    m_status.step = u.step;
    m_status.numRunning = u.numRunning;
    m_status.numWaiting = u.numWaiting;
    m_status.numPreempted = u.numPreempted;
    m_status.totalPreemptions = u.totalPreemptions;
    m_status.idle = m_idle;
    emit updateApplied();
    if (m_idle && !wasIdle) emit becameIdle();
}

}  // namespace kvscope::ui
