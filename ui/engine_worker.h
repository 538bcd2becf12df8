// EngineWorker: owns the LlmEngine on the engine thread (a QObject moved to a QThread by
// EngineController). Runs one step() per queued invocation while there is work, so commands posted
// from the GUI (submit, abort, reconfigure, load model, run benchmark) are taken between steps. Emits
// value snapshots only, coalesced: at most one EngineUpdate every ~16 ms. Never touches widgets.
#pragma once

#include "bench_spec.h"
#include "engine_types.h"
#include "metrics/metrics_sink.h"

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include <atomic>
#include <deque>
#include <map>
#include <memory>

namespace kvscope {
class BenchDriver;
class LlmEngine;
struct Model;
}

namespace kvscope::ui {

class EngineWorker : public QObject, private MetricsSink {
    Q_OBJECT
public:
    explicit EngineWorker(QObject* parent = nullptr);
    ~EngineWorker() override;

    // Set from any thread: the next update carries a KV snapshot.
    void setSnapshotWanted(bool wanted) { m_snapshotWanted.store(wanted); }

public slots:
    // spec: HF dir, .gguf, dummy:PRESET. config.scheduler.max_model_len 0 = the model's (max 8192).
    void loadModel(const QString& spec, const kvscope::EngineConfig& config);
    void submitRequest(const kvscope::ui::SubmitCommand& command);
    void abortRequest(const QString& requestId);
    void reconfigure(const kvscope::EngineConfig& config);
    void runBenchmark(const kvscope::ui::BenchSpec& spec);
    void cancelBenchmark();
    // Emits an update now (with a snapshot when wanted), also when idle.
    void publishNow();

signals:
    void modelLoadStarted(const QString& spec);
    void modelLoaded(const kvscope::ui::ModelSummary& summary, const kvscope::EngineConfig& config);
    void modelLoadFailed(const QString& spec, const QString& message);
    void updated(const kvscope::ui::EngineUpdate& update);
    void requestRejected(const QString& requestId, const QString& message);
    // The conversation of requestId outgrew the context: its droppedMessages oldest messages (after
    // the system prompt) were left out of the prompt.
    void historyTrimmed(const QString& requestId, int droppedMessages);
    void errorOccurred(const QString& message);
    void configApplied(const kvscope::EngineConfig& config);
    // After a reconfiguration: the KV cache type the engine resolved (kv_cache_dtype auto follows the
    // weights) and what one token holds in it, for the model's summary.
    void kvCacheResolved(const QString& dtype, qint64 bytesPerToken);
    // A reconfiguration was refused whole (the engine runs on with the configuration configApplied gave).
    void reconfigureRefused(const QString& message);
    void benchmarkProgressed(int finished, int total);
    void benchmarkFinished(const kvscope::ui::BenchResult& result);

private:
    class BenchTargetAdapter;

    void on_step(const StepStats& stats) override;
    void on_request_finished(const RequestMetrics& metrics) override;

    // The work of the submit and abort commands, also used by the benchmark driver (not counted as commands).
    void addRequest(const SubmitCommand& command);
    std::vector<int32_t> conversationPrompt(std::vector<ChatMessage> messages, int maxTokens, int* dropped) const;
    void abortOne(const QString& requestId, bool publishNow = true);
    void scheduleStep();
    void runStep();
    void feedBenchmark();
    void finishBenchmark();
    void publish(bool force);
    RequestProgress& pendingFor(const std::string& id);

    std::shared_ptr<const Model> m_model;
    std::unique_ptr<LlmEngine> m_engine;
    bool m_stepQueued = false;
    quint64 m_commandsReceived = 0;
    qint64 m_totalPreemptions = 0;  // of the current engine, from its latest step
    std::atomic<bool> m_snapshotWanted{true};

    // Coalesced since the last update.
    std::vector<StepRecord> m_steps;
    std::map<std::string, RequestProgress> m_progress;
    std::vector<RequestMetrics> m_finished;
    QElapsedTimer m_sinceUpdate;
    // Snapshots are recycled once the GUI drops them (no allocation per frame).
    std::vector<std::shared_ptr<KvCacheSnapshot>> m_snapshotPool;

    // The running benchmark: the engine's BenchDriver (the CLI's rules), fed from m_benchTimer and
    // after every step.
    std::unique_ptr<BenchDriver> m_bench;
    BenchSpec m_benchSpec;
    int m_benchRuns = 0;
    QTimer m_benchTimer;
};

}  // namespace kvscope::ui
