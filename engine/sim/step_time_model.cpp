#include "sim/step_time_model.h"

#include "util/errors.h"
#include "util/json_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace kvscope {

void StepTimeConstants::validate() const {
    const auto fraction = [](const char* name, double v) {
        if (!(v > 0 && v <= 1)) throw BadInput(std::string("sim calibration: ") + name + " must be in (0, 1], got " + std::to_string(v));
    };
    fraction("mfu_linear", mfu_linear);
    fraction("bw_efficiency_linear", bw_efficiency_linear);
    fraction("mfu_attention", mfu_attention);
    fraction("bw_efficiency_attention", bw_efficiency_attention);
    if (!(step_overhead >= 0 && step_overhead < 1)) throw BadInput("sim calibration: step_overhead_us must be in [0, 1e6)");
    if (!(per_seq_overhead >= 0 && per_seq_overhead < 1)) throw BadInput("sim calibration: per_seq_overhead_us must be in [0, 1e6)");
    if (non_torch_bytes < 0) throw BadInput("sim calibration: non_torch_mib must be >= 0");
}

StepTimeConstants read_calibration(const std::string& path, const std::string& gpu) {
    const nlohmann::json j = read_json_file(path, "sim calibration");
    if (!j.is_object()) throw BadInput("sim calibration " + path + ": expected a JSON object");
    StepTimeConstants k;
    k.source = "calibration file " + path;
    const auto number = [&](const std::string& key) {
        if (!j[key].is_number()) throw BadInput("sim calibration " + path + ": " + key + " must be a number");
        return j[key].get<double>();
    };
    for (const auto& [key, value] : j.items()) {
        if (key == "mfu_linear") k.mfu_linear = number(key);
        else if (key == "bw_efficiency_linear") k.bw_efficiency_linear = number(key);
        else if (key == "mfu_attention") k.mfu_attention = number(key);
        else if (key == "bw_efficiency_attention") k.bw_efficiency_attention = number(key);
        else if (key == "step_overhead_us") k.step_overhead = number(key) * 1e-6;
        else if (key == "per_seq_overhead_us") k.per_seq_overhead = number(key) * 1e-6;
        else if (key == "allreduce_latency_us") k.allreduce_latency = number(key) * 1e-6;
        else if (key == "non_torch_mib") k.non_torch_bytes = static_cast<int64_t>(number(key) * 1048576.0);
        else if (key == "gpu") {
            if (!value.is_string()) throw BadInput("sim calibration " + path + ": gpu must be a string");
            if (value.get<std::string>() != gpu)
                throw BadInput("sim calibration " + path + ": measured on " + value.get<std::string>() +
                               ", not on the simulated " + gpu);
        } else if (key == "source") {
            if (!value.is_string()) throw BadInput("sim calibration " + path + ": source must be a string");
            k.source = value.get<std::string>() + " (" + path + ")";
        } else if (key == "fit") {  // how sim-calibrate got the numbers (sim/calibration_fit.h): for readers
            if (!value.is_object()) throw BadInput("sim calibration " + path + ": fit must be an object");
        } else if (key != "version" && key != "comment") {
            throw BadInput("sim calibration " + path + ": unknown field '" + key + "'");
        }
    }
    try {
        k.validate();
    } catch (const BadInput& e) {
        throw BadInput(path + ": " + e.what());
    }
    return k;
}

int StepWork::num_tokens() const {
    int n = 0;
    for (const SeqWork& s : seqs) n += s.query_len;
    return n;
}

StepTimeModel::StepTimeModel(const ModelConfig& model, const GpuSpec& gpu, int tensor_parallel_size,
                             StepTimeConstants constants, double weight_dtype_bytes, double kv_dtype_bytes)
    : m_(model), gpu_(gpu), tp_(std::max(1, tensor_parallel_size)), k_(std::move(constants)),
      weight_dtype_bytes_(weight_dtype_bytes), kv_dtype_bytes_(kv_dtype_bytes) {
    k_.validate();
    const double h = m_.hidden_size, q = m_.q_size(), kv = m_.kv_size(), ffn = m_.intermediate_size;
    layer_params_ = h * q + 2 * h * kv + q * h + 3 * h * ffn;  // q, k, v, o; gate, up, down
    const double lm_head = static_cast<double>(m_.vocab_size) * h;
    const double embedding = m_.tie_word_embeddings ? 0 : lm_head;
    streamed_weight_bytes_ = (layer_params_ * m_.num_layers + lm_head) * weight_dtype_bytes_;
    weight_bytes_ = streamed_weight_bytes_ + embedding * weight_dtype_bytes_;
}

