// A request's life as phases over engine time, for the request timeline: queued (arrival to first
// scheduled), prefill chunks (prompt chunks, and recompute after a preemption), decode, preempted
// (preemption to the next chunk). Pure functions of RequestMetrics; the worker computes them on the
// engine thread and ships the spans in RequestProgress, so the GUI never needs the token times.
#pragma once

#include "metrics/request_metrics.h"

#include <vector>

namespace kvscope::ui {

enum class RequestPhase { Queued, Prefill, Decode, Preempted };
constexpr int kNumRequestPhases = 4;

struct PhaseSpan {
    RequestPhase phase = RequestPhase::Queued;
    double start = 0;  // engine seconds
    double end = 0;    // > start
};

// The spans of [arrival, finish_time] (or [arrival, now] while it runs), in time order, contiguous:
// each span's end is the next one's start. One Prefill span per chunk: a chunk lasts until the next
// chunk starts or the token it samples arrives. A token seen while not running (a resume step that
// needed no prefill, e.g. every token but the last hit the prefix cache) starts Decode there.
std::vector<PhaseSpan> requestPhases(const RequestMetrics& m, double now);

// Seconds spent in each phase (indexed by RequestPhase) and how many spans it had.
struct PhaseTotals {
    double seconds[kNumRequestPhases] = {};
    int spans[kNumRequestPhases] = {};
};
PhaseTotals phaseTotals(const std::vector<PhaseSpan>& spans);

const char* phaseName(RequestPhase phase);

}  // namespace kvscope::ui
