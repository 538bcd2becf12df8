// kvscope-cli bench: replays a workload (random, shared-prefix, sharegpt) through the engine with
// vLLM's arrival model and reports `vllm bench serve` metrics plus engine figures; --compare naive runs
// it in both modes, --sweep over knob values, all in one process. With --base-url the same workloads go
// to a remote OpenAI-compatible engine instead (remote_bench.cpp).
#include "bench_args.h"
#include "bench_report.h"
#include "commands.h"
#include "engine_options.h"
#include "remote_bench.h"

#include "command_line/command_line.h"
#include "command_line/option_checks.h"

#include "bench/arrivals.h"
#include "bench/bench_runner.h"
#include "bench/sweep.h"
#include "bench/workload.h"
#include "llm_engine.h"
#include "metrics/export.h"
#include "sim/simulation_info.h"
#include "util/errors.h"
#include "util/file_status.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

namespace kvscope::cli {

namespace {

// One --goodput item, vLLM's METRIC:MS, into `slo`.
void add_goodput(const std::string& item, GoodputSlo& slo) {
    const auto colon = item.find(':');
    char* end = nullptr;
    const char* value = colon == std::string::npos ? nullptr : item.c_str() + colon + 1;
    const double ms = value ? std::strtod(value, &end) : -1;
    // "ttft:" parsed as 0 ms (strtod reads nothing and ends at the string's end).
    if (!value || end == value || *end != '\0' || !(ms >= 0) || !std::isfinite(ms))
        throw CLI::ValidationError("'" + item + "' is not METRIC:MS (ttft, tpot, e2el; ms >= 0)");
    const std::string key = item.substr(0, colon);
    if (key == "ttft") slo.ttft_ms = ms;
    else if (key == "tpot") slo.tpot_ms = ms;
    else if (key == "e2el") slo.e2el_ms = ms;
    else throw CLI::ValidationError("unknown metric '" + key + "' (ttft, tpot, e2el)");
}

}  // namespace

// The bench flags, bound to `a` (the engine knobs come from add_engine_options).
void add_bench_options(CLI::App& app, BenchArgs& a) {
    using namespace command_line;
    const std::string workload = "Workload options", run = "Run options", out = "Output options";
    app.add_option("--dataset", a.dataset, "prompts: random tokens, a shared prefix + random suffix, or ShareGPT")
        ->type_name("random|shared-prefix|sharegpt")->group(workload);
    app.add_option("--dataset-path", a.dataset_path, "the ShareGPT JSON file")->type_name("FILE")->group(workload);
    app.add_option("--num-prompts", a.num_prompts, "requests to run")
        ->type_name("UINT")->check(int_in(1))->group(workload);
    app.add_option("--input-len", a.input_len, "prompt tokens (random; shared-prefix: the suffix)")
        ->type_name("UINT")->check(int_in(1))->group(workload);
    // each() runs for given values only: that is how output_len_given learns that the flag was there.
    app.add_option("--output-len", a.output_len, "output tokens (sharegpt: if given, instead of the reply's length)")
        ->type_name("UINT")->check(int_in(1))->each([&a](const std::string&) { a.output_len_given = true; })
        ->group(workload);
    app.add_option("--range-ratio", a.range_ratio, "lengths uniform in [L x (1 - r), L x (1 + r)], r < 1")
        ->type_name("FLOAT")->check(real_in(0, 1))->group(workload);
    app.add_option("--output-range-ratio", a.output_range_ratio, "the output lengths' own r, < 1 (-1 = --range-ratio)")
        ->type_name("FLOAT")->check(real_in(-1, 1))
        ->each([&a](const std::string&) { a.output_range_ratio_given = true; })->group(workload);
    app.add_option("--prefix-len", a.prefix_len, "shared-prefix: tokens of the common prefix")
        ->type_name("UINT")->check(int_in(0))->group(workload);
    app.add_option("--seed", a.seed, "seed of the workload and the arrivals")
        ->type_name("UINT64")->check(any_uint64())->group(workload);

    app.add_option("--request-rate", a.request_rate, "arrivals per second (inf = all at once)")
        ->type_name("FLOAT")->check(real_above(0, true))->group(run);
    app.add_option("--burstiness", a.burstiness, "gamma shape of the arrival gaps (1 = Poisson, < 1 burstier)")
        ->type_name("FLOAT")->check(real_above(0))->group(run);
    app.add_option("--max-concurrency", a.max_concurrency, "requests in flight at most (0 = no cap)")
        ->type_name("UINT")->check(int_in(0))->group(run);
    app.add_option("--num-warmups", a.num_warmups, "requests run first and not counted")
        ->type_name("UINT")->check(int_in(0))->group(run);
    app.add_option("--temperature", a.temperature, "sampling temperature (0 = greedy)")
        ->type_name("FLOAT")->check(real_in(0))->group(run);
    app.add_option("--compare", a.compare, "run the same workload in naive mode too and report the ratios")
        ->type_name("naive")->check(CLI::IsMember({"naive"}).description(""))->group(run);
    app.add_option("--sweep", a.sweep, "one run per value of an engine knob, e.g. max-num-seqs=8,16,32")
        ->type_name("KNOB=V1,V2,...")->group(run);

    app.add_option("--percentiles", a.percentiles, "latency percentiles to report")
        ->type_name("P,P,...")->delimiter(',')->allow_extra_args(false)->check(real_in(0, 100))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->default_str("50,90,99")->group(out);
    app.add_option("--goodput", "SLOs in ms for request_goodput, vLLM's syntax: ttft:500 tpot:50")
        ->option_text("METRIC:MS ...")->expected(1, -1)->allow_extra_args()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->each([&a](const std::string& item) { add_goodput(item, a.goodput); })->group(out);
    app.add_option("--output-json", a.output_json, "write the vLLM-style result JSON here")
        ->type_name("FILE")->group(out);
    app.add_option("--output-csv", a.output_csv, "one CSV row per run")->type_name("FILE")->group(out);
    app.add_option("--output-requests", a.output_requests, "one JSON line per request")
        ->type_name("FILE.jsonl")->group(out);
    app.add_flag("--save-timeline", a.save_timeline, "add every engine step to the JSON")->group(out);
}

WorkloadOptions workload_from(const BenchArgs& a, int max_model_len) {
    WorkloadOptions w;
    w.dataset = a.dataset;
    w.dataset_path = a.dataset_path;
    w.num_prompts = a.num_prompts;
    w.input_len = a.input_len;
    w.output_len = a.output_len;
    w.output_len_fixed = a.output_len_given;
    w.range_ratio = a.range_ratio;
    w.output_range_ratio = a.output_range_ratio;
    w.prefix_len = a.prefix_len;
    w.max_model_len = max_model_len;
    w.seed = a.seed;
    return w;
}

BenchOptions options_from(const BenchArgs& a, size_t num_requests) {
    BenchOptions o;
    o.seed = a.seed;
    o.arrival_offsets = arrival_offsets(static_cast<int>(num_requests), a.request_rate, a.burstiness, o.seed);
    o.max_concurrency = a.max_concurrency;
    o.num_warmups = a.num_warmups;
    o.temperature = a.temperature;
    o.percentiles = a.percentiles;
    o.goodput = a.goodput;
    return o;
}

nlohmann::json bench_metadata(const BenchArgs& a, const BenchOptions& o) {
    nlohmann::json m;
    m["date"] = result_date();
    m["num_prompts"] = a.num_prompts;
    m["request_rate"] = std::isinf(a.request_rate) ? nlohmann::json("inf") : nlohmann::json(a.request_rate);
    m["burstiness"] = a.burstiness;
    m["max_concurrency"] = o.max_concurrency > 0 ? nlohmann::json(o.max_concurrency) : nlohmann::json(nullptr);
    m["dataset_name"] = a.dataset;
    m["workload"] = {{"dataset_path", a.dataset_path}, {"input_len", a.input_len},
                     {"output_len", a.output_len}, {"range_ratio", a.range_ratio},
                     {"output_range_ratio", a.output_range_ratio_given ? a.output_range_ratio : a.range_ratio},
                     {"prefix_len", a.prefix_len}, {"num_warmups", o.num_warmups},
                     {"temperature", o.temperature}, {"percentiles", o.percentiles}};
    m["goodput_slo_ms"] = {{"ttft", o.goodput.ttft_ms.value_or(-1)}, {"tpot", o.goodput.tpot_ms.value_or(-1)},
                           {"e2el", o.goodput.e2el_ms.value_or(-1)}};
    m["seed"] = o.seed;
    m["git_revision"] = git_revision();
    m["kvscope_version"] = kvscope_version();
    m["metric_definitions"] = metric_definitions();
    return m;
}

namespace {

nlohmann::json metadata(const BenchArgs& a, const Model& model, LlmEngine& engine, const BenchOptions& o) {
    nlohmann::json m = bench_metadata(a, o);
    m["endpoint_type"] = "kvscope";
    m["backend"] = "kvscope-" + engine.backend().name();
    m["model_id"] = model.source;
    m["tokenizer_id"] = model.source;
    m["machine"] = machine_info(engine.backend().num_threads());
    if (engine.is_simulated()) m["simulated"] = simulation_to_json(engine);
    return m;
}

ResultRun result_run(const BenchRun& r) { return {r.label, engine_config_to_json(r.config), r.summary, r.engine}; }

// KV usage over time, at most ~100 evenly spaced steps: [seconds since the start, usage, running].
nlohmann::json kv_usage_series(const BenchRun& r) {
    nlohmann::json series = nlohmann::json::array();
    const size_t stride = std::max<size_t>(1, r.steps.size() / 100);
    for (size_t i = 0; i < r.steps.size(); i += stride)
        series.push_back({r.steps[i].start_time - r.start_time, r.steps[i].kv_usage, r.steps[i].num_running});
    return series;
}

}  // namespace

nlohmann::json run_json(const BenchRun& r, bool timeline) {
    nlohmann::json j = run_to_json(result_run(r));
    j["start_time"] = r.start_time;
    j["kv_usage_over_time"] = kv_usage_series(r);
    if (timeline) {
        j["timeline"] = nlohmann::json::array();
        for (const StepStats& s : r.steps) j["timeline"].push_back(step_stats_to_json(s));
    }
    return j;
}

namespace {

// --compare naive: the same workload in naive mode, then paged; both results and the ratios.
void run_compare(LlmEngine& engine, const std::vector<BenchRequest>& workload, BenchOptions options,
                 const EngineConfig& config, bool timeline, nlohmann::json& result, std::vector<BenchRun>& runs) {
    for (const char* mode : {"naive", "paged"}) {
        options.progress = make_progress(mode);
        BenchRunner runner(engine, workload, options);
        EngineConfig c = config;
        c.mode = parse_batching_mode(mode);
        runs.push_back(runner.run_with(c, mode));
        print_result_table(runs.back(), engine.simulation_label());
        result[mode] = run_json(runs.back(), timeline);
    }
    const nlohmann::json ratios = compare_ratios(runs[0].summary, runs[1].summary);
    print_ratios(ratios);
    result.update(ratios);
}

// --sweep KNOB=V1,V2,...: one run per value, reconfiguring the same engine between runs.
void run_sweep(LlmEngine& engine, const std::vector<BenchRequest>& workload, BenchOptions options,
               const EngineConfig& config, const SweepSpec& sweep, bool timeline, nlohmann::json& result,
               std::vector<BenchRun>& runs) {
    result["sweep_knob"] = sweep.knob;
    result["sweep"] = nlohmann::json::array();
    for (const auto& v : sweep.values) {
        const std::string label = sweep.knob + "=" + v;
        options.progress = make_progress(label);
        BenchRunner runner(engine, workload, options);
        runs.push_back(runner.run_with(apply_knob(config, sweep.knob, v), label));
        print_result_table(runs.back(), engine.simulation_label());
        nlohmann::json row = run_json(runs.back(), timeline);
        row["sweep_value"] = v;
        result["sweep"].push_back(row);
    }
    print_sweep_table(sweep.knob, sweep.values, runs, /*local_engine=*/true);
}

void run_single(LlmEngine& engine, const std::vector<BenchRequest>& workload, BenchOptions options,
                const EngineConfig& config, bool timeline, nlohmann::json& result, std::vector<BenchRun>& runs) {
    const std::string mode(to_string(config.mode));
    options.progress = make_progress(mode);
    BenchRunner runner(engine, workload, options);
    runs.push_back(runner.run(mode));
    print_result_table(runs.back(), engine.simulation_label());
    result.update(run_json(runs.back(), timeline));
}

}  // namespace

void write_outputs(const BenchArgs& a, const nlohmann::json& result, const std::vector<const BenchRun*>& runs,
                   bool local_engine) {
    if (!a.output_json.empty()) write_json(a.output_json, result);
    if (!a.output_csv.empty()) {
        std::vector<ResultRun> rows;
        for (const BenchRun* r : runs) {
            rows.push_back(result_run(*r));
            rows.back().local_engine = local_engine;
        }
        write_csv(a.output_csv, rows);
    }
    if (!a.output_requests.empty()) {
        std::ofstream out = open_output(a.output_requests);
        for (const BenchRun* r : runs) write_requests_jsonl(out, r->requests, r->submit_times, r->errors, r->label);
        close_output(out, a.output_requests);
    }
}

// Checks that every output path can be written before minutes of benchmarking.
void check_outputs(const BenchArgs& a) {
    const std::pair<const char*, const std::string*> outputs[] = {
        {"--output-json", &a.output_json}, {"--output-csv", &a.output_csv}, {"--output-requests", &a.output_requests}};
    // The second would replace the first. Compared as the paths they resolve to: "a.json" and "./a.json" are one.
    // Made absolute first: libstdc++ 12 leaves "same.json" relative when nothing of it exists yet, where it
    // makes "./same.json" absolute.
    const auto resolved = [](const std::string& p) {
        std::error_code ec;
        const std::filesystem::path absolute = std::filesystem::absolute(p, ec);
        const std::filesystem::path r = std::filesystem::weakly_canonical(absolute, ec);
        return ec ? absolute.lexically_normal() : r;
    };
    for (size_t i = 0; i < std::size(outputs); ++i)
        for (size_t j = i + 1; j < std::size(outputs); ++j)
            if (!outputs[i].second->empty() && !outputs[j].second->empty() &&
                resolved(*outputs[i].second) == resolved(*outputs[j].second))
                throw BadInput(std::string(outputs[i].first) + " and " + outputs[j].first + " name the same file " +
                               *outputs[i].second);
    for (const auto& [flag, path] : outputs)
        if (!path->empty()) {
            // Probed by opening it; a file the probe made is removed again, so that a run that fails or is
            // interrupted before its report leaves no empty result behind.
            const bool existed = checked_exists(*path);
            std::ofstream probe(*path, std::ios::app);
            if (!probe) throw BadInput(std::string(flag) + ": cannot write " + *path);
            probe.close();
            if (!existed) std::filesystem::remove(*path);
        }
}

namespace {

// The first option of `group` given on the command line, other than those named in `except` (long
// names); nullptr when none was: a run refuses the options it would otherwise ignore.
const CLI::Option* first_given(const CLI::App& app, const std::string& group, std::initializer_list<const char*> except = {}) {
    for (const CLI::Option* opt : app.get_options())
        if (opt->get_group() == group && opt->count() > 0 &&
            std::none_of(except.begin(), except.end(), [&](const char* name) { return opt->check_lname(name); }))
            return opt;
    return nullptr;
}

}  // namespace

int run_bench(int argc, char** argv) {
    auto app = command_line::make_app("kvscope-cli bench",
                                      "Replays a benchmark workload through the engine with vLLM's arrival model and "
                                      "reports `vllm bench serve` metrics.");
    EngineOptions engine_options;
    add_engine_options(*app, engine_options);
    BenchArgs args;
    add_bench_options(*app, args);
    RemoteArgs remote;
    add_remote_options(*app, remote);
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;
    if (!args.dataset_path.empty() && args.dataset != "sharegpt")
        throw BadInput("--dataset-path is read by --dataset sharegpt only (this run's dataset is " + args.dataset + ")");
    // --base-url picks the remote target; --backend then names its API (openai, openai-chat) instead of
    // the local engine's compute backend.
    if (!remote.base_url.empty()) {
        // The engine's knobs are the server's: one given here would be ignored without a word.
        if (const CLI::Option* opt = first_given(*app, kEngineOptionsGroup, {"model", "backend", "max-model-len"}))
            throw BadInput(opt->get_name(false, true) + " sets the local engine; with --base-url the server's own "
                           "settings apply (only --model, --backend and --max-model-len are read)");
        if (args.save_timeline) throw BadInput("--save-timeline records the local engine's steps; a remote server has none");
        return run_remote_bench_command(args, remote, engine_options, app->count("--backend") > 0);
    }
    if (engine_options.backend.starts_with("openai"))
        throw BadInput("--backend " + engine_options.backend + " drives a remote engine: give --base-url URL");
    // And the remote target's options mean nothing to the local engine: refused, not ignored.
    if (const CLI::Option* opt = first_given(*app, kRemoteOptionsGroup))
        throw BadInput(opt->get_name(false, true) + " is for a remote target: give --base-url URL (the local engine "
                       "uses the model's own tokenizer and has no endpoint)");

    const std::optional<SweepSpec> sweep = args.sweep.empty() ? std::nullopt : std::optional(parse_sweep(args.sweep));
    if (sweep && !args.compare.empty()) throw BadInput("--sweep and --compare cannot be combined");
    if (!args.compare.empty() && engine_options.mode == "naive")  // it runs both modes
        throw BadInput("--compare naive runs the workload in paged and naive mode; --mode naive has no place beside it");
    check_outputs(args);

    std::shared_ptr<const Model> model = load_model_for(engine_options);
    const EngineConfig config = engine_config_from(engine_options, model->config);
    if (sweep)  // every value checked before anything runs (no sweep knob changes max_model_len)
        for (const auto& v : sweep->values) (void)apply_knob(config, sweep->knob, v);
    const WorkloadOptions wopts = workload_from(args, config.scheduler.max_model_len);
    check_workload_options(wopts);  // first: check_prompts_fit reads the lengths
    check_prompts_fit(wopts, config.scheduler.max_model_len);
    std::vector<BenchRequest> workload = make_workload(wopts, model->tokenizer, model->config.vocab_size);
    BenchOptions options = options_from(args, workload.size());
    if (!args.compare.empty() &&
        std::find(options.percentiles.begin(), options.percentiles.end(), 99.0) == options.percentiles.end())
        options.percentiles.push_back(99);  // ratio_p99_ttft needs it
    LlmEngine engine(model, config);
    nlohmann::json result = metadata(args, *model, engine, options);
    const bool timeline = args.save_timeline;
    std::vector<BenchRun> runs;

    if (!args.compare.empty()) run_compare(engine, workload, options, config, timeline, result, runs);
    else if (sweep) run_sweep(engine, workload, options, config, *sweep, timeline, result, runs);
    else run_single(engine, workload, options, config, timeline, result, runs);
    std::vector<const BenchRun*> ptrs;
    for (const BenchRun& r : runs) ptrs.push_back(&r);
    write_outputs(args, result, ptrs);
    return 0;
}

}  // namespace kvscope::cli
