#include "serve_engine_loop.h"

#include "util/errors.h"

#include <cstdio>
#include <future>

namespace kvscope::cli {

void OutputStream::push(std::vector<RequestOutput> outputs) {
    {
        std::lock_guard lock(mu_);
        for (RequestOutput& o : outputs) queue_.push_back(std::move(o));
    }
    ready_.notify_all();
}

std::vector<RequestOutput> OutputStream::wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    ready_.wait_for(lock, timeout, [&] { return !queue_.empty(); });
    std::vector<RequestOutput> out;
    out.swap(queue_);
    return out;
}

EngineLoop::EngineLoop(LlmEngine& engine, ServeMetrics& metrics) : engine_(engine), metrics_(metrics) {
    engine_.set_metrics_sink(&metrics_);
    publish_gauges();
}

EngineLoop::~EngineLoop() {
    stop();
    engine_.set_metrics_sink(nullptr);
}

void EngineLoop::start() { thread_ = std::thread(&EngineLoop::run, this); }

void EngineLoop::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void EngineLoop::post(std::function<void()> command) {
    {
        std::lock_guard lock(mu_);
        if (stopping_) throw ServerStopping("the server is shutting down");
        commands_.push_back(std::move(command));
    }
    wake_.notify_all();
}

std::vector<std::vector<std::string>> EngineLoop::submit(std::vector<NewRequest> requests,
                                                         std::shared_ptr<OutputStream> stream) {
    using Ids = std::vector<std::vector<std::string>>;
    auto promise = std::make_shared<std::promise<Ids>>();
    std::future<Ids> result = promise->get_future();
    post([this, requests = std::move(requests), stream = std::move(stream), promise]() mutable {
        Ids ids;
        try {
            // As vLLM: a priority means nothing under fcfs, so it is refused rather than ignored. Read here,
            // on the loop's thread, because the policy can change while the server runs.
            if (engine_.config().scheduler.policy != SchedulerPolicy::PRIORITY)
                for (const NewRequest& r : requests)
                    if (r.priority != 0)
                        throw BadInput("priority " + std::to_string(r.priority) +
                                       " was given, but priority scheduling is not enabled (start the server with "
                                       "--policy priority)");
            for (NewRequest& r : requests) {
                const int num_prompt_tokens = static_cast<int>(r.prompt_token_ids.size());
                const SamplingParams params = r.sampling_params;
                ids.push_back(engine_.add_request(std::move(r)));
                metrics_.observe_request_params(params.n, params.max_tokens);
                for (const std::string& id : ids.back()) routes_[id] = Route{stream, num_prompt_tokens, false};
            }
            promise->set_value(std::move(ids));
        } catch (...) {
            // All or none: take back the requests of this submission that were already added.
            for (const auto& list : ids)
                for (const std::string& id : list) {
                    routes_.erase(id);
                    engine_.abort_request(id);
                }
            promise->set_exception(std::current_exception());
        }
    });
    try {
        return result.get();
    } catch (const std::future_error&) {  // the loop stopped before it ran the command
        throw ServerStopping("the server is shutting down");
    }
}

void EngineLoop::abort(std::vector<std::string> request_ids) {
    try {
        post([this, ids = std::move(request_ids)] {
            for (const std::string& id : ids)
                if (routes_.erase(id)) engine_.abort_request(id);
        });
    } catch (const ServerStopping&) {
        // stop() aborts everything anyway.
    }
}

void EngineLoop::call(std::function<void()> command) {
    auto promise = std::make_shared<std::promise<void>>();
    std::future<void> done = promise->get_future();
    post([command = std::move(command), promise] {
        try {
            command();
            promise->set_value();
        } catch (...) {
            promise->set_exception(std::current_exception());
        }
    });
    try {
        done.get();
    } catch (const std::future_error&) {  // the loop stopped before it ran the command
        throw ServerStopping("the server is shutting down");
    }
}

