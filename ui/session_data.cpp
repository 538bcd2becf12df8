#include "session_data.h"

#include "natural_order.h"

#include <algorithm>

namespace kvscope::ui {

SessionData::SessionData(QObject* parent) : QObject(parent) {}

const RequestRecord* SessionData::request(const QString& requestId) const {
    const int i = indexOf(requestId);
    return i < 0 ? nullptr : &m_requests[size_t(i)];
}

std::vector<RequestMetrics> SessionData::finishedMetrics() const {
    std::vector<RequestMetrics> out;
    for (const RequestRecord& r : m_requests) {
        if (r.metrics) {
            out.push_back(*r.metrics);
        } else if (r.status == RequestStatus::FINISHED && r.finishReason == FinishReason::ERROR) {
            // Refused by the engine (it never ran): a failed request, as kvscope-cli bench counts one. The
            // export counted it as neither completed nor failed.
            RequestMetrics m;
            m.request_id = r.requestId.toStdString();
            m.num_prompt_tokens = r.numPromptTokens;
            m.finish_reason = FinishReason::ERROR;
            m.arrival_time = m.finish_time = r.arrivalTime;
            out.push_back(std::move(m));
        }
    }
    return out;
}

int SessionData::ensureRequest(const QString& requestId, bool announce) {
    if (auto it = m_index.constFind(requestId); it != m_index.constEnd()) return *it;
    RequestRecord r;
    r.requestId = requestId;
    r.origin = requestId.startsWith("bench-") ? QStringLiteral("benchmark") : QStringLiteral("engine");
    m_requests.push_back(std::move(r));
    const int row = int(m_requests.size()) - 1;
    m_index.insert(requestId, row);
    if (announce) emit requestsAdded(row, row);
    return row;
}

void SessionData::addRequest(const QString& requestId, const QString& origin, const QColor& color) {
    const int row = ensureRequest(requestId);
    m_requests[size_t(row)].origin = origin;
    m_requests[size_t(row)].color = color;
    emit requestChanged(row);
}

void SessionData::rejectRequest(const QString& requestId, const QString& message) {
    const int row = ensureRequest(requestId);
    RequestRecord& r = m_requests[size_t(row)];
    r.status = RequestStatus::FINISHED;
    r.finishReason = FinishReason::ERROR;
    r.error = message;
    emit requestChanged(row);
}

void SessionData::applyUpdate(const EngineUpdate& u) {
    m_lastEngineTime = u.engineTime;
    if (!u.steps.empty()) {
        const int first = int(m_steps.size());
        for (const StepRecord& s : u.steps) {
            m_steps.push_back(s);
            if (!s.stats.event.empty()) {
                SessionEvent e{s.stats.start_time, s.stats.step, QString::fromStdString(s.stats.event)};
                m_events.push_back(e);
                emit eventAdded(e);
            }
        }
        emit stepsAppended(first, int(u.steps.size()));
    }
    // New requests first, announced together: views insert their rows once, not once per request. The
    // worker lists them in string order (bench-1-10 before bench-1-2); they get rows in the natural
    // order of their ids, which for a benchmark's requests is the order they arrived in.
    const int firstNew = int(m_requests.size());
    QStringList newIds;
    for (const RequestProgress& p : u.requests)
        if (indexOf(p.requestId) < 0) newIds << p.requestId;
    for (const RequestMetrics& m : u.finished)
        if (const QString id = QString::fromStdString(m.request_id); indexOf(id) < 0) newIds << id;
    std::stable_sort(newIds.begin(), newIds.end(), [](const QString& a, const QString& b) { return naturalLess(a, b); });
    for (const QString& id : newIds) ensureRequest(id, false);
    if (int(m_requests.size()) > firstNew) emit requestsAdded(firstNew, int(m_requests.size()) - 1);
    for (const RequestProgress& p : u.requests) {
        const int row = ensureRequest(p.requestId);
        RequestRecord& r = m_requests[size_t(row)];
        r.status = p.status;
        if (p.finished) r.finishReason = p.finishReason;
        r.text += p.textDelta;
        if (p.numPromptTokens) r.numPromptTokens = p.numPromptTokens;
        r.numOutputTokens = std::max(r.numOutputTokens, p.numOutputTokens);
        r.numCachedTokens = p.numCachedTokens;
        r.numPreemptions = p.numPreemptions;
        if (!p.finished) r.blockTable = p.blockTable;
        else r.blockTable.clear();
        if (p.arrivalTime > 0) r.arrivalTime = p.arrivalTime;
        if (p.ttft >= 0) r.ttft = p.ttft;
        if (p.elapsed > 0) r.elapsed = p.elapsed;
        if (!p.phases.empty()) r.phases = p.phases;
        emit requestChanged(row);
    }
    for (const RequestMetrics& m : u.finished) {
        const int row = ensureRequest(QString::fromStdString(m.request_id));
        RequestRecord& r = m_requests[size_t(row)];
        r.metrics = m;
        r.status = RequestStatus::FINISHED;
        r.finishReason = m.finish_reason;
        r.numOutputTokens = m.num_output_tokens;
        r.numPromptTokens = m.num_prompt_tokens;
        r.ttft = m.ttft();
        r.elapsed = m.e2el();
        r.phases = requestPhases(m, m.finish_time);
        emit requestChanged(row);
    }
}

void SessionData::addEvent(const QString& text) {
    SessionEvent e{m_lastEngineTime, m_steps.empty() ? 0 : m_steps.back().stats.step, text};
    m_events.push_back(e);
    emit eventAdded(e);
}

void SessionData::addBenchmark(const BenchResult& result) {
    m_benchmarks.push_back(result);
    emit benchmarkAdded(int(m_benchmarks.size()) - 1);
}

void SessionData::clear() {
    m_steps.clear();
    m_requests.clear();
    m_index.clear();
    m_events.clear();
    m_lastEngineTime = 0;
    emit cleared();
}

}  // namespace kvscope::ui
