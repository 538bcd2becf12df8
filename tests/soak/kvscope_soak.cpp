// kvscope-soak: proves that nothing is lost under load. It runs the real OpenAI server in this process
// (HttpFrontend + OpenAiServer + EngineLoop on a loopback port), with the engine checking its invariants
// after every step, and drives it with C client threads sending random requests (soak_workload.h) over
// raw sockets while another thread reconfigures the engine every few seconds (soak_reconfigurer.h).
// At the end, with every client done and the engine idle, every KV block must be free and every request
// must have ended: finished, aborted (its client went away) or refused with a reason. The last line of
// output is a JSON summary (docs/DESIGN.md section 4); exit 0 when nothing leaked, broke or failed, else 1,
// 2 for bad input. Threads: main (setup, progress, the final checks), the HTTP accept loop, the server's
// pools, the engine thread, C clients, one reconfiguration thread.
#include "soak_client.h"
#include "soak_reconfigurer.h"
#include "soak_workload.h"

#include "command_line/command_line.h"
#include "command_line/option_checks.h"
#include "http_frontend.h"
#include "openai_server.h"
#include "serve_engine_loop.h"
#include "serve_metrics.h"

#include "kv/kv_cache_dtype.h"
#include "llm_engine.h"
#include "util/errors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <malloc.h>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kvscope::soak {

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    std::string model;
    int64_t requests = 0;
    uint64_t seed = 1;
    bool json = false;
    int concurrency = 8;
    double duration_s = 0;
    int max_model_len = 0;
    int threads = 1;
    double reconfigure_every_s = 2;
    double request_timeout_s = 120;
    bool verbose = false;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// VmRSS from /proc/self/status, in MB (1 MB = 2^20 bytes); 0 when it cannot be read.
double rss_mb() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;  // kB
    return 0;
}

// Between the engine and the server's metrics: remembers the longest step (StepStats::duration, the
// engine's own wall time of schedule + forward + sampling) and passes everything on. Engine thread.
class StepTimer final : public MetricsSink {
public:
    explicit StepTimer(MetricsSink& next) : next_(next) {}
    void on_step(const StepStats& stats) override {
        const double ms = stats.duration * 1000;
        for (double seen = max_ms_.load(); ms > seen && !max_ms_.compare_exchange_weak(seen, ms);) {
        }
        next_.on_step(stats);
    }
    void on_request_finished(const RequestMetrics& metrics) override { next_.on_request_finished(metrics); }
    double max_step_ms() const { return max_ms_.load(); }
    void reset() { max_ms_ = 0; }

private:
    MetricsSink& next_;
    std::atomic<double> max_ms_{0};
};

// How the client requests ended. Any thread.
class Tally {
public:
    explicit Tally(bool verbose) : verbose_(verbose) {}

    void add(const SoakRequest& r, const RequestResult& result) {
        switch (result.outcome) {
        case Outcome::COMPLETED: ++completed; break;
        case Outcome::ABORTED: ++aborted; break;
        case Outcome::REFUSED_4XX: ++refused; break;
        case Outcome::ERROR: ++errors; break;
        }
        if (result.outcome == Outcome::REFUSED_4XX && !r.valid) ++refused_invalid;
        if (result.reused_connection) ++reused_connections;
        if (result.outcome == Outcome::REFUSED_4XX && r.valid) {
            // Grouped by the message without the request's id ("request cmpl-...: ") and with numbers blanked.
            std::string_view message = result.detail;
            if (message.starts_with("request ") && message.find(": ") != std::string_view::npos)
                message.remove_prefix(message.find(": ") + 2);
            message = message.substr(0, std::min(message.find(" ("), size_t{100}));  // the advice in parentheses goes
            std::string reason;
            for (char c : message) {
                const bool digit = c >= '0' && c <= '9';
                if (!digit || reason.empty() || reason.back() != '#') reason += digit ? '#' : c;
            }
            std::lock_guard lock(mu_);
            ++valid_refusals_[reason];
        }
        if (result.outcome == Outcome::ERROR) {
            std::lock_guard lock(mu_);
            if (verbose_ || ++printed_ <= 20)
                std::fprintf(stderr, "kvscope-soak: error: request %s: %s\n", r.label.c_str(), result.detail.c_str());
        }
        ++finished;
    }

