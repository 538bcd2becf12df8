// kvscope-cli info: what a model is (architecture, parameters, weight bytes by type, context length,
// tokenizer, chat template), what the KV cache can hold for a budget: blocks, tokens, and the
// maximum concurrency at max_model_len, and which CPU kernel set runs it.
#include "commands.h"
#include "engine_options.h"

#include "command_line/command_line.h"

#include "backend_factory.h"
#include "cpu/cpu_kernel_sets.h"
#include "kv/kv_cache_dtype.h"
#include "llm_engine.h"
#include "sim/simulation_info.h"
#include "util/errors.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvscope::cli {

int run_info(int argc, char** argv) {
    auto app = command_line::make_app("kvscope-cli info",
                                      "Describes a model and what its KV cache holds for a budget (the engine knobs).");
    EngineOptions engine_options;
    add_engine_options(*app, engine_options);
    bool json = false;
    app->add_flag("--json", json, "one JSON object");
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;

    std::shared_ptr<const Model> model = load_model_for(engine_options);
    const ModelConfig& c = model->config;
    const EngineConfig ec = engine_config_from(engine_options, c);
    const int max_model_len = ec.scheduler.max_model_len;
    // The cache type the engine would pick. A CUDA backend that cannot start on this machine is taken
    // as what every backend holds (Backend::is_kv_dtype), so `info --backend cuda` still describes the budget
    // without a GPU.
    const DType weight_dtype = model->config.weight_dtype;
    std::unique_ptr<Backend> backend;
    // A simulated GPU: the engine itself sizes the pool by vLLM's formula (no weights are loaded).
    std::unique_ptr<LlmEngine> sim;
    if (ec.backend == BackendKind::SIM) sim = std::make_unique<LlmEngine>(model, ec);
    else try {
        backend = make_backend(std::string(to_string(ec.backend)), 1);
    } catch (const std::invalid_argument& e) {
        // Only an absent GPU is described anyway; a CPU that cannot run the CPU kernel set that
        // KVSCOPE_CPU_VARIANT asks for is the user's error.
        if (ec.backend != BackendKind::CUDA) throw BadInput(std::string("backend: ") + e.what());
    }
    const std::string kernel_set = backend ? backend->kernel_set() : "";
    const DType kv_dtype =
        sim ? sim->kv_cache_dtype()
        : backend ? resolve_kv_cache_dtype(ec.kv_cache_dtype, weight_dtype, *backend)
                : resolve_kv_cache_dtype(ec.kv_cache_dtype, weight_dtype, std::string(to_string(ec.backend)), &Backend::is_kv_dtype);
    const int64_t kv_bytes_per_token = c.kv_bytes_per_token(kv_dtype);
    const int64_t budget = sim ? static_cast<int64_t>(sim->executor().kv_cache_bytes())
                           : ec.kv_cache_memory > 0 ? ec.kv_cache_memory
                                                  : default_kv_cache_memory(kv_bytes_per_token,
                                                                            ec.scheduler.max_num_seqs, max_model_len);
    const int64_t bytes_per_block =
        KvCacheLayout::bytes_per_block(c.num_layers, c.num_kv_heads, c.head_dim, ec.block_size, kv_dtype);
    const int64_t num_blocks = sim ? sim->num_blocks() : ec.num_blocks > 0 ? ec.num_blocks : budget / bytes_per_block;
    const int64_t weight_bytes = sim ? sim->memory_stats().weights_bytes : model->weights.weight_bytes();
    const int64_t blocks_per_seq = (max_model_len + ec.block_size - 1) / ec.block_size;

    nlohmann::json j;
    j["model"] = model->source;
    j["name"] = model->name;
    j["format"] = model->format;
    j["architecture"] = c.architecture;
    j["num_params"] = c.num_params();
    j["weight_bytes"] = weight_bytes;
    nlohmann::json by_dtype = nlohmann::json::object();
    for (const auto& [dt, bytes] : model->weights.bytes_by_dtype) by_dtype[std::string(dtype_name(dt))] = bytes;
    j["weight_bytes_by_dtype"] = by_dtype;
    j["hidden_size"] = c.hidden_size;
    j["intermediate_size"] = c.intermediate_size;
    j["num_layers"] = c.num_layers;
    j["num_heads"] = c.num_heads;
    j["num_kv_heads"] = c.num_kv_heads;
    j["head_dim"] = c.head_dim;
    j["vocab_size"] = c.vocab_size;
    j["context_length"] = c.max_position_embeddings;
    j["max_model_len"] = max_model_len;
    j["rope_theta"] = c.rope_theta;
    j["rope_scaling"] = c.rope_scaling.type.empty() ? "none" : c.rope_scaling.type;
    j["tie_word_embeddings"] = c.tie_word_embeddings;
    j["tokenizer"] = std::string(model->tokenizer.kind_name());
    j["chat_template"] = model->chat_template.family();
    j["chat_template_recognized"] = !model->chat_template.unrecognized();
    j["kv_bytes_per_token"] = kv_bytes_per_token;
    j["kv_cache_dtype"] = kv_cache_dtype_name(kv_dtype);
    j["kv_cache_memory"] = budget;
    j["block_size"] = ec.block_size;
    j["kv_bytes_per_block"] = bytes_per_block;
    j["num_blocks"] = num_blocks;
    j["kv_capacity_tokens"] = num_blocks * ec.block_size;
    j["max_concurrency_at_max_model_len"] = static_cast<double>(num_blocks) / blocks_per_seq;
    if (!kernel_set.empty()) j["cpu_kernels"] = kernel_set;
    if (sim) j["simulated"] = simulation_to_json(*sim);
    if (json) {
        std::cout << j.dump() << "\n";
        return 0;
    }
    if (sim) {
        const nlohmann::json& s = j["simulated"];
        std::printf("SIMULATED         %s\n", sim->simulation_label().c_str());
        std::printf("device memory     %.1f GiB (%d x %s), %s of it for weights + activations + KV\n",
                    s["device_memory_bytes"].get<double>() / 1073741824.0, s["tensor_parallel_size"].get<int>(),
                    s["gpu_name"].get<std::string>().c_str(), std::to_string(ec.gpu_memory_utilization).substr(0, 4).c_str());
    }
    std::printf("model             %s (%s, %s)\n", model->name.c_str(), model->format.c_str(), c.architecture.c_str());
    std::printf("parameters        %.2f M\n", c.num_params() / 1e6);
    std::printf("weights           %.1f MiB%s", weight_bytes / 1048576.0, sim ? " (simulated, not loaded)" : "");
    for (const auto& [dt, bytes] : model->weights.bytes_by_dtype)  // a tiny model's norms: KiB, not "0.0 MiB"
        std::printf(bytes < (1 << 20) ? "  %s %.1f KiB" : "  %s %.1f MiB", std::string(dtype_name(dt)).c_str(),
                    bytes < (1 << 20) ? bytes / 1024.0 : bytes / 1048576.0);
    std::printf("\nshape             %d layers, hidden %d, ffn %d, %d heads, %d kv heads, head_dim %d, vocab %d\n",
                c.num_layers, c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size);
    std::printf("context           %d (max_model_len %d), rope theta %g%s\n", c.max_position_embeddings, max_model_len,
                c.rope_theta, c.rope_scaling.type.empty() ? "" : (", scaling " + c.rope_scaling.type).c_str());
    std::printf("tokenizer         %s, chat template %s%s\n", std::string(model->tokenizer.kind_name()).c_str(),
                model->chat_template.family().c_str(),
                model->chat_template.unrecognized()
                    ? " (warning: the model's template is not one kvscope knows; chats are rendered as plain text)"
                    : "");
    std::printf("KV per token      %lld bytes (2 x %d layers x %d kv heads x %d head_dim x %d bytes, %s)\n",
                static_cast<long long>(kv_bytes_per_token), c.num_layers, c.num_kv_heads, c.head_dim,
                static_cast<int>(dtype_block_bytes(kv_dtype)),
                kv_cache_dtype_name(kv_dtype).c_str());
    std::printf("KV budget         %.1f MiB -> %lld blocks of %d tokens (%lld bytes each) = %lld tokens\n",
                budget / 1048576.0, static_cast<long long>(num_blocks), ec.block_size,
                static_cast<long long>(bytes_per_block), static_cast<long long>(num_blocks * ec.block_size));
    std::printf("max concurrency   %.2f requests at max_model_len %d\n",
                static_cast<double>(num_blocks) / blocks_per_seq, max_model_len);
    if (!kernel_set.empty()) std::printf("cpu kernels       %s\n", cpu::describe_cpu_kernel_set(kernel_set).c_str());
    return 0;
}

}  // namespace kvscope::cli
