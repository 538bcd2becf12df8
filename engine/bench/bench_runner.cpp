#include "bench/bench_runner.h"

#include "kv/kv_cache_dtype.h"

#include "util/errors.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

namespace kvscope {

struct BenchRunner::Pending {
    size_t next = 0;      // next workload index to submit
    int in_flight = 0;
    int done = 0;
    std::string prefix;   // request id prefix of this run
    std::vector<double> due, submit;
    std::vector<bool> held;  // due while the concurrency cap was full: its arrival is its submission
    std::vector<std::string> errors;
    std::map<std::string, size_t> index_of;
};

BenchRunner::BenchRunner(LlmEngine& engine, std::vector<BenchRequest> workload, BenchOptions options)
    : engine_(engine), workload_(std::move(workload)), options_(std::move(options)) {
    if (!options_.arrival_offsets.empty() && options_.arrival_offsets.size() != workload_.size())
        throw BadInput("arrival offsets (" + std::to_string(options_.arrival_offsets.size()) +
                       ") do not match the workload (" + std::to_string(workload_.size()) + " requests)");
    if (options_.max_concurrency < 0) throw BadInput("--max-concurrency must be >= 0");
    if (options_.num_warmups < 0) throw BadInput("--num-warmups must be >= 0");
}

NewRequest BenchRunner::make_request(size_t i, const std::string& id, int max_tokens) const {
    NewRequest r;
    r.request_id = id;
    r.prompt_token_ids = workload_[i].prompt_token_ids;
    r.sampling_params.temperature = options_.temperature;
    r.sampling_params.max_tokens = max_tokens;
    r.sampling_params.ignore_eos = true;  // forced output lengths, as vLLM's benchmark
    r.sampling_params.seed = options_.seed + i;
    return r;
}

// Short requests (at most 16 output tokens) that touch the kernels and the pool; not recorded.
void BenchRunner::warm_up() {
    if (workload_.empty()) return;
    for (int i = 0; i < options_.num_warmups; ++i) {
        const size_t k = static_cast<size_t>(i) % workload_.size();
        try {
            engine_.add_request(make_request(k, "warmup-" + std::to_string(run_count_) + "-" + std::to_string(i),
                                             std::min(workload_[k].output_len, 16)));
        } catch (const BadInput&) {
        }  // the timed run reports the same request's error
    }
    while (engine_.has_unfinished_requests()) engine_.step();
    engine_.release_finished();
}

// Submits every request that is due, within the concurrency cap. A rejected request is recorded as
// failed and the run goes on.
void BenchRunner::admit(Pending& p, double t0) {
    const double now = engine_.now() - t0;
    while (p.next < workload_.size() && p.due[p.next] - t0 <= now) {
        if (options_.max_concurrency > 0 && p.in_flight >= options_.max_concurrency) {
            for (size_t i = p.next; i < workload_.size() && p.due[i] - t0 <= now; ++i) p.held[i] = true;
            return;
        }
        const size_t i = p.next++;
        const std::string id = p.prefix + std::to_string(i);
        try {
            engine_.add_request(make_request(i, id, workload_[i].output_len));
            p.submit[i] = engine_.now();
            p.index_of[id] = i;
            ++p.in_flight;
        } catch (const BadInput& e) {
            p.errors[i] = e.what();
            if (options_.progress) options_.progress(++p.done, static_cast<int>(workload_.size()));
        }
    }
}

void BenchRunner::wait_for_arrival(const Pending& p, double t0) const {
    if (p.next >= workload_.size()) return;
    const double wait = p.due[p.next] - t0 - (engine_.now() - t0);
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
}

BenchRun BenchRunner::run(const std::string& label) {
    warm_up();
    recorder_.clear();
    const PrefixCacheStats pc = engine_.kv_cache_manager().prefix_cache_stats();
    recorder_.set_baseline(engine_.scheduler().num_preemptions(), pc.num_query_tokens, pc.num_hit_tokens);
    engine_.set_metrics_sink(&recorder_);  // the runner owns the sink while it runs
    Pending p;
    const size_t n = workload_.size();
    p.prefix = "r" + std::to_string(run_count_++) + "-";
    const double t0 = engine_.now();
    p.due.resize(n, t0);
    for (size_t i = 0; i < n && !options_.arrival_offsets.empty(); ++i) p.due[i] = t0 + options_.arrival_offsets[i];
    p.submit.assign(n, -1.0);
    p.held.assign(n, false);
    p.errors.assign(n, "");
    while (p.next < n || engine_.has_unfinished_requests()) {
        admit(p, t0);
        if (!engine_.has_unfinished_requests()) {
            wait_for_arrival(p, t0);
            continue;
        }
        for (const RequestOutput& o : engine_.step())
            if (o.finished) {
                --p.in_flight;
                if (options_.progress) options_.progress(++p.done, static_cast<int>(n));
            }
    }
    const double duration = engine_.now() - t0;
    engine_.set_metrics_sink(nullptr);
    BenchRun r = collect(p, label, t0, duration);
    engine_.release_finished();
    return r;
}

// Metrics in workload order. A request's arrival is when it was due (a real server would have queued
// it while the engine was busy with a step), unless the concurrency cap held it back.
BenchRun BenchRunner::collect(Pending& p, const std::string& label, double t0, double duration) {
    BenchRun r;
    r.label = label;
    r.config = engine_.config();
    r.config.kv_cache_dtype = kv_cache_dtype_name(engine_.kv_cache_dtype());  // what auto resolved to
    r.start_time = t0;
    r.requests.resize(workload_.size());
    for (const RequestMetrics& m : recorder_.requests()) {
        auto it = p.index_of.find(m.request_id);
        if (it == p.index_of.end()) continue;
        RequestMetrics& out = r.requests[it->second] = m;
        if (!p.held[it->second]) out.arrival_time = std::min(m.arrival_time, p.due[it->second]);
    }
    for (size_t i = 0; i < workload_.size(); ++i) {
        RequestMetrics& m = r.requests[i];
        if (!p.errors[i].empty()) {  // rejected: never entered the engine
            m.request_id = p.prefix + std::to_string(i);
            m.num_prompt_tokens = static_cast<int>(workload_[i].prompt_token_ids.size());
            m.finish_reason = FinishReason::ERROR;
            m.arrival_time = m.finish_time = p.due[i];
        }
    }
    r.submit_times = std::move(p.submit);
    r.errors = std::move(p.errors);
    r.summary = summarize(r.requests, duration, options_.percentiles, options_.goodput);
    r.engine = recorder_.aggregates();
    r.steps = recorder_.steps();
    return r;
}

BenchRun BenchRunner::run_with(const EngineConfig& config, const std::string& label) {
    engine_.reconfigure(config);
    return run(label);
}

std::pair<BenchRun, BenchRun> BenchRunner::run_compare_naive(const EngineConfig& paged) {
    EngineConfig naive = paged;
    naive.mode = "naive";
    BenchRun a = run_with(naive, "naive");
    EngineConfig p = paged;
    p.mode = "paged";
    BenchRun b = run_with(p, "paged");
    return {std::move(a), std::move(b)};
}

}  // namespace kvscope
