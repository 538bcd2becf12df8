#include "metrics/export.h"

#include "kvscope_git_revision.h"
#include "util/errors.h"
#include "util/json_file.h"
#include "util/local_time.h"

#include <fstream>
#include <thread>

#ifndef KVSCOPE_VERSION
#define KVSCOPE_VERSION "unknown"
#endif

namespace kvscope {

std::string git_revision() { return KVSCOPE_GIT_REVISION; }
std::string kvscope_version() { return KVSCOPE_VERSION; }

namespace {

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0)
            if (auto colon = line.find(':'); colon != std::string::npos)
                return line.substr(line.find_first_not_of(' ', colon + 1));
    return "unknown";
}

std::string csv_value(const nlohmann::json& v) {
    if (v.is_null()) return "";
    if (v.is_string()) return v.get<std::string>();
    return v.dump();
}

}  // namespace

std::string csv_quote(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

nlohmann::json metric_definitions() {
    return {
        {"arrival", "When the request was due (benchmarks: a request due while a step runs waits for it, as at a "
                    "server; one held back by --max-concurrency arrives when it is submitted); elsewhere when it "
                    "entered the engine."},
        {"ttft", "Time to first token: first output token time - arrival time (includes queueing and prefill)."},
        {"tpot", "Time per output token (vLLM): (E2EL - TTFT) / (output_tokens - 1), per request."},
        {"itl", "Inter-token latency (vLLM): every gap between consecutive output tokens, pooled over requests."},
        {"e2el", "End-to-end latency: finish time - arrival time."},
        {"queue_time", "First scheduled time - arrival time."},
        {"request_phases", "Request timeline lanes: queued = arrival to first scheduled; prefill = one span per step that "
                           "computes prompt tokens (or recomputes them after a preemption), until the token it samples; "
                           "decode = from that token to the finish; preempted = preemption (also the drain of a KV pool "
                           "rebuild) to the next prefill chunk."},
        {"request_throughput", "Completed requests / benchmark duration (req/s)."},
        {"output_throughput", "Output tokens / duration (tok/s)."},
        {"total_token_throughput", "(Input + output tokens) / duration (tok/s)."},
        {"kv_cache_usage", "KV blocks held by running requests / all blocks (kvscope:kv_cache_usage_perc)."},
        {"kv_waste", "Reserved KV slots that hold no token / reserved slots (internal fragmentation of the last "
                     "block in paged mode, the unused max_model_len tail in naive mode)."},
        {"batch_occupancy", "Requests scheduled in a step against max_num_seqs."},
        {"token_budget", "Prefill + decode tokens scheduled in a step against max_num_batched_tokens."},
        {"prefix_cache_hit_rate",
         "Prompt tokens served from the prefix cache / prompt tokens queried (vLLM's PrefixCacheStats)."},
        {"gui_max_stall_ms", "Longest lateness of a 5 ms GUI-thread timer: how long the event loop was blocked at worst."},
    };
}

nlohmann::json machine_info(int threads, const std::string& gpu) {
    return {{"cpu_model", cpu_model()},
            {"hardware_threads", std::thread::hardware_concurrency()},
            {"threads", threads},
            {"gpu", gpu}};
}

std::string result_date() { return local_time_string("%Y%m%d-%H%M%S"); }

nlohmann::json engine_config_to_json(const EngineConfig& c) {
    return {{"mode", std::string(to_string(c.mode))},
            {"block_size", c.block_size},
            {"kv_cache_dtype", c.kv_cache_dtype},
            {"kv_cache_memory", c.kv_cache_memory},
            {"num_blocks", c.num_blocks},
            {"num_threads", c.num_threads},
            {"max_num_seqs", c.scheduler.max_num_seqs},
            {"max_num_batched_tokens", c.scheduler.max_num_batched_tokens},
            {"max_model_len", c.scheduler.max_model_len},
            {"policy", std::string(to_string(c.scheduler.policy))},
            {"enable_prefix_caching", c.scheduler.enable_prefix_caching},
            {"long_prefill_token_threshold", c.scheduler.long_prefill_token_threshold},
            {"enforce_eager", c.enforce_eager},
            {"free_outside_window", c.free_outside_window},
            {"backend", backend_name(c)},
            {"tensor_parallel_size", c.tensor_parallel_size}};
}

nlohmann::json run_to_json(const ResultRun& run) {
    nlohmann::json j = run.summary.to_json();
    j["label"] = run.label;
    if (!run.local_engine) {
        j["mode"] = "remote";
        return j;
    }
    j["mode"] = run.engine_config.value("mode", "");
    j["engine_config"] = run.engine_config;
    j["engine"] = run.engine.to_json();
    return j;
}

namespace {

ResultRun run_from_json(const nlohmann::json& j) {
    ResultRun r;
    r.label = j.value("label", j.value("mode", ""));
    r.local_engine = j.value("mode", "") != "remote";
    if (j.contains("engine_config")) r.engine_config = j["engine_config"];
    r.summary = BenchmarkSummary::from_json(j);
    if (j.contains("engine")) r.engine = EngineAggregates::from_json(j["engine"]);
    return r;
}

}  // namespace

ResultFile read_result_file(const std::string& path) {
    ResultFile f;
    f.raw = read_json_file(path, "result file");
    try {
        if (!f.raw.is_object() || !(f.raw.contains("completed") || f.raw.contains("paged") || f.raw.contains("sweep")))
            throw BadInput(path + ": not a benchmark result (no completed, paged or sweep key)");
        f.date = f.raw.value("date", "");
        f.model_id = f.raw.value("model_id", "");
        f.backend = f.raw.value("backend", "");
        f.git_revision = f.raw.value("git_revision", "");
        f.seed = f.raw.value("seed", uint64_t{0});
        if (f.raw.contains("sweep"))
            for (const auto& row : f.raw["sweep"]) f.runs.push_back(run_from_json(row));
        else if (f.raw.contains("paged"))
            for (const char* k : {"naive", "paged"})
                if (f.raw.contains(k)) f.runs.push_back(run_from_json(f.raw[k]));
        if (f.runs.empty()) f.runs.push_back(run_from_json(f.raw));
        for (const auto& [k, v] : f.raw.items())  // --compare naive writes its ratios at the top level
            if ((k.rfind("speedup_", 0) == 0 || k.rfind("ratio_", 0) == 0) && v.is_number()) f.ratios[k] = v;
    } catch (const nlohmann::json::exception& e) {
        throw BadInput(path + ": invalid result JSON: " + e.what());
    }
    return f;
}

std::vector<std::pair<std::string, std::string>> csv_row(const ResultRun& run) {
    std::vector<std::pair<std::string, std::string>> row{{"label", run.label}};
    const nlohmann::json summary = run.summary.to_json(), engine = run.engine.to_json();  // items() needs lvalues
    if (!run.local_engine) {  // the same vocabulary, without the columns only a local engine has
        row.emplace_back("mode", "remote");
        for (const auto& [k, v] : summary.items()) row.emplace_back(k, csv_value(v));
        return row;
    }
    for (const auto& part : {&run.engine_config, &summary, &engine})
        for (const auto& [k, v] : part->items()) row.emplace_back(k, csv_value(v));
    return row;
}

void write_csv(const std::string& path, const std::vector<ResultRun>& runs) {
    std::ofstream out = open_output(path);
    for (size_t i = 0; i < runs.size(); ++i) {
        const auto row = csv_row(runs[i]);
        std::string header, line;
        for (size_t c = 0; c < row.size(); ++c) {
            header += (c ? "," : "") + csv_quote(row[c].first);
            line += (c ? "," : "") + csv_quote(row[c].second);
        }
        if (i == 0) out << header << "\n";
        out << line << "\n";
    }
    close_output(out, path);
}

nlohmann::json request_latencies_ms(const RequestMetrics& m) {
    auto ms = [](double seconds) { return seconds >= 0 ? nlohmann::json(seconds * 1e3) : nlohmann::json(nullptr); };
    const bool finished = m.finish_time >= 0;
    return {{"ttft_ms", ms(m.ttft())},
            {"tpot_ms", ms(finished && m.has_first_token() ? m.tpot() : -1)},  // a count from usage alone has no TTFT
            {"e2el_ms", ms(finished ? m.e2el() : -1)},
            {"queue_time_ms", ms(m.queue_time())}};  // unknown for a remote engine
}

nlohmann::json request_to_json(const RequestMetrics& m, double submit_time, const std::string& error) {
    nlohmann::json j = {{"request_id", m.request_id},
                        {"num_prompt_tokens", m.num_prompt_tokens},
                        {"num_output_tokens", m.num_output_tokens},
                        {"num_cached_tokens", m.num_cached_tokens},
                        {"num_preemptions", m.num_preemptions},
                        {"finish_reason", std::string(to_string(m.finish_reason))},
                        {"arrival_time", m.arrival_time},
                        {"submit_time", submit_time},
                        {"first_scheduled_time", m.first_scheduled_time},
                        {"preemption_times", m.preemption_times},
                        {"prefill_chunk_times", m.prefill_chunk_times},
                        {"token_times", m.token_times},
                        {"finish_time", m.finish_time}};
    if (!error.empty()) j["error"] = error;
    j.update(request_latencies_ms(m));
    return j;
}

std::ofstream open_output(const std::string& path) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw BadInput(path + ": cannot open for writing");
    return out;
}

void close_output(std::ofstream& out, const std::string& path) {
    out.close();  // flushes: a full disk (or /dev/full) shows here, not in the writes that only buffered
    if (!out) throw BadInput(path + ": write failed");
}

void write_requests_jsonl(std::ostream& out, const std::vector<RequestMetrics>& requests,
                          const std::vector<double>& submit_times, const std::vector<std::string>& errors,
                          const std::string& run_label) {
    for (size_t i = 0; i < requests.size(); ++i) {
        nlohmann::json j = request_to_json(requests[i], i < submit_times.size() ? submit_times[i] : -1.0,
                                           i < errors.size() ? errors[i] : "");
        j["index"] = i;
        j["run"] = run_label;
        out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
}

void write_json(const std::string& path, const nlohmann::json& j) {
    std::ofstream out = open_output(path);
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    close_output(out, path);
}

}  // namespace kvscope
