// BenchDriver: the one benchmark driver, for every front end (kvscope-cli bench, the GUI's benchmark
// panel, the sweep) and every BenchTarget. It never blocks: the caller asks it to admit what is due,
// learns when the next request falls due, steps its target in between and reports finished requests.
// One set of rules wherever it runs:
// - warm-up: options.num_warmups short requests (at most 16 output tokens) run first, not counted; the
//   timed part starts when the last of them has finished;
// - arrival: when a request fell due (one that falls due while the target is busy with a step waits
//   for it, as at a server), or, when max_concurrency held it back, when it was submitted;
// - TTFT, TPOT, ITL and E2EL: vLLM's definitions on RequestMetrics (metrics/request_metrics.h), on
//   the target's clock.
// Thread: the caller's (the engine thread for a local engine).
#pragma once

#include "bench/workload.h"
#include "engine_config.h"
#include "llm_engine.h"
#include "metrics/step_recorder.h"
#include "metrics/summary.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvscope {

// Where benchmark requests go: the local engine today; a remote endpoint or a simulated accelerator
// implement the same two calls.
class BenchTarget {
public:
    virtual ~BenchTarget() = default;
    // Seconds on the clock of the RequestMetrics the target reports.
    virtual double now() const = 0;
    // Queues the request; throws BadInput when the target refuses it (the run records it as failed).
    virtual void submit(NewRequest request) = 0;
};

struct BenchOptions {
    std::vector<double> arrival_offsets;  // seconds from the start, one per request; empty = all at once
    int max_concurrency = 0;              // requests in flight at most; 0 = no cap
    int num_warmups = 1;                  // requests run before the timed part, not counted
    float temperature = 0.0f;             // 0 = greedy
    uint64_t seed = 0;
    std::vector<double> percentiles = {50, 90, 99};
    GoodputSlo goodput;
    std::function<void(int done, int total)> progress;  // called on the driver's thread
};

// One timed run: the summary, the engine figures and the raw per-request and per-step records.
struct BenchRun {
    std::string label;  // "paged", "naive", "max-num-seqs=16"
    EngineConfig config;
    BenchmarkSummary summary;
    EngineAggregates engine;
    double start_time = 0;                 // target clock at the start of the timed part
    std::vector<RequestMetrics> requests;  // workload order; arrival_time by the rule above
    std::vector<double> submit_times;      // when it entered the target (-1: rejected or never sent)
    std::vector<std::string> errors;       // "" or why the request failed
    std::vector<StepStats> steps;
};

// Throws BadInput naming the first refusal when every request of the run was refused (prompts past
// max_model_len or the KV pool): the flags are wrong, and a table of zeros would hide it. vLLM's bench stops
// the same way when its first request fails. A run stopped by the user (aborts, no refusal) passes.
void check_some_completed(const BenchRun& run);

class BenchDriver {
public:
    // id_prefix names this run's requests ("bench-3-" -> "bench-3-0", ..., warm-ups "bench-3-warmup-0").
    // Throws BadInput when the options do not fit the workload.
    BenchDriver(std::vector<BenchRequest> workload, BenchOptions options, std::string id_prefix);

    // Submits what is due: the warm-up first, then the timed requests whose arrival has come, within
    // max_concurrency. Returns the target time at which the next request falls due when one waits for
    // its arrival; nullopt when nothing waits on the clock (all sent, warm-up or a full cap in flight:
    // a finish moves things on).
    std::optional<double> admit(BenchTarget& target);
    // Every finished request the target reports; the driver takes its own and ignores the rest.
    void on_request_finished(const RequestMetrics& metrics);

    bool done() const;
    bool timed_part_started() const { return phase_ == Phase::TIMED || phase_ == Phase::DONE; }
    int num_requests() const { return static_cast<int>(workload_.size()); }
    int num_finished() const { return num_done_; }
    // Ids submitted and not finished (to abort them when the run is cancelled).
    std::vector<std::string> in_flight_ids() const;
    const std::string& id_prefix() const { return prefix_; }

    // The timed part's requests and summary (call when done(); after a cancel, what never finished
    // counts as failed). `now` closes the run's duration. label, config, engine and steps are the
    // caller's to fill.
    BenchRun result(double now) const;

private:
    enum class Phase { NOT_STARTED, WARMING_UP, TIMED, DONE };
    NewRequest make_request(size_t index, const std::string& id, int max_tokens) const;
    void start_timed_part(double now);
    void note_done();

    std::vector<BenchRequest> workload_;
    BenchOptions options_;
    std::string prefix_;
    Phase phase_ = Phase::NOT_STARTED;
    int warmups_in_flight_ = 0;
    double t0_ = 0;
    size_t next_ = 0;  // next workload index to submit
    int in_flight_ = 0;
    int num_done_ = 0;
    std::vector<double> due_, submit_;
    std::vector<bool> held_;  // fell due while the concurrency cap was full: its arrival is its submission
    std::vector<std::string> errors_;
    std::vector<std::optional<RequestMetrics>> finished_;  // by workload index
    std::map<std::string, size_t> index_of_;               // submitted, unfinished id -> workload index
};

}  // namespace kvscope