std::string EngineLoop::reconfigure(std::function<EngineConfig(const LlmEngine&)> choose) {
    std::string refusal;
    call([&] {
        try {
            engine_.reconfigure(choose(engine_));
        } catch (const BadInput& e) {
            refusal = e.what();
            if (refusal.empty()) refusal = "refused";
        }
        publish_gauges();
    });
    return refusal;
}

std::string EngineLoop::reconfigure(const EngineConfig& config) {
    return reconfigure([config](const LlmEngine&) { return config; });
}

void EngineLoop::inspect(std::function<void(const LlmEngine&)> read) {
    call([&] { read(engine_); });
}

StepFailures EngineLoop::step_failures() const {
    std::lock_guard lock(failures_mu_);
    return failures_;
}

void EngineLoop::run() {
    while (true) {
        std::vector<std::function<void()>> commands;
        bool stop = false;
        {
            std::unique_lock lock(mu_);
            // has_unfinished_requests() reads engine state: safe, this is the engine thread.
            wake_.wait(lock, [&] { return stopping_ || !commands_.empty() || engine_.has_unfinished_requests(); });
            commands.swap(commands_);
            stop = stopping_;
        }
        for (auto& command : commands) command();
        if (stop) {
            finish_all(FinishReason::ABORT);
            engine_.release_finished();
            publish_gauges();
            return;
        }
        if (engine_.has_unfinished_requests()) {
            try {
                deliver(engine_.step());
            } catch (const std::exception& e) {
                std::fprintf(stderr, "kvscope serve: engine step failed: %s\n", e.what());
                {
                    std::lock_guard lock(failures_mu_);
                    ++failures_.count;
                    if (dynamic_cast<const std::logic_error*>(&e)) ++failures_.logic_errors;
                    failures_.last_message = e.what();
                }
                finish_all(FinishReason::ERROR);
            }
        }
        engine_.release_finished();
        publish_gauges();
    }
}

void EngineLoop::deliver(std::vector<RequestOutput> outputs) {
    std::map<OutputStream*, std::pair<std::shared_ptr<OutputStream>, std::vector<RequestOutput>>> batches;
    int64_t prompt_tokens = 0, generation_tokens = 0;
    for (RequestOutput& o : outputs) {
        auto it = routes_.find(o.request_id);
        if (it == routes_.end()) continue;  // aborted by its connection
        Route& route = it->second;
        generation_tokens += static_cast<int64_t>(o.new_token_ids.size());
        if (!route.prefilled && !o.new_token_ids.empty()) {
            route.prefilled = true;
            prompt_tokens += route.num_prompt_tokens;
        }
        auto& batch = batches[route.stream.get()];
        batch.first = route.stream;
        const bool finished = o.finished;
        batch.second.push_back(std::move(o));
        if (finished) routes_.erase(it);
    }
    if (prompt_tokens) metrics_.add_prompt_tokens(prompt_tokens);
    if (generation_tokens) metrics_.add_generation_tokens(generation_tokens);
    for (auto& [ptr, batch] : batches) batch.first->push(std::move(batch.second));
}

void EngineLoop::finish_all(FinishReason reason) {
    for (auto& [id, route] : routes_) {
        try {
            engine_.abort_request(id);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "kvscope serve: abort of %s failed: %s\n", id.c_str(), e.what());
        }
        RequestOutput o;
        o.request_id = id;
        o.finished = true;
        o.finish_reason = reason;
        route.stream->push({std::move(o)});
    }
    routes_.clear();
}

void EngineLoop::publish_gauges() {
    EngineGauges g;
    g.num_running = static_cast<int>(engine_.scheduler().running().size());
    g.num_waiting = static_cast<int>(engine_.scheduler().waiting().size());
    g.kv_cache_usage = engine_.kv_cache_manager().usage();
    g.num_preemptions = engine_.num_preemptions();
    const PrefixCacheStats pc = engine_.kv_cache_manager().prefix_cache_stats();
    g.prefix_cache_queries = pc.num_query_tokens;
    g.prefix_cache_hits = pc.num_hit_tokens;
    metrics_.set_engine_gauges(g);
}

}  // namespace kvscope::cli
