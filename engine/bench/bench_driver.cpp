#include "bench/bench_driver.h"

#include "util/errors.h"

#include <algorithm>

namespace kvscope {

namespace {
constexpr int kWarmupMaxTokens = 16;  // enough to touch every kernel and the pool, cheap to run
}

BenchDriver::BenchDriver(std::vector<BenchRequest> workload, BenchOptions options, std::string id_prefix)
    : workload_(std::move(workload)), options_(std::move(options)), prefix_(std::move(id_prefix)) {
    const size_t n = workload_.size();
    if (!options_.arrival_offsets.empty() && options_.arrival_offsets.size() != n)
        throw BadInput("arrival offsets (" + std::to_string(options_.arrival_offsets.size()) +
                       ") do not match the workload (" + std::to_string(n) + " requests)");
    if (options_.max_concurrency < 0) throw BadInput("--max-concurrency must be >= 0");
    if (options_.num_warmups < 0) throw BadInput("--num-warmups must be >= 0");
    due_.assign(n, 0.0);
    submit_.assign(n, -1.0);
    held_.assign(n, false);
    errors_.assign(n, "");
    finished_.resize(n);
}

NewRequest BenchDriver::make_request(size_t i, const std::string& id, int max_tokens) const {
    NewRequest r;
    r.request_id = id;
    r.prompt_token_ids = workload_[i].prompt_token_ids;
    r.sampling_params.temperature = options_.temperature;
    r.sampling_params.max_tokens = max_tokens;
    r.sampling_params.ignore_eos = true;  // forced output lengths, as vLLM's benchmark
    r.sampling_params.seed = options_.seed + i;
    return r;
}

void BenchDriver::start_timed_part(double now) {
    phase_ = Phase::TIMED;
    t0_ = now;
    for (size_t i = 0; i < workload_.size(); ++i)
        due_[i] = t0_ + (options_.arrival_offsets.empty() ? 0.0 : options_.arrival_offsets[i]);
    if (workload_.empty()) phase_ = Phase::DONE;
}

std::optional<double> BenchDriver::admit(BenchTarget& target) {
    if (phase_ == Phase::NOT_STARTED) {
        phase_ = Phase::WARMING_UP;
        for (int i = 0; i < options_.num_warmups && !workload_.empty(); ++i) {
            const size_t k = static_cast<size_t>(i) % workload_.size();
            try {
                target.submit(make_request(k, prefix_ + "warmup-" + std::to_string(i),
                                           std::min(workload_[k].output_len, kWarmupMaxTokens)));
                ++warmups_in_flight_;
            } catch (const BadInput&) {
            }  // the timed run reports the same request's error
        }
        if (warmups_in_flight_ == 0) start_timed_part(target.now());
    }
    if (phase_ != Phase::TIMED) return std::nullopt;
    const double now = target.now();
    while (next_ < workload_.size() && due_[next_] <= now) {
        if (options_.max_concurrency > 0 && in_flight_ >= options_.max_concurrency) {
            for (size_t i = next_; i < workload_.size() && due_[i] <= now; ++i) held_[i] = true;
            return std::nullopt;
        }
        const size_t i = next_++;
        const std::string id = prefix_ + std::to_string(i);
        try {
            target.submit(make_request(i, id, workload_[i].output_len));
            submit_[i] = target.now();
            index_of_[id] = i;
            ++in_flight_;
        } catch (const BadInput& e) {
            errors_[i] = e.what();
            note_done();
        }
    }
    if (next_ < workload_.size() && !(options_.max_concurrency > 0 && in_flight_ >= options_.max_concurrency))
        return due_[next_];
    return std::nullopt;
}

void BenchDriver::on_request_finished(const RequestMetrics& m) {
    if (m.request_id.rfind(prefix_, 0) != 0) return;
    if (phase_ == Phase::WARMING_UP && m.request_id.rfind(prefix_ + "warmup-", 0) == 0) {
        if (--warmups_in_flight_ == 0) start_timed_part(m.finish_time);
        return;
    }
    auto it = index_of_.find(m.request_id);
    if (it == index_of_.end()) return;
    finished_[it->second] = m;
    index_of_.erase(it);
    --in_flight_;
    note_done();
}

void BenchDriver::note_done() {
    ++num_done_;
    if (options_.progress) options_.progress(num_done_, num_requests());
    if (num_done_ == num_requests()) phase_ = Phase::DONE;
}

bool BenchDriver::done() const { return phase_ == Phase::DONE; }

std::vector<std::string> BenchDriver::in_flight_ids() const {
    std::vector<std::string> ids;
    for (const auto& [id, i] : index_of_) ids.push_back(id);
    for (int i = 0; i < options_.num_warmups && phase_ == Phase::WARMING_UP; ++i)
        ids.push_back(prefix_ + "warmup-" + std::to_string(i));
    return ids;
}

BenchRun BenchDriver::result(double now) const {
    BenchRun r;
    r.start_time = t0_;
    r.requests.resize(workload_.size());
    for (size_t i = 0; i < workload_.size(); ++i) {
        RequestMetrics& m = r.requests[i];
        if (finished_[i]) {
            m = *finished_[i];
            if (!held_[i]) m.arrival_time = std::min(m.arrival_time, due_[i]);
            continue;
        }
        // Refused by the target, or never finished (a cancelled run): a failed request.
        m.request_id = prefix_ + std::to_string(i);
        m.num_prompt_tokens = static_cast<int>(workload_[i].prompt_token_ids.size());
        m.finish_reason = errors_[i].empty() ? FinishReason::ABORT : FinishReason::ERROR;
        m.arrival_time = m.finish_time = due_[i];
    }
    r.submit_times = submit_;
    r.errors = errors_;
    r.summary = summarize(r.requests, timed_part_started() ? now - t0_ : 0.0, options_.percentiles, options_.goodput);
    return r;
}

void check_some_completed(const BenchRun& run) {
    if (run.summary.completed > 0) return;
    for (const std::string& e : run.errors)
        if (!e.empty()) throw BadInput("benchmark: every request was refused; the first: " + e);
}

}  // namespace kvscope
