#include "remote_worker.h"

#include "bench_workload.h"
#include "json_bridge.h"

#include "bench/bench_driver.h"
#include "remote/http_stream_pool.h"
#include "remote/metrics_scraper.h"
#include "remote/openai_stream.h"
#include "remote/remote_bench_target.h"
#include "remote/remote_server.h"

namespace kvscope::ui {

namespace {

constexpr int kUpdateIntervalMs = 16;
constexpr double kScrapeIntervalS = 1.0;

// A benchmark target's times moved onto the worker's clock (offset = worker time at the target's t0),
// so benchmark and chat requests share one time axis in the session.
RequestMetrics shifted(RequestMetrics m, double offset) {
    m.arrival_time += offset;
    if (m.first_scheduled_time >= 0) m.first_scheduled_time += offset;
    if (m.finish_time >= 0) m.finish_time += offset;
    for (double& t : m.prefill_chunk_times) t += offset;
    for (double& t : m.preemption_times) t += offset;
    for (double& t : m.token_times) t += offset;
    return m;
}

}  // namespace

// One chat request streaming. reader, sent and chunksSent belong to the pool's thread (its handlers);
// aborted is set by the worker and read there.
struct RemoteWorker::Flight {
    QString id;
    RequestMetrics metrics;
    OpenAiStreamReader reader;
    size_t sent = 0;        // bytes of reader.text() already posted to the worker
    size_t chunksSent = 0;  // token chunks already posted
    std::atomic<bool> aborted{false};
    Flight(OpenAiApi api, int maxTokens, double stallS) : reader(api, maxTokens, stallS) {}
};

RemoteWorker::RemoteWorker(QObject* parent)
    : QObject(parent), m_t0(std::chrono::steady_clock::now()), m_scrapeTimer(this), m_publishTimer(this) {
    m_publishTimer.setSingleShot(true);
    connect(&m_publishTimer, &QTimer::timeout, this, &RemoteWorker::publish);
    connect(&m_scrapeTimer, &QTimer::timeout, this, &RemoteWorker::pollScraper);
}

RemoteWorker::~RemoteWorker() {
    m_benchCancel = true;
    if (m_benchThread.joinable()) m_benchThread.join();
    m_pool.reset();  // cancels the streams; what their handlers post is dropped with this object
    m_scraper.reset();
}

double RemoteWorker::now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_t0).count();
}

void RemoteWorker::connectEndpoint(const RemoteConnection& c) {
    ++m_commandsReceived;
    RemoteTarget target;
    try {
        target = probeEndpoint(c);
    } catch (const std::exception& e) {
        emit connectFailed(QString::fromStdString(e.what()));
        return;
    }
    disconnectEndpoint();
    --m_commandsReceived;  // disconnectEndpoint() counted itself; this is one command
    m_endpoint = HttpEndpoint{};
    m_endpoint.base_url = c.baseUrl.trimmed().toStdString();
    m_endpoint.api_key = c.apiKey.toStdString();
    m_target = target;
    m_vocabulary.clear();
    m_t0 = std::chrono::steady_clock::now();  // nothing reads the clock now: no pool, scraper or benchmark runs
    m_pool = std::make_unique<HttpStreamPool>(m_endpoint);
    m_scraper = std::make_unique<MetricsScraper>(m_endpoint, kScrapeIntervalS, [this] { return now(); });
    m_samplesSent = 0;
    m_healthSent = {};
    m_scrapeTimer.start(250);
    m_connected = true;
    emit connected(target);
    publish();
}

void RemoteWorker::disconnectEndpoint() {
    ++m_commandsReceived;
    if (m_benchThread.joinable()) {
        m_benchCancel = true;
        m_benchThread.join();  // its last post (the result) is dropped below: the run was cancelled
    }
    if (m_benchRunning) {
        m_benchRunning = false;
        emit benchmarkFinished(BenchResult{});
    }
    abortAll();
    m_scrapeTimer.stop();
    m_scraper.reset();
    m_pool.reset();
    m_connected = false;
    publish();
}

