// kvscope-cli generate: submits every prompt at once to the continuous-batching engine and prints the
// results (text, or one JSON object per request and a summary line with --json).
#include "commands.h"
#include "engine_options.h"

#include "command_line/command_line.h"
#include "command_line/option_checks.h"

#include "llm_engine.h"
#include "metrics/export.h"
#include "sim/simulation_info.h"
#include "util/errors.h"

#include <cstdio>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>

namespace kvscope::cli {

namespace {

std::vector<std::string> read_prompts_file(const std::string& path) {
    // Not a directory (ifstream opens one, and reads nothing); a pipe is fine (--prompts-file <(...)).
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw BadInput("--prompts-file " + path + ": a directory, not a file");
    std::ifstream in(path);
    if (!in) throw BadInput("--prompts-file " + path + ": cannot open the file");
    std::vector<std::string> prompts;
    std::string line;
    const bool jsonl = path.size() > 5 && (path.ends_with(".jsonl") || path.ends_with(".json"));
    for (int n = 1; std::getline(in, line); ++n) {
        // A file saved on Windows: its CRLF ends and its byte-order mark are not part of the prompts.
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (n == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
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
    if (prompts.empty()) throw BadInput("--prompts-file " + path + ": no prompt in the file (one per line)");
    return prompts;
}

// "1,2,3" -> {1, 2, 3}; the engine checks that each id is in the vocabulary.
std::vector<int32_t> parse_token_ids(const std::string& list) {
    std::vector<int32_t> ids;
    size_t start = 0;
    while (start <= list.size()) {
        const size_t end = std::min(list.find(',', start), list.size());
        const std::string item = list.substr(start, end - start);
        size_t used = 0;
        long long v = -1;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX)
            throw BadInput("--prompt-ids: '" + item + "' is not a token id (expected ID,ID,... with ids >= 0)");
        ids.push_back(static_cast<int32_t>(v));
        start = end + 1;
    }
    return ids;
}

}  // namespace

int run_generate(int argc, char** argv) {
    using namespace command_line;
    auto app = make_app("kvscope-cli generate", "Runs prompts through the continuous-batching engine, all at once.");
    EngineOptions engine_options;
    add_engine_options(*app, engine_options);
    std::vector<std::string> prompts;
    std::string prompts_file;
    SamplingParams params;
    params.max_tokens = 128;  // the engine's default is vLLM's 16: too short to read
    uint64_t seed = 0;
    bool json = false;
    app->add_option("-p,--prompt", prompts, "a prompt (encoded with BOS)")
        ->type_name("TEXT")->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app->add_option("--prompts-file", prompts_file,
                    "more prompts: one per line, or (.jsonl, .json) one JSON string or {\"prompt\": ...} per line")
        ->type_name("FILE");
    app->add_option("-n,--max-tokens", params.max_tokens, "tokens to generate per prompt at most")
        ->type_name("UINT")->check(int_in(1));
    app->add_option("--temperature", params.temperature, "sampling temperature (0 = greedy argmax)")
        ->type_name("FLOAT")->check(real_in(0));
    app->add_option("--top-p", params.top_p, "nucleus sampling: keep the smallest set of tokens with this mass")
        ->type_name("FLOAT")->check(real_in(0, 1));
    app->add_option("--top-k", params.top_k, "keep the k most likely tokens (0 = off)")
        ->type_name("UINT")->check(int_in(0));
    app->add_option("--min-p", params.min_p, "keep tokens with at least this fraction of the top token's probability")
        ->type_name("FLOAT")->check(real_in(0, 1));
    app->add_option("--repetition-penalty", params.repetition_penalty,
                    "penalize tokens already in the prompt or output (1 = off)")
        ->type_name("FLOAT")->check(real_above(0));
    CLI::Option* seed_option =
        app->add_option("--seed", seed, "sampler seed of every request (default: each draws its own)")
            ->type_name("UINT64")->check(any_uint64())->default_str("");
    app->add_flag("--ignore-eos", params.ignore_eos, "keep generating past the end-of-sequence token");
    app->add_option("--stop", params.stop, "stop at this string (not included in the text)")
        ->type_name("TEXT")->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    std::vector<std::string> id_prompts;
    app->add_option("--prompt-ids", id_prompts, "a prompt as token ids, comma-separated (no BOS added); repeatable")
        ->type_name("ID,ID,...")->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    int num_logprobs = -1;
    app->add_option("--logprobs", num_logprobs,
                    "with --json: each generated token's log-probability and its K most likely alternatives "
                    "(raw logits, before any sampling transform; -1 = off)")
        ->type_name("K")->check(int_in(-1, kMaxLogprobs))->default_str("-1");
    int num_prompt_logprobs = -1;
    app->add_option("--prompt-logprobs", num_prompt_logprobs,
                    "with --json: each prompt token's log-probability given the tokens before it and the K most "
                    "likely tokens there (the first token has none; -1 = off; the prompt takes no prefix-cache hits)")
        ->type_name("K")->check(int_in(-1, kMaxLogprobs))->default_str("-1");
    app->add_flag("--json", json, "one JSON object per prompt and a summary line");
    if (auto exit_code = parse_command_line(*app, argc, argv)) return *exit_code;
    if (seed_option->count() > 0) params.seed = seed;
    if (num_logprobs >= 0) params.logprobs = num_logprobs;
    if (num_prompt_logprobs >= 0) params.prompt_logprobs = num_prompt_logprobs;
    // The text output has no place for them: asked for without --json they would be computed and dropped.
    if (!json && (num_logprobs >= 0 || num_prompt_logprobs >= 0))
        throw BadInput(std::string(num_logprobs >= 0 ? "--logprobs" : "--prompt-logprobs") +
                       " is written in the JSON lines: add --json");

    if (!prompts_file.empty()) {
        auto more = read_prompts_file(prompts_file);
        prompts.insert(prompts.end(), more.begin(), more.end());
    }
    std::vector<std::vector<int32_t>> prompt_ids(prompts.size());
    for (const std::string& list : id_prompts) prompt_ids.push_back(parse_token_ids(list));
    if (prompt_ids.empty()) throw BadInput("give at least one --prompt, --prompt-ids or a --prompts-file");
    params.validate();
    std::shared_ptr<const Model> model = load_model_for(engine_options);
    for (size_t i = 0; i < prompts.size(); ++i) prompt_ids[i] = model->tokenizer.encode(prompts[i], true);
    for (size_t i = prompts.size(); i < prompt_ids.size(); ++i) prompts.push_back(model->tokenizer.decode(prompt_ids[i]));
    EngineConfig config = engine_config_from(engine_options, model->config);
    LlmEngine engine(model, config);

    // Every prompt is submitted before the first step: one continuous batch. A prompt that is rejected
    // is reported and the others still run.
    std::vector<std::string> ids(prompts.size()), errors(prompts.size()), texts(prompts.size());
    std::vector<std::vector<TokenLogprobs>> logprobs(prompts.size()), prompt_logprobs(prompts.size());
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < prompts.size(); ++i) {
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
        for (const RequestOutput& o : engine.step()) {
            const size_t i = index_of[o.request_id];
            texts[i] += o.text_delta;
            logprobs[i].insert(logprobs[i].end(), o.logprobs.begin(), o.logprobs.end());
            if (o.prompt_logprobs) prompt_logprobs[i] = *o.prompt_logprobs;
        }
    const double duration = engine.now() - t_start;

    int64_t total_output = 0;
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
        // "logprobs": one list per generated token of its K best [id, logprob], best first;
        // "token_logprobs": the generated token's own (it may be outside the K). The prompt's the same
        // way, with null for its first token (nothing comes before it), as vLLM gives None.
        auto add_logprobs = [&j](std::span<const TokenLogprobs> lps, const char* top_key, const char* own_key, bool first_null) {
            nlohmann::json top = nlohmann::json::array(), own = nlohmann::json::array();
            if (first_null) {
                top.push_back(nullptr);
                own.push_back(nullptr);
            }
            for (const TokenLogprobs& l : lps) {
                nlohmann::json row = nlohmann::json::array();
                for (const auto& [id, lp] : l.top) row.push_back({id, lp});
                top.push_back(std::move(row));
                own.push_back(l.logprob);
            }
            j[top_key] = std::move(top);
            j[own_key] = std::move(own);
        };
        if (params.logprobs) add_logprobs(logprobs[i], "logprobs", "token_logprobs", false);
        if (params.prompt_logprobs) add_logprobs(prompt_logprobs[i], "prompt_logprobs", "prompt_token_logprobs", true);
        j.update(request_latencies_ms(m));
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
    s["num_preemptions"] = engine.num_preemptions();
    s["prefix_cache_hit_tokens"] = pc.num_hit_tokens;
    s["prefix_cache_query_tokens"] = pc.num_query_tokens;
    s["total_output_tokens"] = total_output;
    s["duration_s"] = duration;
    s["output_throughput"] = duration > 0 ? total_output / duration : 0.0;
    s["num_steps"] = engine.num_steps();
    s["mode"] = std::string(to_string(config.mode));
    if (engine.is_simulated()) s["simulated"] = simulation_to_json(engine);
    if (json) std::cout << nlohmann::json{{"summary", s}}.dump() << "\n";
    else std::fprintf(stderr, "%lld tokens in %.3f s (%.1f tokens/s), %d blocks of %d, %lld preemptions\n",
                      static_cast<long long>(total_output), duration, s["output_throughput"].get<double>(),
                      kv.num_blocks(), kv.block_size(), static_cast<long long>(engine.num_preemptions()));
    if (!json && engine.is_simulated())
        std::fprintf(stderr, "SIMULATED, not measured: %s; times are simulated seconds\n", engine.simulation_label().c_str());
    for (const auto& e : errors)
        if (!e.empty()) return 2;
    return 0;
}

}  // namespace kvscope::cli
