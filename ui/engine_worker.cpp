#include "engine_worker.h"

#include "engine_controller.h"

#include "bench_workload.h"
#include "json_bridge.h"
#include "token_alternatives.h"
#include "bench/bench_driver.h"
#include "kv/kv_cache_dtype.h"
#include "llm_engine.h"
#include "metrics/export.h"
#include "model/model.h"
#include "sim/simulation_info.h"
#include "util/errors.h"

#include <QJsonObject>

#include <algorithm>
#include <atomic>
#include <cmath>

namespace kvscope::ui {

namespace {
constexpr qint64 kUpdateIntervalMs = 16;
}

// The engine as the benchmark driver's target: requests enter through the engine like a pane's, so the
// request table and the block map show them.
class EngineWorker::BenchTargetAdapter final : public BenchTarget {
public:
    explicit BenchTargetAdapter(EngineWorker& worker) : m_worker(worker) {}
    double now() const override { return m_worker.m_engine->now(); }
    void submit(NewRequest request) override {
        const std::string id = request.request_id;
        m_worker.m_engine->add_request(std::move(request));  // BadInput: the driver records the failure
        m_worker.pendingFor(id).status = RequestStatus::WAITING;
        m_worker.scheduleStep();
    }

private:
    EngineWorker& m_worker;
};

EngineWorker::EngineWorker(QObject* parent) : QObject(parent), m_benchTimer(this) {
    m_benchTimer.setSingleShot(true);
    m_benchTimer.setTimerType(Qt::PreciseTimer);
    connect(&m_benchTimer, &QTimer::timeout, this, [this] {
        feedBenchmark();
        scheduleStep();
    });
    m_sinceUpdate.start();
}

EngineWorker::~EngineWorker() = default;

void EngineWorker::loadModel(const QString& spec, const EngineConfig& requested) {
    ++m_commandsReceived;
    emit modelLoadStarted(spec);
    QElapsedTimer timer;
    timer.start();
    try {
        const bool simulated = requested.backend == BackendKind::SIM;
        std::shared_ptr<const Model> model = load_model(spec.toStdString(), !simulated);  // a simulation needs shapes only
        EngineConfig config = requested;
        if (config.scheduler.max_model_len <= 0)
            config.scheduler.max_model_len = default_max_model_len(model->config.max_position_embeddings);
        config.scheduler.max_model_len = std::min(config.scheduler.max_model_len, model->config.max_position_embeddings);
        // kv_cache_memory 0: the engine sizes the pool (default_kv_cache_memory, or a simulated GPU's own
        // memory, as vLLM does on the real one), in the KV type it resolves.
        auto engine = std::make_unique<LlmEngine>(model, config);
        // Requests of the previous model are dropped (their panes see an abort).
        if (m_engine) {
            for (const RequestInfo& info : m_engine->active_requests()) {
                RequestProgress& p = pendingFor(info.request_id);
                p.finished = true;
                p.status = RequestStatus::FINISHED;
                p.finishReason = FinishReason::ABORT;
            }
        }
        m_bench.reset();
        m_totalPreemptions = 0;
        m_model = model;
        m_engine = std::move(engine);
        m_engine->set_metrics_sink(this);
        ModelSummary s;
        s.spec = spec;
        s.name = QString::fromStdString(model->name);
        s.format = QString::fromStdString(model->format);
        s.architecture = QString::fromStdString(model->config.architecture);
        s.chatTemplate = QString::fromStdString(model->chat_template.family());
        s.chatTemplateUnrecognized = model->chat_template.unrecognized();
        s.tokenizer = QString::fromUtf8(std::string(model->tokenizer.kind_name()).c_str());
        s.numParams = model->config.num_params();
        s.weightBytes = m_engine->memory_stats().weights_bytes;
        s.kvBytesPerToken = model->config.kv_bytes_per_token(m_engine->kv_cache_dtype());
        s.kvCacheDtype = QString::fromStdString(kv_cache_dtype_name(m_engine->kv_cache_dtype()));
        s.maxPositionEmbeddings = model->config.max_position_embeddings;
        s.numLayers = model->config.num_layers;
        s.vocabSize = model->config.vocab_size;
        s.loadSeconds = double(timer.elapsed()) / 1e3;
        s.simulationLabel = QString::fromStdString(m_engine->simulation_label());
        if (simulated) {
            s.simulation = toQJsonObject(simulation_to_json(*m_engine));
            // What changes as the engine runs (a rebuild, busy time) is not the load's to say.
            s.simulation.remove("num_blocks");
            s.simulation.remove("simulated_busy_seconds");
        }
        emit modelLoaded(s, m_engine->config());
        publish(true);
    } catch (const std::exception& e) {
        emit modelLoadFailed(spec, QString::fromStdString(e.what()));
    }
}

void EngineWorker::submitRequest(const SubmitCommand& c) {
    ++m_commandsReceived;
    addRequest(c);
}

void EngineWorker::addRequest(const SubmitCommand& c) {
    if (!m_engine) {
        emit requestRejected(c.requestId, tr("no model is loaded"));
        return;
    }
    try {
        NewRequest r;
        r.request_id = c.requestId.toStdString();
        r.sampling_params = c.sampling;
        r.priority = c.priority;
        if (!c.promptTokenIds.empty()) {
            r.prompt_token_ids = c.promptTokenIds;
        } else if (c.useChatTemplate) {
            int dropped = 0;
            r.prompt_token_ids = conversationPrompt(c.messages, c.sampling.max_tokens, &dropped);
            if (dropped) emit historyTrimmed(c.requestId, dropped);
        } else {
            r.prompt_token_ids = m_model->tokenizer.encode(c.promptText.toStdString(), true);
        }
        m_engine->add_request(std::move(r));
        RequestProgress& p = pendingFor(c.requestId.toStdString());
        p.status = RequestStatus::WAITING;
        scheduleStep();
    } catch (const std::exception& e) {
        emit requestRejected(c.requestId, QString::fromStdString(e.what()));
        publish(true);
    }
}

std::vector<int32_t> EngineWorker::conversationPrompt(std::vector<ChatMessage> messages, int maxTokens, int* dropped) const {
    // History policy: a conversation that outgrows the context loses its oldest turns (a user message
    // and the reply to it), never the system prompt or the newest message, until the prompt leaves a
    // reply min(max_tokens, max_model_len / 4) tokens. Without it every message after the limit is rejected.
    const ChatTemplate& tmpl = m_model->chat_template;
    auto encode = [&] {
        return m_model->tokenizer.encode(tmpl.render(messages, true), !tmpl.renders_bos());
    };
    std::vector<int32_t> ids = encode();
    const int maxLen = m_engine->config().scheduler.max_model_len;
    const int room = std::min(maxTokens, maxLen / 4);
    const size_t first = !messages.empty() && messages.front().role == "system" ? 1 : 0;
    while (int(ids.size()) + room > maxLen && messages.size() > first + 1) {
        const size_t n = messages.size() > first + 2 && messages[first + 1].role == "assistant" ? 2 : 1;
        messages.erase(messages.begin() + std::ptrdiff_t(first), messages.begin() + std::ptrdiff_t(first + n));
        *dropped += int(n);
        ids = encode();
    }
    return ids;
}

void EngineWorker::abortRequest(const QString& requestId) {
    ++m_commandsReceived;
    abortOne(requestId);
}

void EngineWorker::abortOne(const QString& requestId, bool publishNow) {
    if (!m_engine) return;
    const std::string id = requestId.toStdString();
    if (m_engine->abort_request(id)) {
        RequestProgress& p = pendingFor(id);
        p.finished = true;
        p.status = RequestStatus::FINISHED;
        p.finishReason = FinishReason::ABORT;
        scheduleStep();  // an idle engine records one step: the timeline ends where the aborts left the pool
    }
    if (publishNow) publish(true);
}

void EngineWorker::reconfigure(const EngineConfig& config) {
    ++m_commandsReceived;
    if (!m_engine) return;
    try {
        m_engine->reconfigure(config);
        emit configApplied(m_engine->config());
        emit kvCacheResolved(QString::fromStdString(kv_cache_dtype_name(m_engine->kv_cache_dtype())),
                             m_model->config.kv_bytes_per_token(m_engine->kv_cache_dtype()));
        scheduleStep();
        publish(true);
    } catch (const std::exception& e) {
        emit configApplied(m_engine->config());  // the knobs go back to what runs
        emit reconfigureRefused(QString::fromStdString(e.what()));
    }
}

void EngineWorker::runBenchmark(const BenchSpec& spec) {
    ++m_commandsReceived;
    if (!m_engine) {
        emit errorOccurred(tr("no model is loaded"));
        emit benchmarkFinished(BenchResult{});
        return;
    }
    if (m_bench) {
        emit errorOccurred(tr("a benchmark is already running"));
        publish(true);
        return;
    }
    try {
        BenchPlan plan = makeBenchPlan(spec, *m_model, m_engine->config().scheduler.max_model_len);
        plan.options.progress = [this](int done, int total) { emit benchmarkProgressed(done, total); };
        const int total = int(plan.workload.size());
        m_bench = std::make_unique<BenchDriver>(std::move(plan.workload), std::move(plan.options),
                                                "bench-" + std::to_string(++m_benchRuns) + "-");
        m_benchSpec = spec;
        emit benchmarkProgressed(0, total);
        feedBenchmark();
        scheduleStep();
    } catch (const std::exception& e) {
        m_bench.reset();
        emit errorOccurred(QString::fromStdString(e.what()));
        emit benchmarkFinished(BenchResult{});
        publish(true);
    }
}

void EngineWorker::cancelBenchmark() {
    if (!m_bench) return;
    // One update for all of them: an update per abort (each with the pool's snapshot and every pending
    // request) made stopping 15,000 queued requests quadratic, 15 GB of queued updates and no end.
    for (const std::string& id : m_bench->in_flight_ids()) abortOne(QString::fromStdString(id), false);
    publish(true);
    finishBenchmark();
}

void EngineWorker::feedBenchmark() {
    if (!m_bench) return;
    BenchTargetAdapter target(*this);
    const std::optional<double> nextDue = m_bench->admit(target);
    if (m_bench->done()) {
        finishBenchmark();
        return;
    }
    if (!nextDue) return;
    if (!m_engine->is_simulated()) {
        m_benchTimer.start(std::max(0, int(std::ceil((*nextDue - m_engine->now()) * 1e3))));
        return;
    }
    // Simulated time: while requests run, each step advances the clock and runStep() feeds the
    // benchmark after it. Idle, the next arrival is (due - now) / pace wall seconds away at a pace,
    // or no time at all as fast as possible: the clock jumps there and the event loop still turns
    // between arrivals, so the knobs and a stop act at once.
    if (m_engine->has_unfinished_requests()) return;
    const double pace = m_engine->config().sim_pace;
    if (pace <= 0) {
        m_engine->wait_until(*nextDue);
        m_benchTimer.start(0);
    } else {
        m_benchTimer.start(std::max(0, int(std::ceil((*nextDue - m_engine->now()) / pace * 1e3))));
    }
}

void EngineWorker::finishBenchmark() {
    if (!m_bench) return;
    const BenchRun run = m_bench->result(m_engine->now());
    BenchResult result;  // empty where every request was refused
    try {
        check_some_completed(run);  // as kvscope-cli bench: a row of zeros said nothing of the reason
        result.spec = m_benchSpec;
        result.requests = run.requests;
        result.submitTimes = run.submit_times;
        result.errors = run.errors;
        result.summary = toQJsonObject(run.summary.to_json());
        result.summary["num_prompts"] = m_bench->num_requests();
        result.summary["target"] = QJsonObject{{"kind", "local"}, {"model", QString::fromStdString(m_model->name)}};
        // The key kvscope-cli bench writes: a comparison can tell simulated runs from measured ones.
        if (m_engine->is_simulated()) result.summary["simulated"] = toQJsonObject(simulation_to_json(*m_engine));
        result.config = toQJsonObject(engine_config_to_json(m_engine->resolved_config()));
        result.config["model"] = QString::fromStdString(m_model->source);
    } catch (const BadInput& e) {
        emit errorOccurred(QString::fromStdString(e.what()));
    }
    m_bench.reset();
    m_benchTimer.stop();
    emit benchmarkFinished(result);
    publish(true);  // the views learn that the engine is idle now, not at its next step
}

void EngineWorker::scheduleStep() {
    if (m_stepQueued || !m_engine) return;
    m_stepQueued = true;
    QMetaObject::invokeMethod(this, &EngineWorker::runStep, Qt::QueuedConnection);
}

void EngineWorker::runStep() {
    m_stepQueued = false;
    if (!m_engine) return;
    // Idle: nothing to step, unless a rebuild is to be recorded now rather than at the next request.
    if (!m_engine->has_unfinished_requests() && !m_engine->has_pending_event()) {
        publish(true);
        return;
    }
    try {
        const auto outputs = m_engine->step();
        int sampled = 0;
        for (const RequestOutput& o : outputs) {
            RequestProgress& p = pendingFor(o.request_id);
            p.textDelta += QString::fromStdString(o.text_delta);
            if (!o.logprobs.empty()) {
                QString tip;
                for (const TokenLogprobs& l : o.logprobs)
                    tip += (tip.isEmpty() ? "" : "<hr>") + tokenAlternativesToolTip(l, m_engine->model().tokenizer);
                p.pieces.push_back({QString::fromStdString(o.text_delta), tip});
            }
            p.newTokens += int(o.new_token_ids.size());
            sampled += int(o.new_token_ids.size());
            if (o.finished) {
                p.finished = true;
                p.finishReason = o.finish_reason;
                p.status = RequestStatus::FINISHED;
            }
        }
        if (!m_steps.empty()) m_steps.back().numOutputTokens = sampled;
        m_engine->release_finished();
    } catch (const std::exception& e) {
        emit errorOccurred(tr("engine step failed: %1").arg(QString::fromStdString(e.what())));
    }
    feedBenchmark();
    const bool more = m_engine->has_unfinished_requests();
    publish(!more);
    if (more) scheduleStep();
}

void EngineWorker::on_step(const StepStats& stats) {
    m_steps.push_back({stats, 0});
    m_totalPreemptions = stats.total_preemptions;
}

void EngineWorker::on_request_finished(const RequestMetrics& metrics) {
    m_finished.push_back(metrics);
    pendingFor(metrics.request_id).takeFinalFigures(metrics);
    if (m_bench) m_bench->on_request_finished(metrics);  // its own requests only; feedBenchmark() follows the step
}

RequestProgress& EngineWorker::pendingFor(const std::string& id) {
    auto [it, inserted] = m_progress.try_emplace(id);
    if (inserted) it->second.requestId = QString::fromStdString(id);
    return it->second;
}

void EngineWorker::publishNow() { publish(true); }

void EngineWorker::publish(bool force) {
    if (!m_engine) return;
    if (!force && m_sinceUpdate.elapsed() < kUpdateIntervalMs) return;
    m_sinceUpdate.restart();
    EngineUpdate u;
    u.engineTime = m_engine->now();
    u.idle = !m_engine->has_unfinished_requests() && !m_bench;
    u.commandsReceived = m_commandsReceived;
    u.step = m_engine->num_steps();
    u.totalPreemptions = m_totalPreemptions;
    // Every active request is reported with its current block table and counts.
    for (const RequestInfo& info : m_engine->active_requests()) {
        u.numRunning += info.status == RequestStatus::RUNNING;
        u.numWaiting += info.status == RequestStatus::WAITING || info.status == RequestStatus::PREEMPTED;
        u.numPreempted += info.status == RequestStatus::PREEMPTED;
        RequestProgress& p = pendingFor(info.request_id);
        p.status = info.status;
        p.numPromptTokens = info.num_prompt_tokens;
        p.numOutputTokens = info.num_output_tokens;
        p.numCachedTokens = std::max(0, info.num_cached_tokens);
        p.numPreemptions = info.num_preemptions;
        p.blockTable = info.block_table;
        if (auto m = m_engine->request_metrics(info.request_id)) {
            p.arrivalTime = m->arrival_time;
            p.ttft = m->ttft();
            p.elapsed = u.engineTime - m->arrival_time;
            p.phases = requestPhases(*m, u.engineTime);
        }
    }
    u.requests.reserve(m_progress.size());
    for (auto& [id, p] : m_progress) u.requests.push_back(std::move(p));
    m_progress.clear();
    u.steps = std::move(m_steps);
    m_steps.clear();
    u.finished = std::move(m_finished);
    m_finished.clear();
    if (m_snapshotWanted.load()) {
        std::shared_ptr<KvCacheSnapshot> snap;
        for (auto& s : m_snapshotPool)
            if (s.use_count() == 1) {
                // The GUI's last copy went away with a release decrement; use_count() is a relaxed
                // read, so this fence orders the GUI's reads of the old contents before our writes.
                std::atomic_thread_fence(std::memory_order_acquire);
                snap = s;
            }
        if (!snap && m_snapshotPool.size() < 4) snap = m_snapshotPool.emplace_back(std::make_shared<KvCacheSnapshot>());
        // A forced update (a stop, a rebuild, the engine going idle) is the last word until the next
        // step: it must carry the pool as it is, or the views keep showing blocks of stopped requests.
        // Rare, so it may allocate when the GUI still holds every pooled snapshot.
        if (!snap && force) snap = std::make_shared<KvCacheSnapshot>();
        if (snap) {
            m_engine->kv_cache_manager().snapshot_into(*snap);
            u.snapshot = snap;
        }
    }
    emit updated(u);
}

}  // namespace kvscope::ui
