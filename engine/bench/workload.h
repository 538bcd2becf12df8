// Benchmark workloads (vLLM's benchmark datasets): random, shared-prefix and ShareGPT-format
// conversations, turned into prompt token ids and forced output lengths. Seeded: the same options and
// seed give the same requests. Pure functions; no engine state.
#pragma once

#include "model/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

// One benchmark request (vLLM's SampleRequest): the prompt and the number of tokens to generate.
struct BenchRequest {
    std::vector<int32_t> prompt_token_ids;
    int output_len = 0;
};

struct WorkloadOptions {
    std::string dataset = "random";  // random | shared-prefix | sharegpt
    std::string dataset_path;        // sharegpt: the JSON file
    int num_prompts = 1000;
    int input_len = 1024;            // random: around this; shared-prefix: the suffix
    int output_len = 128;            // sharegpt: used only when output_len_fixed
    bool output_len_fixed = false;   // sharegpt: force output_len instead of the reply's length
    double range_ratio = 0.0;        // lengths uniform in [L * (1 - r), L * (1 + r)]
    double output_range_ratio = -1;  // the output lengths' own ratio; < 0: range_ratio
    int prefix_len = 0;              // shared-prefix: the common prefix
    int max_model_len = 2048;        // sharegpt: conversations longer than this are skipped
    uint64_t seed = 0;
};

// Throws BadInput naming the option or file when the workload cannot be built.
// Throws BadInput naming the first option out of range (make_workload checks them first too).
void check_workload_options(const WorkloadOptions& options);
// Throws BadInput when even the shortest prompt of a random or shared-prefix workload (its prefix and the
// lower end of --input-len's range) leaves no room in max_model_len for a token: every request would be
// refused, after gigabytes of prompts were built for a mistyped length. sharegpt skips what does not fit.
void check_prompts_fit(const WorkloadOptions& options, int max_model_len);
std::vector<BenchRequest> make_workload(const WorkloadOptions& options, const Tokenizer& tokenizer, int vocab_size);
// The random and shared-prefix datasets drawn from `ordinary_ids` (for a remote engine whose vocabulary
// is known only through its /tokenize); sharegpt needs a tokenizer and is refused (BadInput).
std::vector<BenchRequest> make_workload(const WorkloadOptions& options, const std::vector<int32_t>& ordinary_ids);

}  // namespace kvscope
