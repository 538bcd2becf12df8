#include "bench/sweep.h"

#include "util/errors.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace kvscope {

namespace {

int64_t to_int(const std::string& knob, const std::string& v) {
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0') throw BadInput("--sweep " + knob + ": '" + v + "' is not an integer");
    return x;
}

}  // namespace

std::vector<std::string> sweep_knobs() {
    return {"max-num-seqs", "block-size", "max-num-batched-tokens", "policy", "enable-prefix-caching",
            "kv-cache-memory", "num-blocks", "long-prefill-token-threshold", "mode", "kv-cache-dtype"};
}

EngineConfig apply_knob(EngineConfig c, const std::string& knob, const std::string& v) {
    if (knob == "max-num-seqs") c.scheduler.max_num_seqs = static_cast<int>(to_int(knob, v));
    else if (knob == "block-size") c.block_size = static_cast<int>(to_int(knob, v));
    else if (knob == "max-num-batched-tokens") c.scheduler.max_num_batched_tokens = static_cast<int>(to_int(knob, v));
    else if (knob == "long-prefill-token-threshold") c.scheduler.long_prefill_token_threshold = static_cast<int>(to_int(knob, v));
    else if (knob == "kv-cache-memory") c.kv_cache_memory = to_int(knob, v);
    else if (knob == "num-blocks") c.num_blocks = static_cast<int>(to_int(knob, v));
    else if (knob == "policy") c.scheduler.policy = parse_scheduler_policy(v);
    else if (knob == "mode") c.mode = parse_batching_mode(v);
    else if (knob == "kv-cache-dtype") c.kv_cache_dtype = v;
    else if (knob == "enable-prefix-caching") {
        if (v != "true" && v != "false" && v != "1" && v != "0")
            throw BadInput("--sweep enable-prefix-caching: '" + v + "' is not true/false");
        c.scheduler.enable_prefix_caching = v == "true" || v == "1";
    } else
        throw BadInput("--sweep: unknown knob '" + knob + "'");
    c.validate();
    return c;
}

SweepSpec parse_sweep(const std::string& text) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0)
        throw BadInput("--sweep: expected KNOB=V1,V2,... (got '" + text + "')");
    SweepSpec s;
    s.knob = text.substr(0, eq);
    if (s.knob.rfind("--", 0) == 0) s.knob = s.knob.substr(2);
    std::replace(s.knob.begin(), s.knob.end(), '_', '-');
    const auto known = sweep_knobs();
    if (std::find(known.begin(), known.end(), s.knob) == known.end()) {
        std::string names;
        for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
        throw BadInput("--sweep: unknown knob '" + s.knob + "' (known: " + names + ")");
    }
    std::stringstream in(text.substr(eq + 1));
    for (std::string v; std::getline(in, v, ',');)
        if (!v.empty()) s.values.push_back(v);
    if (s.values.empty()) throw BadInput("--sweep " + s.knob + ": no values");
    return s;
}

}  // namespace kvscope