void RemoteWorker::abortAll() {
    for (auto& [id, f] : m_flights) {
        f->aborted = true;
        RequestProgress& p = pendingFor(id);
        p.finished = true;
        p.status = RequestStatus::FINISHED;
        p.finishReason = FinishReason::ABORT;
    }
    m_flights.clear();
}

void RemoteWorker::submitRequest(const SubmitCommand& c) {
    ++m_commandsReceived;
    if (!m_connected || !m_pool) {
        emit requestRejected(c.requestId, tr("not connected to an endpoint"));
        publish();
        return;
    }
    OpenAiRequest r;
    // A pane's conversation goes to chat completions, where the server applies its own template; a raw
    // prompt (template off) to completions.
    r.api = c.useChatTemplate ? OpenAiApi::CHAT : OpenAiApi::COMPLETIONS;
    r.model = m_target.model.toStdString();
    r.messages = c.messages;
    r.prompt_text = c.promptText.toStdString();
    r.max_tokens = c.sampling.max_tokens;
    r.temperature = c.sampling.temperature;
    r.top_p = c.sampling.top_p;
    r.seed = c.sampling.seed.value_or(0);
    r.ignore_eos = c.sampling.ignore_eos;
    auto f = std::make_shared<Flight>(r.api, r.max_tokens, m_endpoint.request_timeout_s);
    f->id = c.requestId;
    f->metrics.request_id = c.requestId.toStdString();
    f->metrics.priority = c.priority;
    f->metrics.arrival_time = now();
    m_flights[c.requestId] = f;
    RequestProgress& p = pendingFor(c.requestId);
    p.status = RequestStatus::WAITING;
    p.arrivalTime = f->metrics.arrival_time;

    StreamHandlers handlers;
    handlers.on_data = [this, f](int status, std::string_view bytes) {  // the pool's thread
        if (f->aborted.load()) return false;
        const bool ok = f->reader.feed(status, bytes, now());
        const size_t chunks = f->reader.chunk_times().size();
        if (f->reader.text().size() > f->sent || chunks > f->chunksSent) {
            const QString delta = QString::fromStdString(f->reader.text().substr(f->sent));
            const double first = chunks ? f->reader.chunk_times().front() : -1;
            f->sent = f->reader.text().size();
            f->chunksSent = chunks;
            QMetaObject::invokeMethod(this, [this, id = f->id, delta, first, chunks] { takeChunk(id, delta, first, int(chunks)); },
                                      Qt::QueuedConnection);
        }
        return ok;
    };
    handlers.on_done = [this, f](int status, const std::string& error) {  // the pool's thread
        RequestMetrics m = f->metrics;
        const QString why = QString::fromStdString(finish_remote_request(m, f->reader, status, error, now()));
        const QString rest = QString::fromStdString(f->reader.text().substr(f->sent));
        QMetaObject::invokeMethod(this, [this, id = f->id, m, why, rest, chunks = int(f->reader.chunk_times().size()),
                                         first = m.token_times.empty() ? -1.0 : m.token_times.front()] {
            if (!rest.isEmpty()) takeChunk(id, rest, first, chunks);
            takeDone(id, m, why);
        }, Qt::QueuedConnection);
    };
    m_pool->post(default_endpoint(r.api), openai_request_body(r), std::move(handlers));
    publishSoon();
}

void RemoteWorker::takeChunk(const QString& id, const QString& delta, double firstTokenTime, int chunks) {
    const auto it = m_flights.find(id);
    if (it == m_flights.end()) return;  // aborted meanwhile
    RequestProgress& p = pendingFor(id);
    p.status = RequestStatus::RUNNING;
    p.textDelta += delta;
    p.newTokens += std::max(0, chunks - p.numOutputTokens);
    p.numOutputTokens = chunks;  // chunks until the usage at the end says how many tokens
    p.arrivalTime = it->second->metrics.arrival_time;
    if (firstTokenTime >= 0) p.ttft = firstTokenTime - p.arrivalTime;
    p.elapsed = now() - p.arrivalTime;
    publishSoon();
}

