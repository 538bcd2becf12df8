// kvscope-cli bench --base-url URL: the bench workloads, arrivals, sweeps, goodput and exports against a
// remote OpenAI-compatible engine (engine/remote), with its /metrics scraped into server-side series.
#pragma once

#include "bench_args.h"
#include "engine_options.h"

#include <CLI/CLI.hpp>

#include <string>

namespace kvscope::cli {

struct RemoteArgs {
    std::string base_url;   // --base-url: picks the remote target
    std::string endpoint;   // --endpoint; "" = the --backend API's path
    std::string tokenizer;  // --tokenizer DIR|FILE; "" = the server's /tokenize
    std::string api_key;    // --api-key; "" = $OPENAI_API_KEY
    double metrics_interval = 1.0;
    double request_timeout = 600;
    std::string cacert;     // --cacert FILE: the CA bundle that verifies an https server
    bool insecure = false;  // --insecure: no certificate or host name check
};

// The help group of the options add_remote_options adds: without --base-url each is refused.
inline constexpr const char* kRemoteOptionsGroup = "Remote target options";
// Adds --base-url, --endpoint, --tokenizer, --api-key, --metrics-interval, --request-timeout, --cacert,
// --insecure.
void add_remote_options(CLI::App& app, RemoteArgs& r);

// Runs the benchmark against r.base_url. engine.model is the served model name; engine.backend (when
// backend_given) is openai or openai-chat. Returns the exit code (1 when no request completed);
// throws BadInput for bad flags, an unusable tokenizer or an unwritable output.
int run_remote_bench_command(const BenchArgs& a, const RemoteArgs& r, const EngineOptions& engine, bool backend_given);

}  // namespace kvscope::cli
