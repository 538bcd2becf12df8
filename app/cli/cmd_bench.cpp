// kvscope-cli bench: replays a workload (random, shared-prefix, sharegpt) through the engine with
// vLLM's arrival model and reports `vllm bench serve` metrics plus engine figures; --compare naive runs
// it in both modes, --sweep over knob values, all in one process.
#include "args.h"
#include "bench_report.h"
#include "commands.h"
#include "engine_options.h"

#include "bench/arrivals.h"
#include "bench/bench_runner.h"
#include "bench/sweep.h"
#include "bench/workload.h"
#include "llm_engine.h"
#include "metrics/export.h"
#include "util/errors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kvscope::cli {

namespace {

std::set<std::string> bench_value_flags() {
    auto f = engine_value_flags();
    f.insert({"--dataset", "--dataset-path", "--num-prompts", "--input-len", "--output-len", "--range-ratio",
              "--output-range-ratio",
              "--prefix-len", "--request-rate", "--burstiness", "--max-concurrency", "--seed", "--compare",
              "--percentiles", "--goodput", "--sweep", "--num-warmups", "--temperature", "--output-json",
              "--output-csv", "--output-requests"});
    return f;
}

std::set<std::string> bench_switch_flags() {
    auto f = engine_switch_flags();
    f.insert("--save-timeline");
    return f;
}

std::vector<double> parse_percentiles(const std::string& text) {
    std::vector<double> out;
    std::stringstream in(text);
    for (std::string v; std::getline(in, v, ',');) {
        char* end = nullptr;
        const double p = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !(p >= 0 && p <= 100))
            throw BadInput("--percentiles: '" + v + "' is not a percentile in [0, 100]");
        out.push_back(p);
    }
    if (out.empty()) throw BadInput("--percentiles: no values");
    return out;
}

// vLLM's --goodput KEY:MS ...: values after the flag arrive as positional arguments.
GoodputSlo parse_goodput(const Args& args) {
    std::vector<std::string> items = args.all("--goodput");
    if (items.empty() && !args.positional().empty())
        throw BadInput("unexpected argument '" + args.positional().front() + "'");
    items.insert(items.end(), args.positional().begin(), args.positional().end());
    GoodputSlo slo;
    for (const std::string& item : items) {
        const auto colon = item.find(':');
        char* end = nullptr;
        const double ms = colon == std::string::npos ? -1 : std::strtod(item.c_str() + colon + 1, &end);
        if (colon == std::string::npos || !end || *end != '\0' || !(ms >= 0))
            throw BadInput("--goodput: '" + item + "' is not METRIC:MS (ttft, tpot, e2el; ms >= 0)");
        const std::string key = item.substr(0, colon);
        if (key == "ttft") slo.ttft_ms = ms;
        else if (key == "tpot") slo.tpot_ms = ms;
        else if (key == "e2el") slo.e2el_ms = ms;
        else throw BadInput("--goodput: unknown metric '" + key + "' (ttft, tpot, e2el)");
    }
    return slo;
}

WorkloadOptions workload_from(const Args& args, int max_model_len) {
    WorkloadOptions w;
    w.dataset = args.get_or("--dataset", "random");
    w.dataset_path = args.get_or("--dataset-path", "");
    w.num_prompts = static_cast<int>(args.get_int("--num-prompts", 100));
    w.input_len = static_cast<int>(args.get_int("--input-len", 1024));
    w.output_len = static_cast<int>(args.get_int("--output-len", 128));
    w.output_len_fixed = args.has("--output-len");
    w.range_ratio = args.get_double("--range-ratio", 0.0);
    w.output_range_ratio = args.get_double("--output-range-ratio", -1.0);
    w.prefix_len = static_cast<int>(args.get_int("--prefix-len", 0));
    w.max_model_len = max_model_len;
    w.seed = static_cast<uint64_t>(args.get_int("--seed", 0));
    return w;
}

BenchOptions options_from(const Args& args, size_t num_requests) {
    BenchOptions o;
    const double rate = args.get_double("--request-rate", INFINITY);
    if (!(rate > 0)) throw BadInput("--request-rate must be > 0 or inf");
    o.seed = static_cast<uint64_t>(args.get_int("--seed", 0));
    o.arrival_offsets = arrival_offsets(static_cast<int>(num_requests), rate, args.get_double("--burstiness", 1.0), o.seed);
    o.max_concurrency = static_cast<int>(args.get_int("--max-concurrency", 0));
    o.num_warmups = static_cast<int>(args.get_int("--num-warmups", 1));
    o.temperature = static_cast<float>(args.get_double("--temperature", 0.0));
    o.percentiles = parse_percentiles(args.get_or("--percentiles", "50,90,99"));
    o.goodput = parse_goodput(args);
    return o;
}

