#include "engine_options.h"

#include "command_line/option_checks.h"
#include "sim/gpu_specs.h"
#include "util/errors.h"

#include <algorithm>

namespace kvscope::cli {

using command_line::byte_size;
using command_line::int_in;
using command_line::real_in;

void add_engine_options(CLI::App& app, EngineOptions& o) {
    EngineConfig& c = o.config;
    SchedulerConfig& s = c.scheduler;
    const std::string group = kEngineOptionsGroup;
    std::string presets;
    for (const std::string& name : dummy_preset_names()) presets += (presets.empty() ? "" : ", ") + name;
    app.add_option("-m,--model", o.model, "a Hugging Face directory, a .gguf file, or dummy:PRESET (" + presets + ")")
        ->type_name("MODEL")->required()->group(group);
    // Bounds here are what any setting could use; EngineConfig::validate() checks the finer rules
    // (block_size a power of two, threads up to 256) and names the knob.
    app.add_option("--block-size", c.block_size, "tokens per KV block, a power of two")
        ->type_name("UINT")->check(int_in(1, 256))->group(group);
    app.add_option("--max-num-seqs", s.max_num_seqs, "running requests at most")
        ->type_name("UINT")->check(int_in(1))->group(group);
    app.add_option("--max-num-batched-tokens", s.max_num_batched_tokens, "tokens one step computes at most")
        ->type_name("UINT")->check(int_in(1))->group(group);
    app.add_option("--max-model-len", o.max_model_len, "prompt + output tokens of one request at most")
        ->type_name("UINT")->check(int_in(1))->default_str("model's context, at most 8192")->group(group);
    app.add_option("--policy", o.policy, "scheduling policy")->type_name("fcfs|priority")->group(group);
    app.add_flag("--enable-prefix-caching", s.enable_prefix_caching,
                 "reuse the KV blocks of prompt prefixes already computed")->group(group);
    app.add_option("--long-prefill-token-threshold", s.long_prefill_token_threshold,
                   "while requests wait, a prefill chunk takes at most this many tokens (0 = a quarter of the "
                   "step's budget)")
        ->type_name("UINT")->check(int_in(0))->group(group);
    app.add_option("--kv-cache-memory", c.kv_cache_memory,
                   "KV pool bytes, accepts 512M/8G (0 = what max_num_seqs x max_model_len need, at most 64Ki tokens and 1G)")
        ->type_name("SIZE")->transform(byte_size())->group(group);
    app.add_option("--gpu-memory-utilization", c.gpu_memory_utilization,
                   "fraction of GPU memory for weights, activations and the KV pool, which takes the rest "
                   "(CUDA; --kv-cache-memory or --num-blocks wins when given)")
        ->type_name("FRACTION")->check(real_in(0.01, 1.0))->group(group);
    app.add_option("--num-blocks", c.num_blocks,
                   "KV blocks in the pool; overrides --kv-cache-memory (0 = as many as its bytes hold)")
        ->type_name("UINT")->check(int_in(0))->group(group);
    app.add_option("--mode", o.mode, "batching: paged (continuous batching, paged KV) or naive (static batches)")
        ->type_name("paged|naive")->group(group);
    app.add_option("--kv-cache-dtype", c.kv_cache_dtype,
                   "KV cache element type (auto = as the weights, where the backend can hold it)")
        ->type_name("auto|float32|float16|bfloat16")->group(group);
    app.add_option("-t,--threads", c.num_threads, "CPU threads (0 = all cores)")
        ->type_name("UINT")->check(int_in(0))->group(group);
    app.add_option("--backend", o.backend,
                   "compute backend (auto = CUDA when built and a device is present; sim:GPU = the real engine on a "
                   "simulated GPU with a modelled step time, GPU one of " + gpu_spec_names() + ")")
        ->option_text("cpu|cuda|auto|sim:GPU")->group(group);
    app.add_option("--tensor-parallel-size", c.tensor_parallel_size, "GPUs the model is sharded over (sim backends)")
        ->type_name("UINT")->check(int_in(1, 64))->group(group);
    app.add_option("--sim-speed", c.sim_pace,
                   "simulated seconds per wall second (sim backends; 0 = as fast as the host allows, serve: 1)")
        ->type_name("FLOAT")->check(real_in(0, 1e6))->group(group);
    app.add_option("--sim-calibration", c.sim_calibration,
                   "step-time constants measured on a real GPU (JSON, docs/DESIGN.md; sim backends)")
        ->type_name("FILE")->group(group);
    app.add_flag_callback("--no-free-outside-window", [&c] { c.free_outside_window = false; },
                          "keep the KV blocks a request has left behind its sliding window until it ends (default: "
                          "free them while it runs where every layer is windowed, as vLLM does)")->group(group);
    app.add_flag("--check-invariants", c.check_invariants,
                 "check scheduler and KV pool invariants after every step (slow)")->group(group);
    app.add_flag("--enforce-eager", c.enforce_eager, "run every step op by op: no CUDA graphs (vLLM's flag)")
        ->group(group);
}

EngineConfig engine_config_from(const EngineOptions& o, const ModelConfig& model) {
    EngineConfig c = o.config;
    c.scheduler.max_model_len = o.max_model_len > 0 ? o.max_model_len : default_max_model_len(model.max_position_embeddings);
    c.mode = parse_batching_mode(o.mode);
    c.scheduler.policy = parse_scheduler_policy(o.policy);
    parse_backend(o.backend, c);
    c.validate();
    return c;
}

std::unique_ptr<Model> load_model_for(const EngineOptions& o) {
    // The backend's own errors come before a model's weights load (they may be gigabytes).
    EngineConfig c = o.config;
    parse_backend(o.backend, c);
    if (c.tensor_parallel_size > 1 && c.backend != BackendKind::SIM)
        throw BadInput("invalid engine setting: tensor_parallel_size > 1 needs a simulated backend (--backend sim:GPU): "
                       "kvscope runs one device");
    return load_model(o.model, c.backend != BackendKind::SIM);
}

}  // namespace kvscope::cli