    std::map<std::string, int64_t> valid_refusals() {
        std::lock_guard lock(mu_);
        return valid_refusals_;
    }

    std::atomic<int64_t> finished{0}, completed{0}, aborted{0}, refused{0}, refused_invalid{0}, errors{0};
    std::atomic<int64_t> reused_connections{0};  // requests sent on a connection kept alive

private:
    bool verbose_;
    std::mutex mu_;
    int printed_ = 0;
    std::map<std::string, int64_t> valid_refusals_;
};

// Reconfigures the engine every `every_s` seconds until stop(), checking that each change did what the
// contract says (soak_reconfigurer.h): applied when it fits, refused with nothing changed when not.
class ReconfigureThread {
public:
    ReconfigureThread(cli::EngineLoop& loop, uint64_t seed, double every_s, bool verbose)
        : loop_(loop), chooser_(seed), every_s_(every_s), verbose_(verbose) {
        if (every_s_ > 0) thread_ = std::thread([this] { run(); });
    }
    ~ReconfigureThread() { stop(); }

    void stop() {
        {
            std::lock_guard lock(mu_);
            stopping_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

    // While held, no reconfiguration runs (the main thread measures memory at the initial configuration).
    std::unique_lock<std::mutex> hold() { return std::unique_lock(hold_mu_); }

    std::atomic<int64_t> attempted{0}, refused{0}, deliberately_impossible{0}, contract_violations{0};
    // Reconfigurations that threw instead of refusing: failed_invariant a std::logic_error, failed another.
    std::atomic<int64_t> failed_invariant{0}, failed{0};

private:
    void run() {
        while (true) {
            {
                std::unique_lock lock(mu_);
                if (wake_.wait_for(lock, std::chrono::duration<double>(every_s_), [&] { return stopping_; })) return;
            }
            try {
                once();
            } catch (const cli::ServerStopping&) {
                return;
            } catch (const std::exception& e) {  // not a refusal: the engine failed while it changed
                (dynamic_cast<const std::logic_error*>(&e) ? failed_invariant : failed) += 1;
                std::fprintf(stderr, "kvscope-soak: a reconfiguration failed: %s\n", e.what());
            }
        }
    }

    void once() {
        const std::lock_guard held(hold_mu_);
        Reconfiguration choice;
        EngineConfig before;
        int blocks_before = 0;
        ++attempted;
        const std::string refusal = loop_.reconfigure([&](const LlmEngine& engine) {
            before = engine.config();
            blocks_before = engine.num_blocks();
            choice = chooser_.choose(engine);
            return choice.config;
        });
        if (!refusal.empty()) ++refused;
        if (choice.must_refuse) ++deliberately_impossible;
        std::string broken;
        if (choice.must_refuse != !refusal.empty())
            broken = refusal.empty() ? "was applied, but the engine cannot hold every unfinished request in it (or it is invalid)"
                                     : "was refused although it fits: " + refusal;
        loop_.inspect([&](const LlmEngine& engine) {
            const EngineConfig& expected = refusal.empty() ? choice.config : before;
            const int expected_blocks = refusal.empty() ? choice.expected_num_blocks : blocks_before;
            if (!broken.empty()) return;
            if (const std::string knob = Reconfigurer::differs(engine.config(), expected); !knob.empty())
                broken = std::string(refusal.empty() ? "was applied" : "was refused") + " but the engine's " + knob + " is not as it should be";
            else if (engine.num_blocks() != expected_blocks)
                broken = "left " + std::to_string(engine.num_blocks()) + " blocks, expected " + std::to_string(expected_blocks);
        });
        if (!broken.empty()) {
            ++contract_violations;
            std::fprintf(stderr, "kvscope-soak: reconfiguration contract broken: %s %s\n", choice.what.c_str(), broken.c_str());
        } else if (verbose_) {
            std::fprintf(stderr, "kvscope-soak: reconfigure %s: %s\n", choice.what.c_str(),
                         refusal.empty() ? "applied" : ("refused (" + refusal + ")").c_str());
        }
    }

    cli::EngineLoop& loop_;
    Reconfigurer chooser_;
    double every_s_;
    bool verbose_;
    std::mutex mu_;
    std::condition_variable wake_;
    bool stopping_ = false;  // guarded by mu_
    std::mutex hold_mu_;     // held by each reconfiguration and by hold()
    std::thread thread_;
};

// RSS with the engine back at its initial configuration, so that measurements taken at different times
// hold the same KV pool (its size changes with every reconfiguration, by up to 16 MB for dummy:tiny).
// A failure (an exception, not a refusal) is counted in `failures`.
double rss_at(cli::EngineLoop& loop, const EngineConfig& initial, std::atomic<int64_t>& failures) {
    try {
        if (const std::string refusal = loop.reconfigure(initial); !refusal.empty())
            std::fprintf(stderr, "kvscope-soak: the initial configuration was refused for the RSS measurement: %s\n",
                         refusal.c_str());
    } catch (const std::exception& e) {
        ++failures;
        std::fprintf(stderr, "kvscope-soak: going back to the initial configuration failed: %s\n", e.what());
    }
    return rss_mb();
}

// The engine's figures at the end, read on the engine thread.
struct FinalState {
    int num_unfinished = 0;
    int num_blocks = 0;
    int num_free_blocks = 0;
    std::string pool_invariant;  // "" or the first broken invariant of the KV pool
};

FinalState final_state(cli::EngineLoop& loop) {
    FinalState s;
    loop.inspect([&](const LlmEngine& engine) {
        s.num_unfinished = static_cast<int>(engine.scheduler().running().size() + engine.scheduler().waiting().size());
        s.num_blocks = engine.num_blocks();
        s.num_free_blocks = engine.kv_cache_manager().num_free_blocks();
        s.pool_invariant = engine.kv_cache_manager().check_invariants();
    });
    return s;
}

// Warm-up, 1: the model runner's buffers never shrink, and their pages count in RSS once written (the CPU
// backend maps buffers of 2 MiB and more on huge pages). One step as large as the reconfigurations allow
// grows and writes them, so that RSS measured later does not count them as growth.
void warm_up_largest_step(cli::EngineLoop& loop, const EngineConfig& config, int vocab_size) {
    EngineConfig widest = Reconfigurer::widest(config);
    const int prompt_len = config.scheduler.max_model_len - 1;
    const int num_prompts = std::max(1, widest.scheduler.max_num_batched_tokens / prompt_len);
    widest.num_blocks = 2 * num_prompts * ((config.scheduler.max_model_len + config.block_size - 1) / config.block_size);
    if (const std::string refusal = loop.reconfigure(widest); !refusal.empty())
        throw std::runtime_error("the warm-up configuration was refused: " + refusal);
    std::vector<NewRequest> batch;
    std::mt19937_64 rng(1);
    for (int i = 0; i < num_prompts; ++i) {
        NewRequest r;
        r.request_id = "warm-up-" + std::to_string(i);
        for (int t = 0; t < prompt_len; ++t) r.prompt_token_ids.push_back(std::uniform_int_distribution<int>(3, vocab_size - 1)(rng));
        r.sampling_params.max_tokens = 1;
        r.sampling_params.temperature = 0;
        batch.push_back(std::move(r));
    }
    auto stream = std::make_shared<cli::OutputStream>();
    loop.submit(std::move(batch), stream);
    for (int finished = 0; finished < num_prompts;)
        for (const RequestOutput& o : stream->wait(std::chrono::milliseconds(100))) finished += o.finished;
    if (const std::string refusal = loop.reconfigure(config); !refusal.empty())
        throw std::runtime_error("the initial configuration was refused after the warm-up: " + refusal);
}

int run(const Options& o) {
    // As kvscope-cli serve sets up its process (app/cli/cmd_serve.cpp): writes to clients that left fail
    // with EPIPE, and large request buffers are mapped, so that they leave the heap when freed.
    std::signal(SIGPIPE, SIG_IGN);
    mallopt(M_MMAP_THRESHOLD, 1 << 20);

    std::shared_ptr<const Model> model = load_model(o.model);  // BadInput: exit 2
    EngineConfig config;
    config.scheduler.max_model_len = o.max_model_len > 0 ? o.max_model_len : std::min(256, model->config.max_position_embeddings);
    config.scheduler.max_num_seqs = 64;
    config.scheduler.max_num_batched_tokens = 512;
    config.scheduler.enable_prefix_caching = true;
    config.block_size = 16;
    config.num_blocks = 8 * ((config.scheduler.max_model_len + 15) / 16);
    config.num_threads = o.threads;
    config.seed = o.seed;
    config.check_invariants = true;
    LlmEngine engine(model, config);  // BadInput (max_model_len past the model's context): exit 2
    const int max_model_len = config.scheduler.max_model_len;

    const std::string served_name = "soak";
    cli::ServeMetrics metrics(served_name, "kvscope", max_model_len,
                              {config.block_size, engine.num_blocks(), kv_cache_dtype_name(engine.kv_cache_dtype()), true});
    cli::EngineLoop loop(engine, metrics);
    StepTimer step_timer(metrics);
    engine.set_metrics_sink(&step_timer);  // before the engine thread starts; ~EngineLoop clears it
    cli::HttpFrontend frontend(cli::HttpLimits{});
    cli::OpenAiServer api(*model, {served_name, max_model_len, "", {}}, loop, metrics);
    api.install(frontend);
    frontend.bind("127.0.0.1", 0);
    const int port = frontend.port();
    loop.start();
    warm_up_largest_step(loop, config, model->config.vocab_size);
    step_timer.reset();  // the soak's steps from here on
    std::thread server([&] { frontend.run(); });

    const Workload workload(*model, served_name, max_model_len, o.seed);
    std::fprintf(stderr,
                 "kvscope-soak: model %s, %s requests, seed %llu, %d clients, max_model_len %d, %d KV blocks, "
                 "reconfiguring every %g s, on %s\n",
                 o.model.c_str(), o.requests > 0 ? std::to_string(o.requests).c_str() : "unlimited",
                 static_cast<unsigned long long>(o.seed), o.concurrency, max_model_len, engine.num_blocks(),
                 o.reconfigure_every_s, frontend.url().c_str());

    // ---- The run: clients and reconfigurations until the requests are done or the time is up.
    const Clock::time_point start = Clock::now();
    const int64_t warmup = o.requests > 0 ? std::clamp<int64_t>(o.requests / 10, 20, 1000) : 200;
    const int64_t halfway = o.requests > 0 ? o.requests / 2 : -1;
    Tally tally(o.verbose);
    std::atomic<int64_t> next_index{0};
    std::atomic<int> clients_left{o.concurrency};
    ReconfigureThread reconfigurations(loop, o.seed ^ 0x9e3779b97f4a7c15ull, o.reconfigure_every_s, o.verbose);
    std::vector<std::thread> clients;
    for (int c = 0; c < o.concurrency; ++c)
        clients.emplace_back([&] {
            KeptConnection kept;
            while (o.duration_s <= 0 || seconds_since(start) < o.duration_s) {
                const int64_t i = next_index++;
                if (o.requests > 0 && i >= o.requests) break;
                SoakRequest r;
                RequestResult result;
                try {
                    r = workload.make(static_cast<uint64_t>(i));
                    result = run_request(port, r, o.request_timeout_s, kept);
                } catch (const std::exception& e) {  // a reply the checks could not even walk
                    result = {Outcome::ERROR, 0, std::string("the client failed: ") + e.what()};
                }
                tally.add(r, result);
            }
            --clients_left;
        });

    double rss_start = -1, rss_halfway = -1, rss_peak = 0;
    Clock::time_point last_progress = start;
    while (clients_left > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const double rss = rss_mb();
        if (rss_start < 0 && tally.finished >= warmup) {  // warm-up, 2: the first requests ran
            const auto held = reconfigurations.hold();
            rss_start = rss_at(loop, config, reconfigurations.failed_invariant);
        } else if (rss_start >= 0 && rss_halfway < 0 && halfway > warmup && tally.finished >= halfway) {
            const auto held = reconfigurations.hold();
            rss_halfway = rss_at(loop, config, reconfigurations.failed_invariant);
        }
        if (rss_start >= 0) rss_peak = std::max(rss_peak, rss);
        if (seconds_since(last_progress) >= 10) {
            last_progress = Clock::now();
            std::fprintf(stderr,
                         "kvscope-soak: %.0f s: %lld requests ended (%lld completed, %lld aborted, %lld refused, %lld errors), "
                         "%lld reconfigurations (%lld refused), rss %.1f MB, longest step %.1f ms\n",
                         seconds_since(start), static_cast<long long>(tally.finished.load()),
                         static_cast<long long>(tally.completed.load()), static_cast<long long>(tally.aborted.load()),
                         static_cast<long long>(tally.refused.load()), static_cast<long long>(tally.errors.load()),
                         static_cast<long long>(reconfigurations.attempted.load()),
                         static_cast<long long>(reconfigurations.refused.load()), rss, step_timer.max_step_ms());
        }
    }
    for (std::thread& t : clients) t.join();
    reconfigurations.stop();
    const double run_s = seconds_since(start);

    // ---- The end: every client is done. The requests of clients that went away must be aborted by the
    // server (it notices within its poll interval); then the engine must be idle with every block free.
    FinalState end = final_state(loop);
    for (const Clock::time_point idle_by = Clock::now() + std::chrono::seconds(30);
         end.num_unfinished > 0 && Clock::now() < idle_by;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        end = final_state(loop);
    }
    const double rss_end = rss_at(loop, config, reconfigurations.failed_invariant);
    if (rss_start < 0) rss_start = rss_end;  // fewer requests than the warm-up
    frontend.request_stop();
    server.join();
    loop.stop();
    frontend.shutdown();
    const cli::StepFailures step_failures = loop.step_failures();

    const int64_t issued = std::min<int64_t>(next_index.load(), o.requests > 0 ? o.requests : next_index.load());
    const int64_t leaked_blocks = end.num_blocks - end.num_free_blocks;
    const int64_t invariant_violations = step_failures.logic_errors + reconfigurations.contract_violations +
                                         reconfigurations.failed_invariant + (end.pool_invariant.empty() ? 0 : 1);
    // Requests that never ended: a client that timed out counted one already; requests still in the
    // engine now belong to no client, and a step that failed for another reason ended its requests with error.
    const int64_t errors = tally.errors + end.num_unfinished + (step_failures.count - step_failures.logic_errors) +
                           reconfigurations.failed + (issued - tally.finished);

    if (!end.pool_invariant.empty()) std::fprintf(stderr, "kvscope-soak: KV pool invariant broken at the end: %s\n", end.pool_invariant.c_str());
    if (end.num_unfinished > 0)
        std::fprintf(stderr, "kvscope-soak: %d requests still unfinished in the engine 30 s after the last client ended\n",
                     end.num_unfinished);
    if (step_failures.count > 0)
        std::fprintf(stderr, "kvscope-soak: %lld engine steps failed (%lld broken invariants); the last: %s\n",
                     static_cast<long long>(step_failures.count), static_cast<long long>(step_failures.logic_errors),
                     step_failures.last_message.c_str());
    if (leaked_blocks != 0)
        std::fprintf(stderr, "kvscope-soak: %lld of %d KV blocks are not free at the end\n", static_cast<long long>(leaked_blocks),
                     end.num_blocks);

    const auto mb = [](double v) { return std::round(v * 10) / 10; };
    nlohmann::ordered_json summary;
    summary["requests"] = issued;
    summary["completed"] = tally.completed.load();
    summary["aborted"] = tally.aborted.load();
    summary["refused"] = tally.refused.load();
    summary["errors"] = errors;
    summary["reconfigurations"] = reconfigurations.attempted.load();
    summary["reconfigurations_refused"] = reconfigurations.refused.load();
    summary["leaked_blocks"] = leaked_blocks;
    summary["invariant_violations"] = invariant_violations;
    summary["rss_start_mb"] = mb(rss_start);
    summary["rss_end_mb"] = mb(rss_end);
    summary["max_step_ms"] = std::round(step_timer.max_step_ms() * 100) / 100;

    if (!o.json) {
        std::printf("kvscope-soak: %lld requests in %.1f s (%.1f per s), %d clients, model %s, seed %llu\n",
                    static_cast<long long>(issued), run_s, run_s > 0 ? static_cast<double>(issued) / run_s : 0.0,
                    o.concurrency, o.model.c_str(), static_cast<unsigned long long>(o.seed));
        std::printf("  completed %lld, aborted %lld (the client went away), refused %lld (%lld invalid requests, %lld valid "
                    "ones the pool of the moment could not take), errors %lld\n",
                    static_cast<long long>(tally.completed.load()), static_cast<long long>(tally.aborted.load()),
                    static_cast<long long>(tally.refused.load()), static_cast<long long>(tally.refused_invalid.load()),
                    static_cast<long long>(tally.refused - tally.refused_invalid), static_cast<long long>(errors));
        for (const auto& [reason, n] : tally.valid_refusals())
            std::printf("    %6lld x %s\n", static_cast<long long>(n), reason.c_str());
        std::printf("  %lld requests went on a connection kept alive from an earlier one\n",
                    static_cast<long long>(tally.reused_connections.load()));
        std::printf("  reconfigurations %lld: %lld refused (%lld of them chosen to be impossible), %lld contract violations, "
                    "%lld failed\n",
                    static_cast<long long>(reconfigurations.attempted.load()), static_cast<long long>(reconfigurations.refused.load()),
                    static_cast<long long>(reconfigurations.deliberately_impossible.load()),
                    static_cast<long long>(reconfigurations.contract_violations.load()),
                    static_cast<long long>(reconfigurations.failed_invariant + reconfigurations.failed));
        std::printf("  KV blocks free at the end %d of %d; engine steps failed %lld; longest step %.2f ms\n", end.num_free_blocks,
                    end.num_blocks, static_cast<long long>(step_failures.count), step_timer.max_step_ms());
        char halfway_text[32] = "-";
        if (rss_halfway >= 0) std::snprintf(halfway_text, sizeof halfway_text, "%.1f MB", rss_halfway);
        std::printf("  rss at the initial configuration: %.1f MB after warm-up (%lld requests), %s half-way, %.1f MB at "
                    "the end; %.1f MB peak after warm-up\n",
                    rss_start, static_cast<long long>(warmup), halfway_text, rss_end, rss_peak);
    }
    std::printf("%s\n", summary.dump().c_str());
    std::fflush(stdout);
    return leaked_blocks == 0 && invariant_violations == 0 && errors == 0 ? 0 : 1;
}

}  // namespace

}  // namespace kvscope::soak