nlohmann::json metadata(const Args& args, const Model& model, LlmEngine& engine, const BenchOptions& o) {
    const double rate = args.get_double("--request-rate", INFINITY);
    nlohmann::json m;
    m["date"] = result_date();
    m["endpoint_type"] = "kvscope";
    m["backend"] = "kvscope-" + engine.backend().name();
    m["model_id"] = model.source;
    m["tokenizer_id"] = model.source;
    m["num_prompts"] = args.get_int("--num-prompts", 100);
    m["request_rate"] = std::isinf(rate) ? nlohmann::json("inf") : nlohmann::json(rate);
    m["burstiness"] = args.get_double("--burstiness", 1.0);
    m["max_concurrency"] = o.max_concurrency > 0 ? nlohmann::json(o.max_concurrency) : nlohmann::json(nullptr);
    m["dataset_name"] = args.get_or("--dataset", "random");
    m["workload"] = {{"dataset_path", args.get_or("--dataset-path", "")}, {"input_len", args.get_int("--input-len", 1024)},
                     {"output_len", args.get_int("--output-len", 128)}, {"range_ratio", args.get_double("--range-ratio", 0)},
                     {"output_range_ratio", args.get_double("--output-range-ratio", args.get_double("--range-ratio", 0))},
                     {"prefix_len", args.get_int("--prefix-len", 0)}, {"num_warmups", o.num_warmups},
                     {"temperature", o.temperature}, {"percentiles", o.percentiles}};
    m["goodput_slo_ms"] = {{"ttft", o.goodput.ttft_ms.value_or(-1)}, {"tpot", o.goodput.tpot_ms.value_or(-1)},
                           {"e2el", o.goodput.e2el_ms.value_or(-1)}};
    m["seed"] = o.seed;
    m["git_revision"] = git_revision();
    m["kvscope_version"] = kvscope_version();
    m["machine"] = machine_info(engine.backend().num_threads());
    m["metric_definitions"] = {{"ttft", "first token time - arrival time"}, {"e2el", "finish time - arrival time"},
                               {"tpot", "(e2el - ttft) / (output tokens - 1), per request"},
                               {"itl", "every gap between consecutive tokens, pooled over requests"},
                               {"arrival", "when the request was due (it waits for the running step like at a server)"}};
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

// --compare naive: the same workload in naive mode, then paged; both results and the ratios.
void run_compare(LlmEngine& engine, const std::vector<BenchRequest>& workload, BenchOptions options,
                 const EngineConfig& config, bool timeline, nlohmann::json& result, std::vector<BenchRun>& runs) {
    for (const char* mode : {"naive", "paged"}) {
        options.progress = make_progress(mode);
        BenchRunner runner(engine, workload, options);
        EngineConfig c = config;
        c.mode = mode;
        runs.push_back(runner.run_with(c, mode));
        print_result_table(runs.back());
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
        print_result_table(runs.back());
        nlohmann::json row = run_json(runs.back(), timeline);
        row["sweep_value"] = v;
        result["sweep"].push_back(row);
    }
    print_sweep_table(sweep.knob, sweep.values, runs);
}

void run_single(LlmEngine& engine, const std::vector<BenchRequest>& workload, BenchOptions options,
                const EngineConfig& config, bool timeline, nlohmann::json& result, std::vector<BenchRun>& runs) {
    options.progress = make_progress(config.mode);
    BenchRunner runner(engine, workload, options);
    runs.push_back(runner.run(config.mode));
    print_result_table(runs.back());
    result.update(run_json(runs.back(), timeline));
}

void write_outputs(const Args& args, const nlohmann::json& result, const std::vector<const BenchRun*>& runs) {
    if (auto path = args.get("--output-json")) write_json(*path, result);
    if (auto path = args.get("--output-csv")) {
        std::vector<ResultRun> rows;
        for (const BenchRun* r : runs) rows.push_back(result_run(*r));
        write_csv(*path, rows);
    }
    if (auto path = args.get("--output-requests")) {
        std::ofstream out = open_output(*path);
        for (const BenchRun* r : runs) write_requests_jsonl(out, r->requests, r->submit_times, r->errors, r->label);
    }
}

// Checks that every output path can be written before minutes of benchmarking.
void check_outputs(const Args& args) {
    for (const char* flag : {"--output-json", "--output-csv", "--output-requests"})
        if (auto path = args.get(flag)) {
            std::ofstream probe(*path, std::ios::app);
            if (!probe) throw BadInput(std::string(flag) + ": cannot write " + *path);
        }
}

}  // namespace

int run_bench(int argc, char** argv) {
    const Args args(argc, argv, bench_value_flags(), bench_switch_flags());
    const auto spec = args.get("--model");
    if (!spec) throw BadInput("--model is required");
    const std::string compare = args.get_or("--compare", "");
    if (!compare.empty() && compare != "naive") throw BadInput("--compare: only 'naive' is supported (got '" + compare + "')");
    const std::optional<SweepSpec> sweep = args.has("--sweep") ? std::optional(parse_sweep(*args.get("--sweep"))) : std::nullopt;
    if (sweep && !compare.empty()) throw BadInput("--sweep and --compare cannot be combined");
    (void)parse_goodput(args);  // flag errors before loading the model
    (void)parse_percentiles(args.get_or("--percentiles", "50,90,99"));
    check_outputs(args);

    std::shared_ptr<const Model> model = load_model(*spec);
    const EngineConfig config = engine_config_from(args, model->config);
    if (sweep)
        for (const auto& v : sweep->values) (void)apply_knob(config, sweep->knob, v);
    const WorkloadOptions wopts = workload_from(args, config.scheduler.max_model_len);
    std::vector<BenchRequest> workload = make_workload(wopts, model->tokenizer, model->config.vocab_size);
    BenchOptions options = options_from(args, workload.size());
    if (!compare.empty() && std::find(options.percentiles.begin(), options.percentiles.end(), 99.0) == options.percentiles.end())
        options.percentiles.push_back(99);  // ratio_p99_ttft needs it
    LlmEngine engine(model, config);
    nlohmann::json result = metadata(args, *model, engine, options);
    const bool timeline = args.has("--save-timeline");
    std::vector<BenchRun> runs;

    if (!compare.empty()) run_compare(engine, workload, options, config, timeline, result, runs);
    else if (sweep) run_sweep(engine, workload, options, config, *sweep, timeline, result, runs);
    else run_single(engine, workload, options, config, timeline, result, runs);
    std::vector<const BenchRun*> ptrs;
    for (const BenchRun& r : runs) ptrs.push_back(&r);
    write_outputs(args, result, ptrs);
    return 0;
}

}  // namespace kvscope::cli
