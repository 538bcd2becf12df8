#include "runner/input_batch.h"

#include "runner/model_runner.h"

#include <cmath>
#include <span>
#include <stdexcept>

namespace kvscope {

void InputBatch::add_request(const Request& r, uint64_t seed) {
    State& st = states_[r.request_id];
    st.seed = seed;
    st.rng.seed(seed);
}

void InputBatch::remove_request(const std::string& request_id) { states_.erase(request_id); }

void InputBatch::prepare(const SchedulerOutput& out, const KvCacheManager& kv, bool device_sampling,
                         ModelInput& input) {
    input.clear();
    input.logits_to_host = !device_sampling;
    prompt_rows_.clear();
    for (const ScheduledRequest& s : out.scheduled) {
        const Request& r = *s.request;
        if (r.sampling_params.prompt_logprobs) add_prompt_rows(s, input);
        input.add_sequence(r.all_token_ids.data(), r.num_computed_tokens, s.num_new_tokens, kv.block_table(r.request_id),
                           kv.block_size(), s.samples);
        if (!s.samples) continue;
        // Log-probabilities come from the raw logits, wherever the token is chosen.
        if (r.sampling_params.logprobs) input.logits_to_host = true;
        if (!device_sampling) continue;
        // Every sampled row gets a device row; one the host must sample brings all logits back.
        const std::optional<SamplingRow> row =
            device_sampling_row(r.sampling_params, r.num_output_tokens(), states_.at(r.request_id).seed);
        if (!row) input.logits_to_host = true;
        input.sampling_rows.push_back(row.value_or(SamplingRow{}));
    }
    for (const PaddingRows& p : out.padding)
        input.add_padding(p.num_tokens, p.context->num_computed_tokens, kv.block_table(p.context->request_id));
    input.finalize();
}

void InputBatch::add_prompt_rows(const ScheduledRequest& s, ModelInput& input) {
    const Request& r = *s.request;
    State& st = states_.at(r.request_id);
    if (st.prompt_logprobs_sent) return;  // a recompute after preemption: they are out already
    // Position p's logits score prompt token p + 1; the last prompt position's sample the first output.
    const int start = r.num_computed_tokens;
    const int done = static_cast<int>(st.prompt_logprobs.size());
    if (start > done)
        throw std::logic_error("request " + r.request_id + " starts at token " + std::to_string(start) +
                               " but its prompt logprobs reach " + std::to_string(done) +
                               " (a prefix-cache hit skipped positions whose logits it needs)");
    const int end = std::min(start + s.num_new_tokens, r.num_prompt_tokens - 1);
    const int row0 = input.num_tokens() - start;  // the chunk's rows follow the step's rows so far
    for (int p = done; p < end; ++p) {
        input.prompt_logits_indices.push_back(row0 + p);
        prompt_rows_.push_back({&st, r.all_token_ids[p + 1], *r.sampling_params.prompt_logprobs});
    }
}

void InputBatch::add_prompt_logits(int first, int n, const float* logits, int vocab) {
    for (int i = 0; i < n; ++i) {
        const PromptRow& row = prompt_rows_.at(first + i);
        row.state->prompt_logprobs.push_back(compute_logprobs(
            std::span<const float>(logits + static_cast<size_t>(i) * vocab, static_cast<size_t>(vocab)), row.token_id,
            row.num_top));
    }
}

SamplerOutput InputBatch::sample(const SchedulerOutput& out, const StepOutput& step, int vocab) {
    SamplerOutput result;
    std::vector<int32_t>& tokens = result.token_ids;
    int row = 0;
    for (const ScheduledRequest& s : out.scheduled) {
        if (!s.samples) continue;
        const Request& r = *s.request;
        const SamplingParams& p = r.sampling_params;
        State& st = states_.at(r.request_id);
        const int i = row++;
        std::span<float> l;
        if (step.logits) l = {step.logits + static_cast<size_t>(i) * vocab, static_cast<size_t>(vocab)};
        // The sampled token's own log-probability needs the raw row after the processors changed it.
        if (p.logprobs && l.empty()) throw std::logic_error("a row that asked for logprobs has no logits on the host");
        if (p.logprobs) raw_.assign(l.begin(), l.end());
        auto add = [&](int32_t token) {
            tokens.push_back(token);
            result.logprobs.push_back(p.logprobs ? std::optional(compute_logprobs(raw_, token, *p.logprobs)) : std::nullopt);
            if (!p.prompt_logprobs || st.prompt_logprobs_sent) return;
            if (static_cast<int>(st.prompt_logprobs.size()) != r.num_prompt_tokens - 1)
                throw std::logic_error("request " + r.request_id + " samples with " +
                                       std::to_string(st.prompt_logprobs.size()) + " of its " +
                                       std::to_string(r.num_prompt_tokens - 1) + " prompt logprobs");
            result.prompt_logprobs.resize(tokens.size());
            result.prompt_logprobs.back() = std::move(st.prompt_logprobs);
            st.prompt_logprobs = {};
            st.prompt_logprobs_sent = true;
        };
        // The same question prepare() asked, on the same state: did the device choose this one?
        if (step.sampled_token_ids && device_sampling_row(p, r.num_output_tokens(), st.seed)) {
            add(step.sampled_token_ids[i]);
            continue;
        }
        if (l.empty()) throw std::logic_error("a row the device could not sample has no logits on the host");
        if (r.num_output_tokens() < p.min_tokens) {  // EOS and stop tokens may not end it yet
            if (!p.ignore_eos)
                for (int32_t e : tokenizer_.eos_ids()) l[e] = -INFINITY;
            for (int32_t e : p.stop_token_ids)
                if (e >= 0 && e < vocab) l[e] = -INFINITY;
        }
        for (const auto& [id, bias] : p.logit_bias)
            if (id >= 0 && id < vocab) l[id] += bias;
        const std::span<const int32_t> all(r.all_token_ids);
        add(sampler_.sample(l, p, all.first(r.num_prompt_tokens), all.subspan(r.num_prompt_tokens), st.rng));
    }
    if (!result.prompt_logprobs.empty()) result.prompt_logprobs.resize(tokens.size());
    return result;
}

}  // namespace kvscope
