// Value types that cross from the engine thread (EngineWorker) to the GUI thread (EngineController
// and the widgets) through queued signals. Plain copies only: nothing here points into engine state.
// registerEngineMetaTypes() must run once before the first queued connection carries them.
#pragma once

#include "engine_config.h"
#include "kv/kv_cache_snapshot.h"
#include "metrics/request_metrics.h"
#include "metrics/step_stats.h"
#include "model/chat_template.h"
#include "request_phases.h"
#include "sched/sampling_params.h"

#include <QJsonObject>
#include <QMetaType>
#include <QString>
#include <QStringList>

#include <memory>
#include <vector>

namespace kvscope::ui {

// What the user asks for: chat messages (rendered with the model's chat template on the engine
// thread) or raw prompt text, or ready token ids (benchmarks).
struct SubmitCommand {
    QString requestId;
    std::vector<ChatMessage> messages;  // used when useChatTemplate
    QString promptText;                 // used when !useChatTemplate and promptTokenIds is empty
    std::vector<int32_t> promptTokenIds;
    bool useChatTemplate = true;
    SamplingParams sampling;
    int priority = 0;
};

// One request's state after the latest coalesced batch of steps. textDelta and newTokens hold every
// token streamed since the previous update (per-token events are coalesced).
struct RequestProgress {
    QString requestId;
    RequestStatus status = RequestStatus::WAITING;
    FinishReason finishReason = FinishReason::NONE;
    QString textDelta;
    // When the request asked for logprobs: textDelta piece by piece, each with the rich-text tooltip of
    // the tokens that produced it (token_alternatives.h). A token whose text is still held back (part of a
    // character or of a possible stop string) has a piece of empty text; its tooltip goes with the next.
    struct TextPiece {
        QString text;
        QString toolTip;
    };
    std::vector<TextPiece> pieces;
    int newTokens = 0;
    bool finished = false;
    int numPromptTokens = 0;
    int numOutputTokens = 0;
    int numCachedTokens = 0;
    int numPreemptions = 0;
    std::vector<int32_t> blockTable;
    double arrivalTime = 0;  // engine seconds
    double ttft = -1;        // seconds, -1 before the first token
    double elapsed = 0;      // seconds since arrival (or E2EL when finished)
    std::vector<PhaseSpan> phases;  // its phases up to the update's engineTime (unfinished requests)

    // The figures of a finished request, from its metrics (local engine or remote server alike).
    void takeFinalFigures(const RequestMetrics& m) {
        ttft = m.ttft();
        elapsed = m.e2el();
        arrivalTime = m.arrival_time;
        numPromptTokens = m.num_prompt_tokens;
        numOutputTokens = m.num_output_tokens;
        numCachedTokens = m.num_cached_tokens;
        numPreemptions = m.num_preemptions;
    }
};

// One engine step and how many output tokens it sampled.
struct StepRecord {
    StepStats stats;
    int numOutputTokens = 0;
};

// Everything since the previous update, emitted at most every ~16 ms by the worker.
struct EngineUpdate {
    std::vector<StepRecord> steps;
    std::vector<RequestProgress> requests;      // requests that changed (and every active one)
    std::vector<RequestMetrics> finished;       // metrics of requests that finished
    std::shared_ptr<const KvCacheSnapshot> snapshot;  // null when not requested
    // The engine when the update was made (the moment of the snapshot): what the status bar shows.
    qint64 step = 0;
    int numRunning = 0;
    int numWaiting = 0;  // WAITING and PREEMPTED
    int numPreempted = 0;
    qint64 totalPreemptions = 0;
    double engineTime = 0;
    bool idle = false;
    quint64 commandsReceived = 0;  // commands the worker had taken when it made this update
};

struct ModelSummary {
    QString spec;
    QString name;
    QString format;
    QString architecture;
    QString chatTemplate;
    bool chatTemplateUnrecognized = false;  // the model carries a template kvscope does not know: plain
    QString tokenizer;
    qint64 numParams = 0;
    qint64 weightBytes = 0;
    qint64 kvBytesPerToken = 0;  // at load, for kvCacheDtype
    QString kvCacheDtype;        // what the engine's auto (or the asked type) resolved to: float32, float16, bfloat16
    int maxPositionEmbeddings = 0;
    int numLayers = 0;
    int vocabSize = 0;
    double loadSeconds = 0;
    // On a simulated backend: simulation_label() ("simulated NVIDIA H100 SXM, llama-3-8b, step-time model
    // v1"), which every view that shows figures carries, and simulation_to_json() for the exports.
    // Empty on a real backend: nothing may pass simulated figures off as measured ones.
    QString simulationLabel;
    QJsonObject simulation;
};

void registerEngineMetaTypes();

QString statusName(RequestStatus s);
QString finishReasonName(FinishReason r);

}  // namespace kvscope::ui

Q_DECLARE_METATYPE(kvscope::EngineConfig)
Q_DECLARE_METATYPE(kvscope::RequestMetrics)
Q_DECLARE_METATYPE(kvscope::ui::SubmitCommand)
Q_DECLARE_METATYPE(kvscope::ui::RequestProgress)
Q_DECLARE_METATYPE(kvscope::ui::EngineUpdate)
Q_DECLARE_METATYPE(kvscope::ui::ModelSummary)
