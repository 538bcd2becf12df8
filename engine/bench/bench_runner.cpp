#include "bench/bench_runner.h"

#include "metrics/step_recorder.h"
#include "util/errors.h"

#include <stdexcept>

namespace kvscope {

namespace {

// The engine's sink during a run: finished requests go to the driver; steps are recorded once the
// timed part has started (the warm-up's are not the run's).
class RunSink final : public MetricsSink {
public:
    explicit RunSink(BenchDriver& driver) : driver_(driver) {}
    void on_step(const StepStats& stats) override {
        if (recording_) recorder_.on_step(stats);
    }
    void on_request_finished(const RequestMetrics& metrics) override { driver_.on_request_finished(metrics); }

    // From now on steps count; cumulative counters are measured from the engine's current ones.
    void start_recording(const LlmEngine& engine) {
        recording_ = true;
        const PrefixCacheStats pc = engine.kv_cache_manager().prefix_cache_stats();
        recorder_.set_baseline(engine.num_preemptions(), pc.num_query_tokens, pc.num_hit_tokens);
    }
    bool recording() const { return recording_; }
    const StepRecorder& recorder() const { return recorder_; }

private:
    BenchDriver& driver_;
    StepRecorder recorder_;
    bool recording_ = false;
};

}  // namespace

BenchRunner::BenchRunner(LlmEngine& engine, std::vector<BenchRequest> workload, BenchOptions options)
    : engine_(engine), workload_(std::move(workload)), options_(std::move(options)) {
    BenchDriver check(workload_, options_, "");  // BadInput now, not at the first run
}

BenchRun BenchRunner::run(const std::string& label) {
    BenchDriver driver(workload_, options_, "bench-" + std::to_string(run_count_++) + "-");
    EngineBenchTarget target(engine_);
    RunSink sink(driver);
    engine_.set_metrics_sink(&sink);  // the runner owns the sink while it runs
    try {
        while (!driver.done()) {
            const std::optional<double> next_due = driver.admit(target);
            if (driver.done()) break;  // the last requests were refused as they were submitted
            if (driver.timed_part_started() && !sink.recording()) sink.start_recording(engine_);
            if (engine_.has_unfinished_requests()) {
                engine_.step();
                continue;
            }
            if (!next_due) throw std::logic_error("benchmark: nothing runs and nothing is due, but the run is not done");
            engine_.wait_until(*next_due);  // a simulated engine's virtual clock jumps there
        }
    } catch (...) {
        engine_.set_metrics_sink(nullptr);
        throw;
    }
    engine_.set_metrics_sink(nullptr);
    BenchRun r = driver.result(engine_.now());
    check_some_completed(r);
    r.label = label;
    r.config = engine_.resolved_config();
    r.engine = sink.recorder().aggregates();
    r.steps = sink.recorder().steps();
    engine_.release_finished();
    return r;
}

BenchRun BenchRunner::run_with(const EngineConfig& config, const std::string& label) {
    engine_.reconfigure(config);
    return run(label);
}

std::pair<BenchRun, BenchRun> BenchRunner::run_compare_naive(const EngineConfig& paged) {
    EngineConfig naive = paged;
    naive.mode = BatchingMode::NAIVE;
    BenchRun a = run_with(naive, "naive");
    EngineConfig p = paged;
    p.mode = BatchingMode::PAGED;
    BenchRun b = run_with(p, "paged");
    return {std::move(a), std::move(b)};
}

}  // namespace kvscope
