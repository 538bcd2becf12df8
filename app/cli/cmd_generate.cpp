// kvscope-cli generate: submits every prompt at once to the continuous-batching engine and prints the
// results (text, or one JSON object per request and a summary line with --json).
#include "args.h"
#include "commands.h"
#include "engine_options.h"

#include "llm_engine.h"
#include "util/errors.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvscope::cli {

namespace {

std::vector<std::string> read_prompts_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw BadInput(path + ": cannot open prompts file");
    std::vector<std::string> prompts;
    std::string line;
    const bool jsonl = path.size() > 5 && (path.ends_with(".jsonl") || path.ends_with(".json"));
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty()) continue;
        if (!jsonl) {
            prompts.push_back(line);
            continue;
        }
        try {
            auto j = nlohmann::json::parse(line);
            if (j.is_string()) prompts.push_back(j.get<std::string>());
            else if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) prompts.push_back(j["prompt"]);
            else throw BadInput(path + ":" + std::to_string(n) + ": expected a JSON string or {\"prompt\": ...}");
        } catch (const nlohmann::json::exception& e) {
            throw BadInput(path + ":" + std::to_string(n) + ": invalid JSON: " + e.what());
        }
    }
    return prompts;
}

SamplingParams sampling_from(const Args& args) {
    SamplingParams p;
    p.max_tokens = static_cast<int>(args.get_int("--max-tokens", 128));
    p.temperature = static_cast<float>(args.get_double("--temperature", 1.0));
    p.top_p = static_cast<float>(args.get_double("--top-p", 1.0));
    p.top_k = static_cast<int>(args.get_int("--top-k", 0));
    p.min_p = static_cast<float>(args.get_double("--min-p", 0.0));
    p.repetition_penalty = static_cast<float>(args.get_double("--repetition-penalty", 1.0));
    if (args.has("--seed")) p.seed = static_cast<uint64_t>(args.get_int("--seed", 0));
    p.ignore_eos = args.has("--ignore-eos");
    p.stop = args.all("--stop");
    p.validate();
    return p;
}

}  // namespace

int run_generate(int argc, char** argv) {
    auto value_flags = engine_value_flags();
    value_flags.insert({"--prompt", "--prompts-file", "--max-tokens", "--temperature", "--top-p", "--top-k", "--min-p",
                        "--repetition-penalty", "--seed", "--stop"});
    auto switch_flags = engine_switch_flags();
    switch_flags.insert({"--ignore-eos", "--json"});
    const Args args(argc, argv, value_flags, switch_flags);
    const auto spec = args.get("--model");
    if (!spec) throw BadInput("--model is required");
    std::vector<std::string> prompts = args.all("--prompt");
    if (auto file = args.get("--prompts-file")) {
        auto more = read_prompts_file(*file);
        prompts.insert(prompts.end(), more.begin(), more.end());
    }
    if (prompts.empty()) throw BadInput("give at least one --prompt or a --prompts-file");
    const SamplingParams params = sampling_from(args);
    std::shared_ptr<const Model> model = load_model(*spec);
    EngineConfig config = engine_config_from(args, model->config);
    LlmEngine engine(model, config);

    // Every prompt is submitted before the first step: one continuous batch. A prompt that is rejected
    // is reported and the others still run.
    std::vector<std::string> ids(prompts.size()), errors(prompts.size()), texts(prompts.size());
    std::vector<std::vector<int32_t>> prompt_ids(prompts.size());
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < prompts.size(); ++i) {
        prompt_ids[i] = model->tokenizer.encode(prompts[i], true);
        try {
            ids[i] = engine.add_request({std::to_string(i), prompt_ids[i], params, 0, ""}).front();
            index_of[ids[i]] = i;
        } catch (const BadInput& e) {
            errors[i] = e.what();
            std::fprintf(stderr, "kvscope-cli generate: error: prompt %zu: %s\n", i, e.what());
        }
    }
    const double t_start = engine.now();
    while (engine.has_unfinished_requests())
        for (const RequestOutput& o : engine.step()) texts[index_of[o.request_id]] += o.text_delta;
    const double duration = engine.now() - t_start;

    int64_t total_output = 0;
    const bool json = args.has("--json");
    for (size_t i = 0; i < prompts.size(); ++i) {
        nlohmann::json j;
        j["index"] = i;
        j["prompt"] = prompts[i];
        j["prompt_token_ids"] = prompt_ids[i];
        if (!errors[i].empty()) {
            j["error"] = errors[i];
            if (json) std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
            continue;
        }
        const RequestMetrics m = *engine.request_metrics(ids[i]);
        const RequestInfo info = *engine.request_info(ids[i]);
        auto out_ids = engine.request_output_token_ids(ids[i]);
        total_output += static_cast<int64_t>(out_ids.size());
        if (!json) {
            std::cout << prompts[i] << texts[i] << "\n";
            if (prompts.size() > 1) std::cout << "----\n";
            continue;
        }
        j["output_token_ids"] = out_ids;
        j["text"] = texts[i];
        j["finish_reason"] = std::string(to_string(info.finish_reason));
        j["ttft_ms"] = m.ttft() * 1e3;
        j["e2el_ms"] = m.e2el() * 1e3;
        j["num_cached_tokens"] = m.num_cached_tokens;
        j["num_preemptions"] = m.num_preemptions;
        std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    const auto& kv = engine.kv_cache_manager();
    const PrefixCacheStats pc = kv.prefix_cache_stats();
    nlohmann::json s;
    s["num_requests"] = prompts.size();
    s["num_blocks"] = kv.num_blocks();
    s["block_size"] = kv.block_size();
    s["num_free_blocks_at_end"] = kv.num_free_blocks();
    s["num_preemptions"] = engine.scheduler().num_preemptions();
    s["prefix_cache_hit_tokens"] = pc.num_hit_tokens;
    s["prefix_cache_query_tokens"] = pc.num_query_tokens;
    s["total_output_tokens"] = total_output;
    s["duration_s"] = duration;
    s["output_throughput"] = duration > 0 ? total_output / duration : 0.0;
    s["num_steps"] = engine.num_steps();
    s["mode"] = config.mode;
    if (json) std::cout << nlohmann::json{{"summary", s}}.dump() << "\n";
    else std::fprintf(stderr, "%lld tokens in %.3f s (%.1f tokens/s), %d blocks of %d, %lld preemptions\n",
                      static_cast<long long>(total_output), duration, s["output_throughput"].get<double>(),
                      kv.num_blocks(), kv.block_size(), static_cast<long long>(engine.scheduler().num_preemptions()));
    for (const auto& e : errors)
        if (!e.empty()) return 2;
    return 0;
}

}  // namespace kvscope::cli