std::string StepTimeModel::version() const {
    return k_.source.rfind("defaults", 0) == 0 ? kStepTimeModelVersion : std::string(kStepTimeModelVersion) + "+calibrated";
}

double StepTimeModel::linear_flops(int num_tokens, int num_sampled) const {
    return 2.0 * num_tokens * layer_params_ * m_.num_layers + 2.0 * num_sampled * m_.hidden_size * static_cast<double>(m_.vocab_size);
}

int64_t StepTimeModel::activation_peak_bytes(int max_num_tokens, int max_num_logits) const {
    // Per GPU, in BF16: the residual stream and its norm (2 x hidden), q/k/v and the attention output
    // (sharded), gate and up (sharded); the sampler's FP32 logits and probabilities over the vocabulary.
    const double T = max_num_tokens, S = max_num_logits;
    const double per_token = 2.0 * m_.hidden_size + (2.0 * m_.q_size() + 2.0 * m_.kv_size() + 2.0 * m_.intermediate_size) / tp_;
    const double bytes = T * per_token * 2.0 + S * static_cast<double>(m_.vocab_size) * 4.0 * 2.0;
    return static_cast<int64_t>(bytes) + k_.non_torch_bytes;
}

StepWorkSummary StepWork::summary() const {
    StepWorkSummary t;
    t.num_seqs = static_cast<int>(seqs.size());
    t.num_sampled = num_sampled;
    for (const SeqWork& s : seqs) {
        t.num_tokens += s.query_len;
        const double slots = static_cast<double>((s.context_len + block_size - 1) / block_size) * block_size;
        if (s.query_len <= 1) {
            t.decode_kv_tokens += slots;
        } else {
            const double q = s.query_len, prior = s.context_len - s.query_len;  // causal within the chunk
            t.prefill_attention_pairs += q * prior + q * (q + 1) / 2;
            t.prefill_kv_tokens += slots;
        }
    }
    return t;
}

StepTimeTerms StepTimeModel::terms(const StepWorkSummary& w) const {
    StepTimeTerms t;
    if (w.num_tokens == 0) return t;
    const double tp = tp_;
    const double flops = tp * gpu_.bf16_flops, bw = tp * gpu_.memory_bandwidth;
    // K and V of one token over all layers; attention FLOPs per (query, key) pair: QK^T and PV, 2 each.
    const double kv_token_bytes = 2.0 * m_.num_layers * m_.kv_size() * kv_dtype_bytes_;
    t.linear_compute = linear_flops(w.num_tokens, w.num_sampled) / flops;
    t.linear_memory = streamed_weight_bytes_ / bw;
    t.attention_compute = 4.0 * m_.num_layers * m_.q_size() * w.prefill_attention_pairs / flops;
    t.attention_prefill_memory = w.prefill_kv_tokens * kv_token_bytes / bw;
    t.attention_decode_memory = w.decode_kv_tokens * kv_token_bytes / bw;
    if (tp_ > 1) {
        const double latency = k_.allreduce_latency >= 0 ? k_.allreduce_latency : gpu_.allreduce_latency;
        const double bytes = static_cast<double>(w.num_tokens) * m_.hidden_size * 2.0;  // BF16 activations
        t.allreduce = 2.0 * m_.num_layers * (latency + 2.0 * (tp - 1) / tp * bytes / gpu_.interconnect_bandwidth);
    }
    t.num_seqs = w.num_seqs;
    return t;
}

StepTime StepTimeModel::predict(const StepTimeTerms& t, const StepTimeConstants& k) {
    StepTime s;
    if (t.linear_memory == 0) return s;  // nothing scheduled
    s.linear = std::max(t.linear_compute / k.mfu_linear, t.linear_memory / k.bw_efficiency_linear);
    s.attention = std::max(t.attention_compute / k.mfu_attention, t.attention_prefill_memory / k.bw_efficiency_attention) +
                  t.attention_decode_memory / k.bw_efficiency_attention;
    s.allreduce = t.allreduce;
    s.overhead = k.step_overhead + k.per_seq_overhead * static_cast<double>(t.num_seqs);
    return s;
}

StepTime StepTimeModel::predict(const StepWorkSummary& w) const { return predict(terms(w), k_); }

StepTime StepTimeModel::predict(const StepWork& w) const { return predict(w.summary()); }

}  // namespace kvscope
