#include "engine_worker.h"

#include "bench_workload.h"
#include "latency_summary.h"
#include "kv/kv_cache_dtype.h"
#include "llm_engine.h"
#include "model/model.h"
#include "util/errors.h"

#include <QJsonObject>

#include <algorithm>

namespace kvscope::ui {

namespace {
constexpr qint64 kUpdateIntervalMs = 16;
}

struct EngineWorker::BenchState {
    BenchSpec spec;
    std::vector<BenchArrival> requests;  // by arrival
    size_t nextIndex = 0;
    double startTime = 0;  // engine seconds
    int inFlight = 0;
    int done = 0;
    std::vector<RequestMetrics> metrics;
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
        std::shared_ptr<const Model> model = load_model(spec.toStdString());
        EngineConfig config = requested;
        if (config.scheduler.max_model_len <= 0)
            config.scheduler.max_model_len = std::min(model->config.max_position_embeddings, 8192);
        config.scheduler.max_model_len = std::min(config.scheduler.max_model_len, model->config.max_position_embeddings);
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
        m_model = model;
        m_engine = std::move(engine);
        m_engine->set_metrics_sink(this);
        ModelSummary s;
        s.spec = spec;
        s.name = QString::fromStdString(model->name);
        s.format = QString::fromStdString(model->format);
        s.architecture = QString::fromStdString(model->config.architecture);
        s.chatTemplate = QString::fromStdString(model->chat_template.family());
        s.tokenizer = QString::fromUtf8(std::string(model->tokenizer.kind_name()).c_str());
        s.numParams = model->config.num_params();
        s.weightBytes = m_engine->memory_stats().weights_bytes;
        s.kvBytesPerToken = model->config.kv_bytes_per_token(m_engine->kv_cache_dtype());
        s.kvCacheDtype = QString::fromStdString(kv_cache_dtype_name(m_engine->kv_cache_dtype()));
        s.maxPositionEmbeddings = model->config.max_position_embeddings;
        s.numLayers = model->config.num_layers;
        s.vocabSize = model->config.vocab_size;
        s.loadSeconds = double(timer.elapsed()) / 1e3;
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
            const ChatTemplate& tmpl = m_model->chat_template;
            const std::string text = tmpl.render(c.messages, true);
            r.prompt_token_ids = m_model->tokenizer.encode_with_special_tokens(text, !tmpl.renders_bos());
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

void EngineWorker::abortRequest(const QString& requestId) {
    ++m_commandsReceived;
    abortOne(requestId);
}

void EngineWorker::abortOne(const QString& requestId) {
    if (!m_engine) return;
    const std::string id = requestId.toStdString();
    if (m_engine->abort_request(id)) {
        RequestProgress& p = pendingFor(id);
        p.finished = true;
        p.status = RequestStatus::FINISHED;
        p.finishReason = FinishReason::ABORT;
    }
    publish(true);
}

void EngineWorker::reconfigure(const EngineConfig& config) {
    ++m_commandsReceived;
    if (!m_engine) return;
    try {
        m_engine->reconfigure(config);
        emit configApplied(m_engine->config());
        scheduleStep();
        publish(true);
    } catch (const std::exception& e) {
        emit errorOccurred(QString::fromStdString(e.what()));
        emit configApplied(m_engine->config());
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
        auto b = std::make_unique<BenchState>();
        b->spec = spec;
        b->requests = makeBenchWorkload(spec, *m_model, m_engine->config().scheduler.max_model_len);
        b->startTime = m_engine->now();
        m_bench = std::move(b);
        emit benchmarkProgressed(0, int(m_bench->requests.size()));
        feedBenchmark();
        scheduleStep();
    } catch (const std::exception& e) {
        emit errorOccurred(QString::fromStdString(e.what()));
        emit benchmarkFinished(BenchResult{});
        publish(true);
    }
}

void EngineWorker::cancelBenchmark() {
    if (!m_bench) return;
    for (size_t i = 0; i < m_bench->nextIndex; ++i) abortOne(m_bench->requests[i].requestId);
    m_bench->nextIndex = m_bench->requests.size();
    finishBenchmark();
}

void EngineWorker::feedBenchmark() {
    if (!m_bench) return;
    BenchState& b = *m_bench;
    const double elapsed = m_engine->now() - b.startTime;
    while (b.nextIndex < b.requests.size()) {
        const BenchArrival& r = b.requests[b.nextIndex];
        if (b.spec.maxConcurrency > 0 && b.inFlight >= b.spec.maxConcurrency) return;
        if (r.arrivalOffset > elapsed) {
            m_benchTimer.start(std::max(0, int((r.arrivalOffset - elapsed) * 1e3)));
            return;
        }
        SubmitCommand c;
        c.requestId = r.requestId;
        c.promptTokenIds = r.promptTokenIds;
        c.sampling = r.sampling;
        addRequest(c);
        ++b.inFlight;
        ++b.nextIndex;
    }
}

void EngineWorker::finishBenchmark() {
    if (!m_bench) return;
    BenchResult result;
    result.spec = m_bench->spec;
    result.requests = std::move(m_bench->metrics);
    const double duration = m_engine->now() - m_bench->startTime;
    result.summary = summarizeRequests(result.requests, duration);
    result.summary["num_prompts"] = int(m_bench->requests.size());
    const EngineConfig& c = m_engine->config();
    result.config = QJsonObject{{"block_size", c.block_size},
                                {"max_num_seqs", c.scheduler.max_num_seqs},
                                {"max_num_batched_tokens", c.scheduler.max_num_batched_tokens},
                                {"policy", QString::fromStdString(c.scheduler.policy)},
                                {"enable_prefix_caching", c.scheduler.enable_prefix_caching},
                                {"max_model_len", c.scheduler.max_model_len},
                                {"mode", QString::fromStdString(c.mode)},
                                {"num_blocks", m_engine->num_blocks()},
                                {"kv_cache_dtype", QString::fromStdString(kv_cache_dtype_name(m_engine->kv_cache_dtype()))},
                                {"model", QString::fromStdString(m_model->source)}};
    m_bench.reset();
    m_benchTimer.stop();
    emit benchmarkFinished(result);
}

void EngineWorker::scheduleStep() {
    if (m_stepQueued || !m_engine) return;
    m_stepQueued = true;
    QMetaObject::invokeMethod(this, &EngineWorker::runStep, Qt::QueuedConnection);
}

void EngineWorker::runStep() {
    m_stepQueued = false;
    if (!m_engine) return;
    if (!m_engine->has_unfinished_requests()) {
        publish(true);
        return;
    }
    try {
        const auto outputs = m_engine->step();
        int sampled = 0;
        for (const RequestOutput& o : outputs) {
            RequestProgress& p = pendingFor(o.request_id);
            p.textDelta += QString::fromStdString(o.text_delta);
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

void EngineWorker::on_step(const StepStats& stats) { m_steps.push_back({stats, 0}); }

void EngineWorker::on_request_finished(const RequestMetrics& metrics) {
    m_finished.push_back(metrics);
    RequestProgress& p = pendingFor(metrics.request_id);
    p.ttft = metrics.ttft();
    p.elapsed = metrics.e2el();
    p.arrivalTime = metrics.arrival_time;
    p.numPromptTokens = metrics.num_prompt_tokens;
    p.numOutputTokens = metrics.num_output_tokens;
    p.numCachedTokens = metrics.num_cached_tokens;
    p.numPreemptions = metrics.num_preemptions;
    if (m_bench && metrics.request_id.rfind("bench-", 0) == 0) {
        m_bench->metrics.push_back(metrics);
        --m_bench->inFlight;
        ++m_bench->done;
        emit benchmarkProgressed(m_bench->done, int(m_bench->requests.size()));
        if (m_bench->done == int(m_bench->requests.size())) finishBenchmark();
    }
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
    // Every active request is reported with its current block table and counts.
    for (const RequestInfo& info : m_engine->active_requests()) {
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
            if (s.use_count() == 1) snap = s;
        if (!snap && m_snapshotPool.size() < 4) snap = m_snapshotPool.emplace_back(std::make_shared<KvCacheSnapshot>());
        if (snap) {
            m_engine->kv_cache_manager().snapshot_into(*snap);
            u.snapshot = snap;
        }
    }
    emit updated(u);
}

}  // namespace kvscope::ui