int main(int argc, char** argv) {
    using namespace kvscope;
    auto app = command_line::make_app(
        "kvscope-soak",
        "Soak test of kvscope's OpenAI server and engine: random requests from many clients while the engine is "
        "reconfigured; checks that every request ends and every KV block is free at the end. The last line of "
        "output is a JSON summary; exit 0 when nothing leaked or failed.");
    soak::Options o;
    app->add_option("--model", o.model, "a Hugging Face directory, a .gguf file, or dummy:PRESET (dummy:tiny)")
        ->type_name("MODEL")->required();
    app->add_option("--requests", o.requests, "requests to send (0 = as many as --duration-s allows)")
        ->type_name("UINT")->check(command_line::int_in(0, int64_t{1} << 40));
    app->add_option("--seed", o.seed, "seeds the requests and the reconfigurations")
        ->type_name("UINT")->check(command_line::any_uint64());
    app->add_flag("--json", o.json, "print the JSON summary only");
    app->add_option("--concurrency", o.concurrency, "client threads, each with one request in flight")
        ->type_name("UINT")->check(command_line::int_in(1, 1024));
    app->add_option("--duration-s", o.duration_s, "stop sending after this many seconds (0 = no limit)")
        ->type_name("SECONDS")->check(command_line::real_in(0));
    app->add_option("--max-model-len", o.max_model_len, "the engine's max_model_len (0 = the model's context, at most 256)")
        ->type_name("UINT")->check(command_line::int_in(0, 8192));
    app->add_option("--threads", o.threads, "the engine's CPU threads (0 = all cores)")
        ->type_name("UINT")->check(command_line::int_in(0, 256));
    app->add_option("--reconfigure-every-s", o.reconfigure_every_s, "seconds between reconfigurations (0 = never)")
        ->type_name("SECONDS")->check(command_line::real_in(0));
    app->add_option("--request-timeout-s", o.request_timeout_s, "a request not ended after this long is an error")
        ->type_name("SECONDS")->check(command_line::real_above(0));
    app->add_flag("--verbose", o.verbose, "print every reconfiguration and every error on stderr");
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;
    if (o.requests == 0 && o.duration_s == 0) {
        std::fprintf(stderr, "kvscope-soak: error: give --requests N or --duration-s D\n");
        return 2;
    }
    if (o.max_model_len != 0 && o.max_model_len < 32) {
        std::fprintf(stderr, "kvscope-soak: error: --max-model-len must be 0 or at least 32, got %d\n", o.max_model_len);
        return 2;
    }
    try {
        return soak::run(o);
    } catch (const BadInput& e) {
        std::fprintf(stderr, "kvscope-soak: error: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvscope-soak: error: %s\n", e.what());
        return 1;
    }
}
