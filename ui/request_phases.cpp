#include "request_phases.h"

#include <algorithm>
#include <span>

namespace kvscope::ui {

std::vector<PhaseSpan> requestPhases(const RequestMetrics& m, double now) {
    const double end = m.finish_time >= 0 ? m.finish_time : now;
    const std::vector<double>& tokens = m.token_times;
    std::span<const double> chunks = m.prefill_chunk_times;
    if (chunks.empty() && m.first_scheduled_time >= 0) chunks = {&m.first_scheduled_time, 1};  // no chunk record
    const std::vector<double>& preemptions = m.preemption_times;

    std::vector<PhaseSpan> spans;
    spans.reserve(chunks.size() + 2 * preemptions.size() + 2);
    RequestPhase phase = RequestPhase::Queued;
    double start = m.arrival_time;
    auto enter = [&](RequestPhase next, double t) {
        t = std::max(t, start);
        if (t > start) spans.push_back({phase, start, t});
        phase = next;
        start = t;
    };
    // Only the step that ends a prefill run samples a token, so the first token after the current
    // span's start ends it (if it comes before `until`); from then on the request decodes.
    auto decodeFromNextToken = [&](double until) {
        if (phase == RequestPhase::Decode) return;
        const auto it = std::upper_bound(tokens.begin(), tokens.end(), start);
        if (it != tokens.end() && *it <= until) enter(RequestPhase::Decode, *it);
    };

    // Chunks and preemptions merged in time order (one request is never both in the same step).
    size_t c = 0, p = 0;
    while (c < chunks.size() || p < preemptions.size()) {
        const bool preempted = p < preemptions.size() && (c == chunks.size() || preemptions[p] <= chunks[c]);
        const double t = preempted ? preemptions[p++] : chunks[c++];
        if (t > end) break;
        decodeFromNextToken(t);
        enter(preempted ? RequestPhase::Preempted : RequestPhase::Prefill, t);
    }
    decodeFromNextToken(end);
    enter(phase, end);
    return spans;
}

PhaseTotals phaseTotals(const std::vector<PhaseSpan>& spans) {
    PhaseTotals t;
    for (const PhaseSpan& s : spans) {
        t.seconds[int(s.phase)] += s.end - s.start;
        ++t.spans[int(s.phase)];
    }
    return t;
}

const char* phaseName(RequestPhase phase) {
    switch (phase) {
    case RequestPhase::Queued: return "queued";
    case RequestPhase::Prefill: return "prefill";
    case RequestPhase::Decode: return "decode";
    case RequestPhase::Preempted: return "preempted";
    }
    return "";
}

}  // namespace kvscope::ui
