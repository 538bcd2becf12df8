#include "remote_bench.h"

#include "bench_report.h"
#include "command_line/option_checks.h"

#include "bench/arrivals.h"
#include "metrics/export.h"
#include "model/tokenizer_files.h"
#include "remote/metrics_scraper.h"
#include "remote/remote_bench_target.h"
#include "remote/remote_server.h"
#include "util/errors.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace kvscope::cli {

void add_remote_options(CLI::App& app, RemoteArgs& r) {
    using namespace command_line;
    const std::string group = kRemoteOptionsGroup;
    app.add_option("--base-url", r.base_url,
                   "benchmark a remote OpenAI-compatible engine at this URL instead of the local engine "
                   "(--model is then its served model name, --backend openai|openai-chat)")
        ->type_name("URL")->group(group)
        // Given but empty (an unset $URL in a script) would benchmark the local engine instead, and say nothing.
        ->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("empty: give the server's URL") : std::string(); },
                               "", "not empty"));
    app.add_option("--endpoint", r.endpoint, "the API path (default: the --backend API's)")
        ->type_name("/v1/completions|/v1/chat/completions")->group(group);
    app.add_option("--tokenizer", r.tokenizer,
                   "a local tokenizer for exact prompts: Hugging Face directory or tokenizer.json, .gguf, dummy:PRESET "
                   "(default: the server's /tokenize)")
        ->type_name("DIR|FILE")->group(group);
    app.add_option("--api-key", r.api_key, "sent as 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY); never exported")
        ->type_name("KEY")->group(group);
    app.add_option("--metrics-interval", r.metrics_interval, "seconds between scrapes of the server's /metrics")
        ->type_name("SECONDS")->check(real_in(0.05, 3600))->group(group);
    app.add_option("--request-timeout", r.request_timeout,
                   "seconds without a byte from the server after which a request fails")
        ->type_name("SECONDS")->check(real_in(0.5, 86400))->group(group);
    app.add_option("--cacert", r.cacert,
                   "https: verify the server against this PEM CA bundle instead of the system's (curl's --cacert)")
        ->type_name("FILE")->check(CLI::ExistingFile)->group(group);
    app.add_flag("--insecure", r.insecure, "https: do not verify the server's certificate or name (curl's --insecure)")
        ->group(group);
}

namespace {

// A remote run as exported: the section 3 keys under mode "remote", none of the local engine's
// config or figures (the engine's knobs are the server's).
ResultRun remote_result_run(const BenchRun& r) {
    ResultRun x{r.label, nlohmann::json::object(), r.summary, {}};
    x.local_engine = false;
    return x;
}

// How many completed requests got exactly the output length asked for: whether the server honoured
// ignore_eos / min_tokens (a server that ignores both stops at its EOS, earlier).
int exact_output_lengths(const BenchRun& r, const std::vector<BenchRequest>& workload) {
    int exact = 0;
    for (size_t i = 0; i < r.requests.size() && i < workload.size(); ++i)
        if (r.errors.size() > i && r.errors[i].empty() && r.requests[i].num_output_tokens == workload[i].output_len)
            ++exact;
    return exact;
}

// The output tokens the completed requests asked for.
long long asked_output_tokens(const BenchRun& r, const std::vector<BenchRequest>& workload) {
    long long asked = 0;
    for (size_t i = 0; i < r.requests.size() && i < workload.size(); ++i)
        if (r.errors.size() > i && r.errors[i].empty()) asked += workload[i].output_len;
    return asked;
}

// --sweep for a remote target: request-rate or max-concurrency (the engine's knobs are the server's).
struct RemoteSweep {
    std::string knob;
    std::vector<std::string> values;
};

RemoteSweep parse_remote_sweep(const std::string& text) {
    RemoteSweep s;
    const size_t eq = text.find('=');
    s.knob = text.substr(0, eq);
    if (eq == std::string::npos || (s.knob != "request-rate" && s.knob != "max-concurrency"))
        throw BadInput("--sweep '" + text + "': a remote target sweeps request-rate=R1,R2,... or max-concurrency=C1,C2,...");
    for (size_t i = eq + 1; i <= text.size();) {
        const size_t comma = std::min(text.find(',', i), text.size());
        const std::string v = text.substr(i, comma - i);
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        const bool ok = !v.empty() && end && *end == '\0' &&
                        (s.knob == "request-rate" ? (x > 0 || v == "inf") : (x >= 0 && x == std::floor(x)));
        if (!ok) throw BadInput("--sweep " + s.knob + ": '" + v + "' is not a valid value");
        s.values.push_back(v);
        i = comma + 1;
    }
    return s;
}

struct Target {
    OpenAiApi api;
    std::string path;
};

Target resolve_target(const RemoteArgs& r, const EngineOptions& e, bool backend_given) {
    if (backend_given && e.backend != "openai" && e.backend != "openai-chat")
        throw BadInput("--backend " + e.backend + " runs the local engine; with --base-url use --backend openai or openai-chat");
    Target t;
    if (backend_given) t.api = openai_api_of_backend(e.backend);
    else t.api = r.endpoint.empty() ? OpenAiApi::COMPLETIONS : openai_api_of_endpoint(r.endpoint);
    t.path = r.endpoint.empty() ? default_endpoint(t.api) : r.endpoint;
    if (!t.path.starts_with("/")) throw BadInput("--endpoint '" + t.path + "' must start with '/'");
    // A path of the other API would fail every request ("messages is required"): refused before any is sent.
    for (OpenAiApi api : {OpenAiApi::COMPLETIONS, OpenAiApi::CHAT})
        if (api != t.api && t.path == default_endpoint(api))
            throw BadInput("--endpoint " + t.path + " is the " + (api == OpenAiApi::CHAT ? "chat" : "completions") +
                           " API, but --backend " + e.backend + " sends " +
                           (t.api == OpenAiApi::CHAT ? "chat messages (--backend openai-chat)" : "prompts (--backend openai)"));
    return t;
}

void print_server_series(const ServerSeries& s, const std::string& metrics_url) {
    double peak = -1;
    for (const ServerSample& x : s.samples)
        if (x.kv_cache_usage) peak = std::max(peak, *x.kv_cache_usage);
    std::printf("Server metrics (%s): %zu samples every %.2f s, %d failed scrapes", std::string(to_string(s.engine)).c_str(),
                s.samples.size(), s.interval_s, s.num_failed_scrapes);
    if (peak >= 0) std::printf(", KV usage peak %.1f%%", 100 * peak);
    std::printf("\n");
    if (!s.last_error.empty()) std::printf("  last scrape error: %s: %s\n", metrics_url.c_str(), s.last_error.c_str());
    std::fflush(stdout);
}

}  // namespace