void RemoteWorker::takeDone(const QString& id, const RequestMetrics& m, const QString& error) {
    const auto flight = m_flights.find(id);
    if (flight == m_flights.end()) return;  // aborted: already reported
    // What streamed before a failure reaches the pane ahead of it (a rejection ends the pane's request,
    // and text published after it was dropped).
    if (!error.isEmpty() && m_progress.count(id)) publish();
    m_flights.erase(flight);
    RequestProgress& p = pendingFor(id);
    p.finished = true;
    p.status = RequestStatus::FINISHED;
    p.finishReason = m.finish_reason;
    p.takeFinalFigures(m);  // the server's usage: prompt, output and cached tokens
    m_finished.push_back(m);
    if (!error.isEmpty()) emit requestRejected(id, error);
    publishSoon();
}

void RemoteWorker::abortRequest(const QString& requestId) {
    ++m_commandsReceived;
    const auto it = m_flights.find(requestId);
    if (it != m_flights.end()) {
        // The transfer ends at its next byte (on_data says so); the pane hears of the abort now.
        it->second->aborted = true;
        m_flights.erase(it);
        RequestProgress& p = pendingFor(requestId);
        p.finished = true;
        p.status = RequestStatus::FINISHED;
        p.finishReason = FinishReason::ABORT;
    }
    publish();
}

void RemoteWorker::runBenchmark(const BenchSpec& spec) {
    ++m_commandsReceived;
    if (!m_connected) {
        emit errorOccurred(tr("not connected to an endpoint"));
        emit benchmarkFinished(BenchResult{});
        return;
    }
    if (m_benchRunning) {
        emit errorOccurred(tr("a benchmark is already running"));
        publish();
        return;
    }
    try {
        // Prompts as `kvscope-cli bench --base-url` builds them without --tokenizer: token ids drawn from
        // the server's own vocabulary (its /tokenize), sent to /v1/completions, so input lengths are exact.
        if (m_vocabulary.empty()) {
            HttpClient client(m_endpoint);
            ServerTokenizer tokenizer(client, m_target.model.toStdString());
            m_vocabulary = server_vocabulary_sample(tokenizer);
        }
        BenchPlan plan = makeBenchPlan(spec, m_vocabulary, 1 << 24);  // the server checks its own context
        plan.options.progress = [this](int done, int total) { emit benchmarkProgressed(done, total); };
        RemoteTargetOptions options;
        options.endpoint = m_endpoint;
        options.path = default_endpoint(OpenAiApi::COMPLETIONS);
        options.api = OpenAiApi::COMPLETIONS;
        options.model = m_target.model.toStdString();
        const int total = int(plan.workload.size());
        const std::string prefix = "bench-remote-" + std::to_string(++m_benchRuns) + "-";
        m_benchSpec = spec;
        m_benchRunning = true;
        m_benchCancel = false;
        emit benchmarkProgressed(0, total);
        publish();
        m_benchThread = std::thread([this, options, plan = std::move(plan), prefix] {
            RemoteBenchTarget target(options);
            const double offset = now() - target.now();
            RemoteBenchHooks hooks;
            hooks.cancelled = [this] { return m_benchCancel.load(); };
            hooks.on_finished = [this, offset](const RemoteFinished& f) {
                if (f.metrics.request_id.find("warmup") != std::string::npos) return;  // not counted, not shown
                QMetaObject::invokeMethod(this, [this, m = shifted(f.metrics, offset)] {
                    RequestProgress& p = pendingFor(QString::fromStdString(m.request_id));
                    p.finished = true;
                    p.status = RequestStatus::FINISHED;
                    p.finishReason = m.finish_reason;
                    p.takeFinalFigures(m);
                    m_finished.push_back(m);
                    publishSoon();
                }, Qt::QueuedConnection);
            };
            try {
                BenchRun run = run_remote_bench(target, plan.workload, plan.options, "remote", prefix, hooks);
                QMetaObject::invokeMethod(this, [this, run, offset] { finishBenchmark(run, offset); }, Qt::QueuedConnection);
            } catch (const std::exception& e) {
                QMetaObject::invokeMethod(this, [this, message = QString::fromStdString(e.what())] {
                    if (m_benchThread.joinable()) m_benchThread.join();
                    m_benchRunning = false;
                    emit errorOccurred(message);
                    emit benchmarkFinished(BenchResult{});
                    publish();
                }, Qt::QueuedConnection);
            }
        });
    } catch (const std::exception& e) {
        emit errorOccurred(QString::fromStdString(e.what()));
        emit benchmarkFinished(BenchResult{});
        publish();
    }
}

