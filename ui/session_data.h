// SessionData: everything the session has seen, on the GUI thread: every engine step, every request
// (with its streamed text and, once finished, its metrics), configuration events and benchmark
// results. Charts, item models and the export read from it; EngineController feeds it.
#pragma once

#include "bench_spec.h"
#include "engine_types.h"

#include <QColor>
#include <QHash>
#include <QObject>

#include <optional>
#include <vector>

namespace kvscope::ui {

struct RequestRecord {
    QString requestId;
    QString origin;  // pane name, "benchmark", "script"
    QColor color;
    RequestStatus status = RequestStatus::WAITING;
    FinishReason finishReason = FinishReason::NONE;
    int numPromptTokens = 0;
    int numOutputTokens = 0;
    int numCachedTokens = 0;
    int numPreemptions = 0;
    std::vector<int32_t> blockTable;
    double arrivalTime = 0;
    double ttft = -1;
    double elapsed = 0;
    QString text;
    QString error;
    std::vector<PhaseSpan> phases;          // queued, prefill chunks, decode, preempted (request_phases.h)
    std::optional<RequestMetrics> metrics;  // set when finished
};

struct SessionEvent {
    double time = 0;  // engine seconds
    qint64 step = 0;
    QString text;
};

class SessionData : public QObject {
    Q_OBJECT
public:
    explicit SessionData(QObject* parent = nullptr);

    const std::vector<StepRecord>& steps() const { return m_steps; }
    const std::vector<RequestRecord>& requests() const { return m_requests; }
    const std::vector<SessionEvent>& events() const { return m_events; }
    const std::vector<BenchResult>& benchmarks() const { return m_benchmarks; }
    int indexOf(const QString& requestId) const { return m_index.value(requestId, -1); }
    const RequestRecord* request(const QString& requestId) const;
    std::vector<RequestMetrics> finishedMetrics() const;
    double lastEngineTime() const { return m_lastEngineTime; }

    // A request the GUI is about to submit (origin and colour are known before the engine sees it).
    void addRequest(const QString& requestId, const QString& origin, const QColor& color);
    void rejectRequest(const QString& requestId, const QString& message);
    void applyUpdate(const EngineUpdate& update);
    void addEvent(const QString& text);
    void addBenchmark(const BenchResult& result);
    void clear();  // a new engine (model load): its clock and step count restart at 0

signals:
    void stepsAppended(int first, int count);
    // Rows first..last were appended (a benchmark adds dozens in one update: one signal for them all).
    void requestsAdded(int first, int last);
    void requestChanged(int row);
    void eventAdded(const kvscope::ui::SessionEvent& event);
    void benchmarkAdded(int index);
    void cleared();

private:
    // The row of a request, appended when new (announced with requestsAdded unless announce is false:
    // then the caller announces a batch).
    int ensureRequest(const QString& requestId, bool announce = true);

    std::vector<StepRecord> m_steps;
    std::vector<RequestRecord> m_requests;
    QHash<QString, int> m_index;
    std::vector<SessionEvent> m_events;
    std::vector<BenchResult> m_benchmarks;
    double m_lastEngineTime = 0;
};

}  // namespace kvscope::ui
