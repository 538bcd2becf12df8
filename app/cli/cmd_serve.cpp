// kvscope-cli serve: an OpenAI-compatible HTTP server over the continuous-batching engine, on
// cpp-httplib (HttpFrontend). Threads: httplib's accept loop (main thread), the connection gate, the
// request pools, one engine thread that owns the LlmEngine (EngineLoop), and one thread that waits for
// SIGINT/SIGTERM. A stop signal ends accepting, aborts every request in flight (its client gets the
// end of its stream), waits for the request threads and joins the engine thread.
#include "commands.h"
#include "engine_options.h"
#include "http_frontend.h"
#include "openai_server.h"
#include "serve_engine_loop.h"
#include "serve_limits.h"
#include "serve_metrics.h"
#include "command_line/command_line.h"
#include "command_line/option_checks.h"

#include "kv/kv_cache_dtype.h"
#include "llm_engine.h"
#include "sim/simulation_info.h"
#include "util/errors.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <thread>

namespace kvscope::cli {

namespace {

// SIGINT and SIGTERM are blocked in every thread (threads inherit the mask, so this must come before
// the first one starts) and taken by one thread with sigwait, which stops the server; no code runs in
// a signal handler. A signal before the server is up (a long model load) exits at once, and a second
// signal kills the process, in case shutting down ever hangs.
class StopSignals {
public:
    StopSignals() {
        sigemptyset(&set_);
        sigaddset(&set_, SIGINT);
        sigaddset(&set_, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set_, &old_mask_);
        std::signal(SIGPIPE, SIG_IGN);  // writes to a client that left fail with EPIPE instead
        thread_ = std::thread([this] {
            bool stopping = false;
            while (true) {
                int sig = 0;
                sigwait(&set_, &sig);
                if (done_) return;  // the destructor's wake-up
                HttpFrontend* frontend = frontend_.load();
                if (stopping || !frontend) std::_Exit(128 + sig);
                stopping = true;
                std::fprintf(stderr, "kvscope serve: stopping (signal %d)\n", sig);
                frontend->request_stop();
            }
        });
    }
    ~StopSignals() { release(); }
    // Stops waiting for signals (before the server it would stop goes away).
    void release() {
        if (done_.exchange(true)) return;
        pthread_kill(thread_.native_handle(), SIGTERM);  // wakes sigwait; blocked, so it kills nothing
        thread_.join();
        pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    }
    void attach(HttpFrontend& frontend) { frontend_ = &frontend; }

private:
    sigset_t set_{}, old_mask_{};
    std::atomic<HttpFrontend*> frontend_{nullptr};
    std::atomic<bool> done_{false};
    std::thread thread_;
};

// 1,000 idle clients need 1,000 descriptors; the soft limit is often 1024 while the hard one is higher.
void raise_descriptor_limit() {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
}

// The name a model is served under when none is given: its directory or file name, never a path.
std::string default_served_name(const std::string& spec) {
    if (spec.starts_with("dummy:")) return spec;
    const std::filesystem::path p(spec);
    const std::string name = (p.has_filename() ? p.filename() : p.parent_path().filename()).string();
    return name.empty() ? spec : name;
}

}  // namespace

int run_serve(int argc, char** argv) {
    // ---- Options: the engine knobs, then the server's own. Add a server option here: bind it to a
    // local, give it a type name and, for a number, a check (command_line/option_checks.h).
    auto app = command_line::make_app("kvscope-cli serve", "OpenAI-compatible HTTP server over the engine.");
    EngineOptions engine_options;
    add_engine_options(*app, engine_options);
    std::string host = "127.0.0.1";
    int port = 8000;
    std::string served_name;
    std::string api_key;
    std::string metrics_prefix = "kvscope";
    std::string ssl_certfile, ssl_keyfile;
    HttpLimits http;
    RequestLimits limits;
    app->add_option("--host", host, "address to listen on (0.0.0.0: every interface)")->type_name("HOST");
    app->add_option("--port", port, "TCP port (0 = any free port)")->type_name("PORT")->check(command_line::int_in(0, 65535));
    app->add_option("--served-model-name", served_name, "the model's name in the API")
        ->type_name("NAME")->default_str("the model's directory or file name");
    app->add_option("--api-key", api_key, "clients must send 'Authorization: Bearer KEY' on /v1 routes")
        ->type_name("KEY")->envname("KVSCOPE_API_KEY")->default_str("none: no authentication");
    app->add_option("--ssl-certfile", ssl_certfile, "serve HTTPS with this PEM certificate (chain) (with --ssl-keyfile)")
        ->type_name("FILE");
    app->add_option("--ssl-keyfile", ssl_keyfile, "the PEM private key of --ssl-certfile")->type_name("FILE");
    bool enable_prompt_tokens_details = false;
    app->add_flag("--enable-prompt-tokens-details", enable_prompt_tokens_details,
                  "usage gains prompt_tokens_details.cached_tokens: the prompt tokens the prefix cache served (vLLM's flag)");
    app->add_option("--metrics-prefix", metrics_prefix, "metric names on /metrics: kvscope:... or vLLM's exact vllm:...")
        ->type_name("kvscope|vllm")->check(CLI::IsMember({"kvscope", "vllm"}));
    auto* limit_group = "Limits (a request past one is refused with a 4xx before it costs anything)";
    app->add_option("--http-threads", http.max_threads, "requests in flight at once (each holds a thread); more wait in a queue")
        ->type_name("UINT")->check(command_line::int_in(1, 65536))->group(limit_group);
    app->add_option("--max-connections", http.max_connections, "open client connections; past it new ones are closed")
        ->type_name("UINT")->check(command_line::int_in(1, 1 << 20))->group(limit_group);
    app->add_option("--max-request-bytes", http.max_body_bytes, "bytes of a request body (413 past it); accepts 512K, 32M")
        ->type_name("SIZE")->transform(command_line::byte_size())
        ->check(command_line::int_in(1, std::numeric_limits<int64_t>::max()))->group(limit_group);
    app->add_option("--max-header-bytes", http.max_header_bytes, "bytes of a request line and headers (431 past it)")
        ->type_name("SIZE")->transform(command_line::byte_size())
        ->check(command_line::int_in(1, std::numeric_limits<int64_t>::max()))->group(limit_group);
    app->add_option("--header-timeout", http.header_timeout_s, "seconds from a request's first byte to its whole head (408 past it)")
        ->type_name("SECONDS")->check(command_line::real_above(0))->group(limit_group);
    app->add_option("--body-timeout", http.body_timeout_s, "seconds for a whole request body once its head is in")
        ->type_name("SECONDS")->check(command_line::real_above(0))->group(limit_group);
    app->add_option("--keep-alive-timeout", http.keep_alive_timeout_s, "seconds an idle connection is kept between requests")
        ->type_name("SECONDS")->check(command_line::real_above(0))->group(limit_group);
    app->add_option("--write-timeout", http.write_timeout_s,
                    "seconds a response may wait on a client that reads none of it (the connection is dropped)")
        ->type_name("SECONDS")->check(command_line::real_above(0))->group(limit_group);
    app->add_option("--max-json-depth", limits.max_json_depth, "nesting of arrays and objects in a request body")
        ->type_name("UINT")->check(command_line::int_in(2, 10000))->group(limit_group);
    app->add_option("--max-json-containers", limits.max_json_containers, "arrays and objects in a request body")
        ->type_name("UINT")->check(command_line::int_in(1, 1 << 30))->group(limit_group);
    app->add_option("--max-prompt-bytes", limits.max_prompt_bytes, "bytes of one prompt, checked before it is tokenized")
        ->type_name("SIZE")->transform(command_line::byte_size())
        ->default_str("0 = what max_model_len tokens can hold")->group(limit_group);
    app->add_option("--max-stop", limits.max_stop, "entries of a request's stop list")
        ->type_name("UINT")->check(command_line::int_in(0, 100000))->group(limit_group);
    app->add_option("--max-stop-bytes", limits.max_stop_bytes, "bytes of one stop string")
        ->type_name("UINT")->check(command_line::int_in(1, 1 << 20))->group(limit_group);
    app->add_option("--max-choices", limits.max_choices, "prompts x n in one request")
        ->type_name("UINT")->check(command_line::int_in(1, 1 << 20))->group(limit_group);
    app->add_option("--max-logit-bias", limits.max_logit_bias, "entries of a request's logit_bias (and of stop_token_ids)")
        ->type_name("UINT")->check(command_line::int_in(0, 1 << 20))->group(limit_group);
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;
    if (served_name.empty()) served_name = default_served_name(engine_options.model);

    // Request bodies and prompts of megabytes come and go; under glibc's sliding mmap threshold they
    // end up on the heap and stay resident after they are freed. A fixed threshold maps them, and
    // gives them back when they are freed.
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    raise_descriptor_limit();
    StopSignals signals;  // before the first thread

    if (ssl_certfile.empty() != ssl_keyfile.empty())
        throw BadInput(ssl_certfile.empty() ? "--ssl-keyfile needs --ssl-certfile" : "--ssl-certfile needs --ssl-keyfile");
    for (const std::string* f : {&ssl_certfile, &ssl_keyfile})  // before a model of gigabytes loads
        if (!f->empty() && !std::ifstream(*f))
            throw BadInput(std::string(f == &ssl_certfile ? "--ssl-certfile " : "--ssl-keyfile ") + *f + ": cannot read the file");

    std::shared_ptr<const Model> model = load_model_for(engine_options);
    EngineConfig config = engine_config_from(engine_options, model->config);
    if (config.backend == BackendKind::SIM && config.sim_pace == 0) config.sim_pace = 1;  // clients see GPU pace
    LlmEngine engine(model, config);
    const CacheConfigInfo cache{engine.kv_cache_manager().block_size(), engine.num_blocks(),
                                kv_cache_dtype_name(engine.kv_cache_dtype()), config.scheduler.enable_prefix_caching};
    ServeMetrics metrics(served_name, metrics_prefix, config.scheduler.max_model_len, cache);
    if (engine.is_simulated()) {
        const nlohmann::json sim = simulation_to_json(engine);
        metrics.set_simulation({sim["gpu"], sim["tensor_parallel_size"], sim["step_time_model"], sim["label"]});
        std::fprintf(stderr, "kvscope serve: SIMULATED, not measured: %s (%.0fx real time)\n",
                     engine.simulation_label().c_str(), config.sim_pace);
    }
    EngineLoop loop(engine, metrics);
    HttpFrontend frontend(http);
    if (!ssl_certfile.empty()) frontend.enable_tls(ssl_certfile, ssl_keyfile);
    OpenAiServer api(*model, {served_name, config.scheduler.max_model_len, api_key, limits, enable_prompt_tokens_details}, loop,
                     metrics);
    api.install(frontend);
    frontend.bind(host, port);
    signals.attach(frontend);

    std::fprintf(stderr, "kvscope serve: model %s (%s), max_model_len %d, %d KV blocks of %d tokens, mode %s%s\n",
                 served_name.c_str(), model->format.c_str(), config.scheduler.max_model_len, engine.num_blocks(),
                 engine.kv_cache_manager().block_size(), std::string(to_string(config.mode)).c_str(), api_key.empty() ? "" : ", API key required");
    std::fprintf(stderr, "kvscope serve: listening on %s\n", frontend.url().c_str());
    std::fflush(stderr);
    loop.start();  // from here on only the engine thread touches `engine`
    frontend.run();
    loop.stop();          // aborts what is in flight: every stream gets its end
    frontend.shutdown();  // and every request thread finishes
    signals.release();
    std::fprintf(stderr, "kvscope serve: stopped\n");
    return 0;
}

}  // namespace kvscope::cli
