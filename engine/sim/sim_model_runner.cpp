#include "sim/sim_model_runner.h"

#include <algorithm>
#include <cmath>

namespace kvscope {

StepWork step_work(const SchedulerOutput& out, int block_size) {
    StepWork w;
    w.block_size = block_size;
    w.seqs.reserve(out.scheduled.size() + out.padding.size());
    for (const ScheduledRequest& s : out.scheduled) {
        w.seqs.push_back({s.num_new_tokens, s.request->num_computed_tokens + s.num_new_tokens});
        w.num_sampled += s.samples;
    }
    // Naive padding rows: one query token each over their context's cached tokens.
    for (const PaddingRows& p : out.padding)
        for (int i = 0; i < p.num_tokens; ++i) w.seqs.push_back({1, p.context->num_computed_tokens});
    return w;
}

SimModelRunner::SimModelRunner(const Model& model, SimBackend& backend, EngineClock& clock,
                               StepTimeModel step_time_model, int num_blocks, int block_size, int max_num_tokens,
                               int max_num_logits, DType kv_dtype)
    : model_(model), backend_(backend), clock_(clock), step_time_(std::move(step_time_model)) {
    ensure_capacity(max_num_tokens, max_num_logits);
    reset_kv_cache(num_blocks, block_size, kv_dtype);
}

void SimModelRunner::update_memory() {
    backend_.set_memory_in_use(static_cast<int64_t>(step_time_.weight_bytes()),
                               activation_bytes_,
                               static_cast<int64_t>(layout_.total_bytes()));
}

void SimModelRunner::ensure_capacity(int max_num_tokens, int max_num_logits) {
    max_num_tokens_ = std::max(max_num_tokens_, max_num_tokens);
    max_num_logits_ = std::max(max_num_logits_, std::min(max_num_logits, max_num_tokens));
    // Every GPU of the group holds its own activations (the weights and the KV pool are sharded).
    activation_bytes_ = step_time_.activation_peak_bytes(max_num_tokens_, max_num_logits_) * step_time_.tensor_parallel_size();
    update_memory();
}

void SimModelRunner::reset_kv_cache(int num_blocks, int block_size, DType kv_dtype) {
    const ModelConfig& c = model_.config;
    layout_ = {c.num_layers, num_blocks, block_size, c.num_kv_heads, c.head_dim, kv_dtype};
    step_time_.set_kv_dtype_bytes(static_cast<double>(dtype_block_bytes(kv_dtype)));
    update_memory();
}

void SimModelRunner::add_request(const Request& r, uint64_t seed) {
    Stream s;
    s.rng.seed(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    s.stop_length = 1 + static_cast<int>(std::min(1e9, -kMeanStopLength * std::log1p(-u(s.rng))));
    streams_[r.request_id] = std::move(s);
}

void SimModelRunner::remove_request(const std::string& request_id) { streams_.erase(request_id); }

int32_t SimModelRunner::next_token(const Request& r) {
    Stream& s = streams_.at(r.request_id);
    const SamplingParams& p = r.sampling_params;
    const std::vector<int32_t>& eos = model_.config.eos_token_ids;
    const int index = r.num_output_tokens();  // of the token drawn now
    if (!p.ignore_eos && !eos.empty() && index + 1 >= std::max(s.stop_length, p.min_tokens + 1)) return eos.front();
    // Printable ASCII: every dummy: model's byte-level tokenizer decodes it, and it is never EOS.
    return static_cast<int32_t>(32 + s.rng() % 95);
}

SamplerOutput SimModelRunner::execute(const SchedulerOutput& out, const KvCacheManager& kv) {
    last_ = step_time_.predict(step_work(out, kv.block_size()));
    busy_seconds_ += last_.total();
    SamplerOutput sampled;
    for (const ScheduledRequest& s : out.scheduled)
        if (s.samples) {
            sampled.token_ids.push_back(next_token(*s.request));
            sampled.logprobs.emplace_back();  // no logits to take them from
        }
    clock_.advance(last_.total());
    return sampled;
}

}  // namespace kvscope
