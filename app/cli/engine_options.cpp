#include "engine_options.h"

#include <algorithm>

namespace kvscope::cli {

std::set<std::string> engine_value_flags() {
    return {"--model", "--block-size", "--max-num-seqs", "--max-num-batched-tokens", "--policy", "--kv-cache-memory",
            "--max-model-len", "--mode", "--threads", "--backend", "--num-blocks", "--long-prefill-token-threshold",
            "--kv-cache-dtype"};
}

std::set<std::string> engine_switch_flags() { return {"--enable-prefix-caching", "--check-invariants", "--enforce-eager"}; }

EngineConfig engine_config_from(const Args& args, const ModelConfig& model) {
    EngineConfig c;
    c.block_size = static_cast<int>(args.get_int("--block-size", 16));
    c.scheduler.max_num_seqs = static_cast<int>(args.get_int("--max-num-seqs", 256));
    c.scheduler.max_model_len =
        static_cast<int>(args.get_int("--max-model-len", std::min(model.max_position_embeddings, 8192)));
    c.scheduler.max_num_batched_tokens = static_cast<int>(args.get_int("--max-num-batched-tokens", 2048));
    c.scheduler.policy = args.get_or("--policy", "fcfs");
    c.scheduler.enable_prefix_caching = args.has("--enable-prefix-caching");
    c.scheduler.long_prefill_token_threshold = static_cast<int>(args.get_int("--long-prefill-token-threshold", 0));
    c.kv_cache_memory = args.get_bytes("--kv-cache-memory", 0);
    c.num_blocks = static_cast<int>(args.get_int("--num-blocks", 0));
    c.mode = args.get_or("--mode", "paged");
    c.kv_cache_dtype = args.get_or("--kv-cache-dtype", "auto");
    c.num_threads = static_cast<int>(args.get_int("--threads", 0));
    c.backend = args.get_or("--backend", "cpu");
    c.check_invariants = args.has("--check-invariants");
    c.enforce_eager = args.has("--enforce-eager");
    c.validate();
    return c;
}

}  // namespace kvscope::cli
