#include "bench/workload.h"

#include "util/errors.h"
#include "util/json_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <random>

namespace kvscope {

namespace {

// Token ids a random prompt may use: the tokenizer's ids that are not special (no BOS, EOS, control).
std::vector<int32_t> ordinary_ids(const Tokenizer& tok, int vocab_size) {
    std::vector<int32_t> ids;
    const int n = std::min(tok.vocab_size(), vocab_size);
    for (int32_t id = 0; id < n; ++id)
        if (!tok.is_special(id) && !tok.is_eos(id) && id != tok.bos_id()) ids.push_back(id);
    if (ids.empty()) throw BadInput("the tokenizer has no ordinary token ids to build random prompts from");
    return ids;
}

std::vector<int32_t> random_tokens(int n, const std::vector<int32_t>& ids, std::mt19937_64& rng) {
    std::uniform_int_distribution<size_t> pick(0, ids.size() - 1);
    std::vector<int32_t> out(static_cast<size_t>(n));
    for (auto& t : out) t = ids[pick(rng)];
    return out;
}

// vLLM's random dataset: uniform integers in [floor(L * (1 - r)), floor(L * (1 + r))], at least 1.
int sample_len(int len, double ratio, std::mt19937_64& rng) {
    const int lo = std::max(1, static_cast<int>(len * (1.0 - ratio)));
    const int hi = std::max(lo, static_cast<int>(len * (1.0 + ratio)));
    return std::uniform_int_distribution<int>(lo, hi)(rng);
}

}  // namespace

void check_workload_options(const WorkloadOptions& o) {
    if (o.num_prompts < 1) throw BadInput("--num-prompts must be >= 1 (got " + std::to_string(o.num_prompts) + ")");
    if (o.input_len < 1) throw BadInput("--input-len must be >= 1 (got " + std::to_string(o.input_len) + ")");
    if (o.output_len < 1) throw BadInput("--output-len must be >= 1 (got " + std::to_string(o.output_len) + ")");
    if (!(o.range_ratio >= 0 && o.range_ratio < 1))
        throw BadInput("--range-ratio must be in [0, 1) (got " + std::to_string(o.range_ratio) + ")");
    if (!(o.output_range_ratio < 1) || (o.output_range_ratio < 0 && o.output_range_ratio != -1))
        throw BadInput("--output-range-ratio must be in [0, 1) (got " + std::to_string(o.output_range_ratio) + ")");
    if (o.prefix_len < 0) throw BadInput("--prefix-len must be >= 0 (got " + std::to_string(o.prefix_len) + ")");
}

void check_prompts_fit(const WorkloadOptions& o, int max_model_len) {
    if (o.dataset == "sharegpt") return;
    const int64_t prefix = o.dataset == "shared-prefix" ? (o.prefix_len > 0 ? o.prefix_len : o.input_len) : 0;
    const int64_t shortest = prefix + std::max(1, static_cast<int>(o.input_len * (1.0 - o.range_ratio)));
    if (shortest >= max_model_len)
        throw BadInput("prompts of at least " + std::to_string(shortest) + " tokens (" +
                       (prefix > 0 ? "--prefix-len " + std::to_string(prefix) + " and " : std::string()) + "--input-len " +
                       std::to_string(o.input_len) + ") do not fit max_model_len " + std::to_string(max_model_len) +
                       ": every request would be refused (lower them or raise --max-model-len)");
}

namespace {

std::vector<BenchRequest> random_workload(const WorkloadOptions& o, const std::vector<int32_t>& ids,
                                          const std::vector<int32_t>& prefix, std::mt19937_64& rng) {
    std::vector<BenchRequest> out;
    for (int i = 0; i < o.num_prompts; ++i) {
        BenchRequest r;
        r.prompt_token_ids = prefix;
        const auto suffix = random_tokens(sample_len(o.input_len, o.range_ratio, rng), ids, rng);
        r.prompt_token_ids.insert(r.prompt_token_ids.end(), suffix.begin(), suffix.end());
        r.output_len = sample_len(o.output_len, o.output_range_ratio >= 0 ? o.output_range_ratio : o.range_ratio, rng);
        out.push_back(std::move(r));
    }
    return out;
}

// The first human turn and the first gpt reply after it; false when the conversation has neither.
bool first_exchange(const nlohmann::json& conv, std::string& prompt, std::string& reply) {
    if (!conv.is_object() || !conv.contains("conversations") || !conv["conversations"].is_array()) return false;
    bool have_prompt = false;
    for (const auto& turn : conv["conversations"]) {
        if (!turn.is_object() || !turn.contains("value") || !turn["value"].is_string()) continue;
        const std::string from = turn.value("from", "");
        if (!have_prompt && from == "human") prompt = turn["value"], have_prompt = true;
        else if (have_prompt && from == "gpt") return reply = turn["value"], true;
    }
    return false;
}

// vLLM's ShareGPT sampling: shuffle with the seed, skip pairs with a prompt or reply under 4 tokens or
// too long, and repeat the valid ones (oversampling) when the file has fewer than num_prompts.
std::vector<BenchRequest> sharegpt_workload(const WorkloadOptions& o, const Tokenizer& tok, std::mt19937_64& rng) {
    if (o.dataset_path.empty()) throw BadInput("--dataset sharegpt needs --dataset-path FILE");
    nlohmann::json data = read_json_file(o.dataset_path, "--dataset-path");
    if (!data.is_array()) throw BadInput(o.dataset_path + ": expected a JSON array of {\"conversations\": [...]}");
    std::vector<BenchRequest> valid;
    for (const auto& conv : data) {
        std::string prompt, reply;
        if (!first_exchange(conv, prompt, reply)) continue;
        BenchRequest r{tok.encode(prompt, true), static_cast<int>(tok.encode(reply, false).size())};
        if (o.output_len_fixed) r.output_len = o.output_len;
        const int len = static_cast<int>(r.prompt_token_ids.size());
        if (len < 4 || r.output_len < 4 || len + r.output_len > o.max_model_len) continue;
        valid.push_back(std::move(r));
    }
    if (valid.empty())
        throw BadInput(o.dataset_path + ": no usable conversation (each needs a human turn and a gpt reply of >= 4 "
                                        "tokens that fit max_model_len " + std::to_string(o.max_model_len) + ")");
    std::shuffle(valid.begin(), valid.end(), rng);
    std::vector<BenchRequest> out;
    for (int i = 0; i < o.num_prompts; ++i) out.push_back(valid[static_cast<size_t>(i) % valid.size()]);
    return out;
}

}  // namespace

std::vector<BenchRequest> make_workload(const WorkloadOptions& o, const Tokenizer& tok, int vocab_size) {
    check_workload_options(o);
    if (o.dataset == "sharegpt") {
        std::mt19937_64 rng(o.seed);
        return sharegpt_workload(o, tok, rng);
    }
    return make_workload(o, ordinary_ids(tok, vocab_size));
}

std::vector<BenchRequest> make_workload(const WorkloadOptions& o, const std::vector<int32_t>& ids) {
    check_workload_options(o);
    if (o.dataset == "sharegpt") throw BadInput("--dataset sharegpt needs a tokenizer (--tokenizer DIR|FILE)");
    if (ids.empty()) throw BadInput("no token ids to build random prompts from");
    std::mt19937_64 rng(o.seed);
    if (o.dataset == "random") return random_workload(o, ids, {}, rng);
    if (o.dataset == "shared-prefix") {
        const int prefix_len = o.prefix_len > 0 ? o.prefix_len : o.input_len;
        return random_workload(o, ids, random_tokens(prefix_len, ids, rng), rng);
    }
    throw BadInput("--dataset: unknown dataset '" + o.dataset + "' (random, shared-prefix, sharegpt)");
}

}  // namespace kvscope
