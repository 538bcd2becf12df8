// kvscope-cli serve: an OpenAI-compatible HTTP server over the continuous-batching engine. Threads: the
// main thread accepts connections, one thread per connection parses and answers, and one engine
// thread owns the LlmEngine (EngineLoop). SIGINT/SIGTERM stop it: no new connections, open ones are
// closed and their requests aborted, then the engine thread joins.
#include "commands.h"
#include "engine_options.h"
#include "http_server.h"
#include "openai_server.h"
#include "serve_engine_loop.h"
#include "serve_metrics.h"

#include "command_line/command_line.h"
#include "command_line/option_checks.h"
#include "llm_engine.h"

#include <atomic>
#include <csignal>
#include <cstdio>

namespace kvscope::cli {

namespace {

std::atomic<HttpServer*> g_server{nullptr};

extern "C" void on_stop_signal(int) {
    if (HttpServer* server = g_server.load()) server->request_stop();
}

// Installs the SIGINT/SIGTERM handlers for the server's lifetime; a second signal kills the process
// (SA_RESETHAND), in case shutting down ever hangs.
class StopSignals {
public:
    explicit StopSignals(HttpServer& server) {
        g_server = &server;
        struct sigaction sa {};
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(SIGINT, &sa, &old_int_);
        sigaction(SIGTERM, &sa, &old_term_);
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        sigemptyset(&ignore.sa_mask);
        sigaction(SIGPIPE, &ignore, &old_pipe_);
    }
    ~StopSignals() {
        sigaction(SIGINT, &old_int_, nullptr);
        sigaction(SIGTERM, &old_term_, nullptr);
        sigaction(SIGPIPE, &old_pipe_, nullptr);
        g_server = nullptr;
    }

private:
    struct sigaction old_int_ {}, old_term_ {}, old_pipe_ {};
};

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
    app->add_option("--host", host, "address to listen on")->type_name("HOST");
    app->add_option("--port", port, "TCP port (0 = any free port)")
        ->type_name("PORT")->check(command_line::int_in(0, 65535));
    app->add_option("--served-model-name", served_name, "the model's name in the API")
        ->type_name("NAME")->default_str("the --model value");
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;
    if (served_name.empty()) served_name = engine_options.model;

    std::shared_ptr<const Model> model = load_model(engine_options.model);
    const EngineConfig config = engine_config_from(engine_options, model->config);
    LlmEngine engine(model, config);
    ServeMetrics metrics(served_name);
    EngineLoop loop(engine, metrics);
    OpenAiServer api(*model, served_name, config.scheduler.max_model_len, loop, metrics);
    HttpServer server(host, static_cast<int>(port), HttpLimits{},
                      [&api](const HttpRequest& request, HttpConnection& conn) { api.handle(request, conn); });

    StopSignals signals(server);
    std::fprintf(stderr, "kvscope serve: model %s (%s), max_model_len %d, %d KV blocks of %d tokens, mode %s\n",
                 served_name.c_str(), model->format.c_str(), config.scheduler.max_model_len, engine.num_blocks(),
                 engine.kv_cache_manager().block_size(), config.mode.c_str());
    std::fprintf(stderr, "kvscope serve: listening on %s\n", server.url().c_str());
    std::fflush(stderr);
    loop.start();  // from here on only the engine thread touches `engine`
    server.run();
    loop.stop();
    std::fprintf(stderr, "kvscope serve: stopped\n");
    return 0;
}

}  // namespace kvscope::cli