int run_remote_bench_command(const BenchArgs& a, const RemoteArgs& r, const EngineOptions& e, bool backend_given) {
    if (!a.compare.empty()) throw BadInput("--compare naive compares the local engine's modes; it has no meaning with --base-url");
    check_base_url(r.base_url, "--base-url ");
    const Target target = resolve_target(r, e, backend_given);
    const std::optional<RemoteSweep> sweep = a.sweep.empty() ? std::nullopt : std::optional(parse_remote_sweep(a.sweep));
    check_outputs(a);

    HttpEndpoint endpoint;
    endpoint.base_url = r.base_url;
    endpoint.api_key = r.api_key;
    if (endpoint.api_key.empty())
        if (const char* key = std::getenv("OPENAI_API_KEY")) endpoint.api_key = key;
    endpoint.request_timeout_s = r.request_timeout;
    endpoint.ca_file = r.cacert;
    endpoint.insecure = r.insecure;
    HttpClient client(endpoint);
    // Reachable, the key accepted, the URL without an extra path, and the model served: checked before
    // anything else, by the same call as the GUI's Connect.
    check_served_model(client, e.model);
    const ServerEngine engine = detect_remote_engine(client);

    // Prompts: token ids for completions (exact input lengths), text for chat.
    const WorkloadOptions wopts = workload_from(a, e.max_model_len > 0 ? e.max_model_len : 8192);
    std::vector<BenchRequest> workload;
    RemoteTargetOptions topts;
    topts.endpoint = endpoint;
    topts.path = target.path;
    topts.api = target.api;
    topts.model = e.model;
    topts.min_tokens = engine_takes_min_tokens(engine);
    if (!r.tokenizer.empty()) {
        const Tokenizer tok = load_tokenizer(r.tokenizer);
        workload = make_workload(wopts, tok, tok.vocab_size());
        if (target.api == OpenAiApi::CHAT)
            for (const BenchRequest& q : workload) topts.prompt_texts.emplace(q.prompt_token_ids, tok.decode(q.prompt_token_ids));
    } else {
        if (a.dataset == "sharegpt") throw BadInput("--dataset sharegpt with --base-url needs --tokenizer DIR|FILE");
        ServerTokenizer tok(client, e.model);
        workload = make_workload(wopts, server_vocabulary_sample(tok));
        if (target.api == OpenAiApi::CHAT)
            for (const BenchRequest& q : workload)
                if (!topts.prompt_texts.count(q.prompt_token_ids))
                    topts.prompt_texts.emplace(q.prompt_token_ids, tok.detokenize(q.prompt_token_ids));
    }
    const BenchOptions base_options = options_from(a, workload.size());

    nlohmann::json result = bench_metadata(a, base_options);
    const std::string backend = target.api == OpenAiApi::CHAT ? "openai-chat" : "openai";
    result["endpoint_type"] = backend;
    result["backend"] = backend;
    result["model_id"] = e.model;
    result["tokenizer_id"] = r.tokenizer.empty() ? "server:/tokenize" : r.tokenizer;
    result["target"] = {{"kind", "remote"}, {"base_url", redacted_url(r.base_url)}, {"endpoint", target.path},
                        {"engine", std::string(to_string(engine))}};
    if (r.base_url.starts_with("https://"))  // whether the server's certificate was checked, and against what
        result["target"]["tls"] = r.insecure ? "not verified (--insecure)"
                                             : r.cacert.empty() ? "verified (system CA store)" : "verified (--cacert)";
    result["output_length_control"] = topts.min_tokens ? kOutputLengthControlMinTokens : kOutputLengthControl;
    result["machine"] = machine_info(static_cast<int>(std::thread::hardware_concurrency()));

    RemoteBenchTarget remote(topts);
    // As vLLM's bench serve: one request of the workload first, so that a workload the server refuses
    // fails at once with the server's reason, not after every request of it has failed.
    {
        BenchRequest first = workload.front();
        first.output_len = std::min(first.output_len, 4);
        BenchOptions probe;
        probe.num_warmups = 0;
        probe.temperature = base_options.temperature;
        const BenchRun check = kvscope::run_remote_bench(remote, {first}, probe, "test", "test-request-");
        if (!check.errors.empty() && !check.errors.front().empty())
            throw BadInput("the test request (the workload's first prompt) failed, so the benchmark did not start: " +
                           check.errors.front());
    }
    std::vector<BenchRun> runs;
    std::vector<nlohmann::json> sections;
    const std::vector<std::string> values = sweep ? sweep->values : std::vector<std::string>{""};
    for (size_t k = 0; k < values.size(); ++k) {
        BenchOptions o = base_options;
        BenchArgs args = a;
        std::string label = "remote";
        if (sweep) {
            label = sweep->knob + "=" + values[k];
            if (sweep->knob == "request-rate") args.request_rate = values[k] == "inf" ? INFINITY : std::stod(values[k]);
            else args.max_concurrency = std::stoi(values[k]);
            o = options_from(args, workload.size());
        }
        o.progress = make_progress(label);
        MetricsScraper scraper(endpoint, r.metrics_interval, [&remote] { return remote.now(); });
        const long connections_before = remote.connections_opened();
        runs.push_back(kvscope::run_remote_bench(remote, workload, o, label, "remote-" + std::to_string(k) + "-"));
        scraper.stop();
        ServerSeries series = scraper.series();
        // A /metrics page that never came tells nothing of the engine: the one /version or /v1/models named.
        if (series.engine == ServerEngine::UNKNOWN) series.engine = engine;
        print_result_table(runs.back());
        print_server_series(series, redacted_url(endpoint.url("/metrics")));
        nlohmann::json j = run_to_json(remote_result_run(runs.back()));  // mode "remote", no engine figures
        j["start_time"] = runs.back().start_time;
        j["output_lengths_exact"] = exact_output_lengths(runs.back(), workload);
        if (const int exact = j["output_lengths_exact"]; exact < runs.back().summary.completed)
            std::fprintf(stderr,
                         "kvscope-cli bench: %s: %d of %d completed requests did not get the output length asked for (%lld tokens "
                         "generated of %lld): the server stopped them early (its context length, or an EOS where it "
                         "ignores ignore_eos); output throughput counts what was generated\n",
                         label.c_str(), runs.back().summary.completed - exact, runs.back().summary.completed,
                         static_cast<long long>(runs.back().summary.total_output_tokens),
                         static_cast<long long>(asked_output_tokens(runs.back(), workload)));
        j["server_metrics"] = server_series_to_json(series, runs.back().start_time);
        j["connections_opened"] = remote.connections_opened() - connections_before;  // warm-up included
        if (sweep) {
            j["sweep_value"] = values[k];
            j[sweep->knob == "request-rate" ? "request_rate" : "max_concurrency"] =
                sweep->knob == "request-rate" ? (std::isinf(args.request_rate) ? nlohmann::json("inf") : nlohmann::json(args.request_rate))
                                              : nlohmann::json(args.max_concurrency);
        }
        sections.push_back(std::move(j));
    }
    if (sweep) {
        result["sweep_knob"] = sweep->knob;
        result["sweep"] = sections;
        print_sweep_table(sweep->knob, values, runs, /*local_engine=*/false);
    } else {
        result.update(sections.front());
    }

    int completed = 0;  // the failures' reasons were printed with each run's table
    for (const BenchRun& run : runs) completed += run.summary.completed;
    std::vector<const BenchRun*> ptrs;
    for (const BenchRun& run : runs) ptrs.push_back(&run);
    write_outputs(a, result, ptrs, /*local_engine=*/false);
    return completed > 0 ? 0 : 1;
}

}  // namespace kvscope::cli
