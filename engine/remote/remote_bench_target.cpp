#include "remote/remote_bench_target.h"

#include "util/errors.h"

#include <algorithm>

namespace kvscope {

struct RemoteBenchTarget::Flight {
    RequestMetrics metrics;
    OpenAiStreamReader reader;
    Flight(OpenAiApi api, int max_tokens, double stall_s) : reader(api, max_tokens, stall_s) {}
};

RemoteBenchTarget::RemoteBenchTarget(RemoteTargetOptions options)
    : options_(std::move(options)), t0_(std::chrono::steady_clock::now()), pool_(options_.endpoint) {}

RemoteBenchTarget::~RemoteBenchTarget() = default;

double RemoteBenchTarget::now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void RemoteBenchTarget::submit(NewRequest request) {
    OpenAiRequest r;
    r.api = options_.api;
    r.model = options_.model;
    r.max_tokens = request.sampling_params.max_tokens;
    r.temperature = request.sampling_params.temperature;
    r.seed = request.sampling_params.seed.value_or(0);
    r.min_tokens = options_.min_tokens;
    if (options_.api == OpenAiApi::CHAT) {
        const auto it = options_.prompt_texts.find(request.prompt_token_ids);
        if (it == options_.prompt_texts.end())
            throw BadInput("request " + request.request_id + ": no prompt text for a chat endpoint");
        r.prompt_text = it->second;
    } else {
        r.prompt_token_ids = request.prompt_token_ids;
    }
    auto flight = std::make_shared<Flight>(options_.api, r.max_tokens, options_.endpoint.request_timeout_s);
    flight->metrics.request_id = request.request_id;
    flight->metrics.num_prompt_tokens = static_cast<int>(request.prompt_token_ids.size());
    {
        std::lock_guard lock(mutex_);
        ++in_flight_;
    }
    flight->metrics.arrival_time = now();
    StreamHandlers handlers;
    handlers.on_data = [this, flight](int status, std::string_view bytes) {
        return flight->reader.feed(status, bytes, now());
    };
    handlers.on_done = [this, flight](int status, const std::string& error) { on_done(flight, status, error); };
    pool_.post(options_.path, openai_request_body(r), std::move(handlers));
}

std::string finish_remote_request(RequestMetrics& m, OpenAiStreamReader& rd, int status,
                                  const std::string& transport_error, double now) {
    rd.finish(status, transport_error);
    m.finish_time = now;
    m.token_times = rd.chunk_times();
    if (rd.prompt_tokens() >= 0) m.num_prompt_tokens = rd.prompt_tokens();
    if (rd.cached_tokens() >= 0) m.num_cached_tokens = std::min(rd.cached_tokens(), m.num_prompt_tokens);
    m.num_output_tokens = rd.completion_tokens() >= 0 ? rd.completion_tokens() : static_cast<int>(m.token_times.size());
    if (!rd.error().empty()) m.finish_reason = FinishReason::ERROR;
    else m.finish_reason = rd.finish_reason() == "length" ? FinishReason::LENGTH : FinishReason::STOP;
    return rd.error();
}

void RemoteBenchTarget::on_done(const std::shared_ptr<Flight>& f, int status, const std::string& error) {
    RequestMetrics& m = f->metrics;
    std::string why = finish_remote_request(m, f->reader, status, error, now());
    {
        std::lock_guard lock(mutex_);
        finished_.push_back({std::move(m), std::move(why)});
        --in_flight_;
    }
    finished_cv_.notify_all();
}

std::vector<RemoteFinished> RemoteBenchTarget::wait_finished(double timeout_s) {
    std::unique_lock lock(mutex_);
    finished_cv_.wait_for(lock, std::chrono::duration<double>(std::max(0.0, timeout_s)),
                          [this] { return !finished_.empty(); });
    std::vector<RemoteFinished> out;
    out.swap(finished_);
    return out;
}

int RemoteBenchTarget::num_in_flight() const {
    std::lock_guard lock(mutex_);
    return in_flight_;
}

BenchRun run_remote_bench(RemoteBenchTarget& target, const std::vector<BenchRequest>& workload,
                          const BenchOptions& options, const std::string& label, const std::string& id_prefix,
                          const RemoteBenchHooks& hooks) {
    BenchDriver driver(workload, options, id_prefix);
    std::map<std::string, std::string> errors;  // request id -> why it failed
    while (!driver.done() && !(hooks.cancelled && hooks.cancelled())) {
        const std::optional<double> next_due = driver.admit(target);
        if (driver.done()) break;
        // Nothing due on the clock: a finish moves things on (poll so that a stuck state still ends).
        // A cancellable run wakes at least every 100 ms to ask.
        double wait = next_due ? *next_due - target.now() : 1.0;
        if (hooks.cancelled) wait = std::min(wait, 0.1);
        if (wait <= 0) continue;
        for (RemoteFinished& f : target.wait_finished(wait)) {
            if (!f.error.empty()) errors[f.metrics.request_id] = f.error;
            driver.on_request_finished(f.metrics);
            if (hooks.on_finished) hooks.on_finished(f);
        }
    }
    BenchRun r = driver.result(target.now());
    r.label = label;
    for (size_t i = 0; i < r.requests.size(); ++i)
        if (const auto it = errors.find(r.requests[i].request_id); it != errors.end()) r.errors[i] = it->second;
    return r;
}

}  // namespace kvscope