void RemoteWorker::cancelBenchmark() { m_benchCancel = true; }

void RemoteWorker::finishBenchmark(const BenchRun& run, double offset) {
    if (m_benchThread.joinable()) m_benchThread.join();
    if (!m_benchRunning) return;
    m_benchRunning = false;
    BenchResult r;
    r.spec = m_benchSpec;
    r.requests = run.requests;
    r.submitTimes = run.submit_times;
    r.errors = run.errors;
    r.summary = toQJsonObject(run.summary.to_json());
    r.summary["num_prompts"] = int(run.requests.size());
    // kvscope-cli bench --base-url's keys: what was measured, where, and how output lengths were forced.
    r.summary["target"] = m_target.toJson();
    r.summary["endpoint_type"] = "openai";
    r.summary["output_length_control"] = kOutputLengthControl;
    if (m_scraper) {
        // The scraped series over the run, on the run's clock (server_series_to_json makes it relative).
        ServerSeries s = m_scraper->series();
        const double start = offset + run.start_time - s.interval_s, end = offset + run.start_time + run.summary.duration + s.interval_s;
        std::erase_if(s.samples, [&](const ServerSample& x) { return x.time < start || x.time > end; });
        for (ServerSample& x : s.samples) x.time -= offset;
        r.summary["server_metrics"] = toQJsonObject(server_series_to_json(s, run.start_time));
    }
    r.config = QJsonObject{{"mode", "remote"}, {"model", m_target.model}, {"target", m_target.toJson()}};
    emit benchmarkFinished(r);
    publish();
}

void RemoteWorker::pollScraper() {
    if (!m_scraper) return;
    const ServerSeries s = m_scraper->series();
    const ScrapeHealth health{s.num_scrapes, s.num_failed_scrapes, s.last_failed, QString::fromStdString(s.last_error)};
    // A failing scrape adds no sample, only counts: sent too (once a second at most, the scrape interval).
    if (s.samples.size() <= m_samplesSent && health == m_healthSent) return;
    ServerSamples fresh(s.samples.begin() + std::ptrdiff_t(m_samplesSent), s.samples.end());
    m_samplesSent = s.samples.size();
    m_healthSent = health;
    emit serverSampled(fresh, health);
}

RequestProgress& RemoteWorker::pendingFor(const QString& id) {
    auto [it, inserted] = m_progress.try_emplace(id);
    if (inserted) it->second.requestId = id;
    return it->second;
}

void RemoteWorker::publishSoon() {
    if (!m_publishTimer.isActive()) m_publishTimer.start(kUpdateIntervalMs);
}

void RemoteWorker::publish() {
    m_publishTimer.stop();
    EngineUpdate u;
    u.engineTime = now();
    u.numRunning = int(m_flights.size());
    u.idle = m_flights.empty() && !m_benchRunning;
    u.commandsReceived = m_commandsReceived;
    for (auto& [id, p] : m_progress) u.requests.push_back(std::move(p));
    m_progress.clear();
    u.finished = std::move(m_finished);
    m_finished.clear();
    emit updated(u);
}

}  // namespace kvscope::ui
