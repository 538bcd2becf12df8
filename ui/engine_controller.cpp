#include "engine_controller.h"

#include "engine_worker.h"

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
        emit modelLoaded(s);
        emit configChanged(c);
    });
    connect(m_worker, &EngineWorker::modelLoadFailed, this, [this](const QString& spec, const QString& message) {
        m_loading = false;
        emit modelLoadFailed(spec, message);
    });
    connect(m_worker, &EngineWorker::updated, this, &EngineController::applyUpdate);
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
    connect(m_worker, &EngineWorker::benchmarkProgressed, this, &EngineController::benchmarkProgressed);
    connect(m_worker, &EngineWorker::benchmarkFinished, this, [this](const BenchResult& r) {
        m_benchRunning = false;
        if (!r.summary.isEmpty()) m_session.addBenchmark(r);
        emit benchmarkFinished(r);
    });
    m_thread.start();
}

EngineController::~EngineController() {
    m_thread.quit();
    m_thread.wait();
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
    ++m_commandsSent;
    QMetaObject::invokeMethod(m_worker, "submitRequest", Qt::QueuedConnection,
                              Q_ARG(kvscope::ui::SubmitCommand, command));
    return command.requestId;
}

void EngineController::abortRequest(const QString& requestId) {
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
    ++m_commandsSent;
    QMetaObject::invokeMethod(m_worker, "runBenchmark", Qt::QueuedConnection, Q_ARG(kvscope::ui::BenchSpec, spec));
}

void EngineController::cancelBenchmark() {
    QMetaObject::invokeMethod(m_worker, "cancelBenchmark", Qt::QueuedConnection);
}

void EngineController::setSnapshotWanted(bool wanted) { m_worker->setSnapshotWanted(wanted); }

QColor EngineController::colorFor(const QString& requestId) const {
    if (auto it = m_colors.constFind(requestId); it != m_colors.constEnd()) return *it;
    // Requests without a pane (benchmark, script) get a stable muted hue from their id.
    const int hue = int(qHash(requestId) % 360);
    return QColor::fromHsl(hue, 110, 140);
}

void EngineController::applyUpdate(const EngineUpdate& u) {
    m_session.applyUpdate(u);
    for (const RequestProgress& p : u.requests) emit requestUpdated(p);
    if (u.snapshot) {
        m_status.kv = u.snapshot;
        emit snapshotUpdated(u.snapshot);
    }
    // Idle is decided before anyone hears of the update, so that every view reads the same state.
    const bool wasIdle = m_idle;
    m_idle = u.idle && !m_benchRunning && u.commandsReceived == m_commandsSent;
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
