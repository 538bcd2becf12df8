#include "runner/model_runner.h"

#include "util/errors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace kvscope {

namespace {
// vLLM's largest default cudagraph capture size: larger decode batches are compute-bound enough that
// launch overhead no longer shows.
constexpr int kMaxCaptureSize = 256;
}  // namespace

ModelRunner::ModelRunner(const Model& model, Backend& backend, int num_blocks, int block_size, int max_num_tokens,
                         int max_num_logits, DType kv_dtype, int max_model_len)
    : model_(model), backend_(backend), max_num_tokens_(max_num_tokens), max_num_logits_(max_num_logits),
      input_batch_(model.tokenizer) {
    const ModelConfig& c = model.config;
    inv_freq_host_ = c.rope_inv_freq(max_model_len);
    const auto& factors = model.weights.rope_freq_factors;
    for (size_t i = 0; i < factors.size() && i < inv_freq_host_.size(); ++i) inv_freq_host_[i] /= factors[i];
    inv_freq_local_host_ = c.rope_local_inv_freq();
    max_num_logits_ = std::min(max_num_logits_, max_num_tokens_);
    upload_weights();
    try {
        allocate_activations();
        reset_kv_cache(num_blocks, block_size, kv_dtype);
    } catch (...) {
        free_buffers();  // no destructor runs for a constructor that throws (a reconfiguration past memory)
        throw;
    }
}

ModelRunner::~ModelRunner() {
    drop_graphs();
    free_buffers();
}

const float* ModelRunner::upload_vector(const std::vector<float>* v) {
    return !v || v->empty() ? nullptr : backend_.upload_vector(v->data(), v->size());
}

WeightView ModelRunner::upload_matmul_weight(const WeightView& w) {
    return backend_.repack_matmul_weight(backend_.upload_weight(w));
}

void ModelRunner::upload_weights() {
    const ModelWeights& w = model_.weights;
    auto vec = [&](const std::vector<float>& v) { return upload_vector(&v); };
    auto mat = [&](const WeightView& v) { return upload_matmul_weight(v); };
    token_embedding_ = backend_.upload_weight(w.token_embedding);
    // A tied lm head shares the uploaded embedding table; a repacking backend makes its own copy for matmul.
    lm_head_ = backend_.repack_matmul_weight(w.lm_head.data == w.token_embedding.data ? token_embedding_
                                                                                      : backend_.upload_weight(w.lm_head));
    final_norm_ = vec(w.final_norm);
    for (const LayerWeights& L : w.layers)
        layers_.push_back({vec(L.attn_norm), vec(L.ffn_norm), vec(L.q_norm), vec(L.k_norm), vec(L.post_attn_norm),
                           vec(L.post_ffn_norm), upload_projections({&L.wq, &L.wk, &L.wv}, {&L.bq, &L.bk, &L.bv}),
                           upload_projections({&L.w_gate, &L.w_up}, {nullptr, nullptr}), mat(L.wo), mat(L.w_down)});
}

std::vector<ModelRunner::MatmulRun> ModelRunner::upload_projections(const std::vector<const WeightView*>& ws,
                                                                    const std::vector<const std::vector<float>*>& biases) {
    auto single = [&](size_t i) {
        MatmulRun run{upload_matmul_weight(*ws[i]), upload_vector(biases[i]), {}, {}};
        run.parts = {run.w};
        run.part_bias = {run.bias};
        return run;
    };
    std::vector<MatmulRun> runs;
    for (size_t i = 0, j; i < ws.size(); i = j) {
        const WeightView& first = *ws[i];
        auto has_bias = [&](size_t p) { return biases[p] && !biases[p]->empty(); };
        for (j = i + 1; j < ws.size() && ws[j]->dtype == first.dtype && ws[j]->cols == first.cols && has_bias(j) == has_bias(i); ++j) {}
        auto parts_of = [&](const WeightView& fused) {  // empty where the backend cannot view a part's rows
            std::vector<WeightView> parts;
            for (size_t p = i, row = 0; p < j; row += ws[p]->rows, ++p) {
                parts.push_back(backend_.weight_rows(fused, row, ws[p]->rows));
                if (!parts.back().data) return std::vector<WeightView>{};
            }
            return parts;
        };
        bool fuse = j - i > 1;
        for (size_t p = i; fuse && p < j; ++p) fuse = ws[p]->layout == WeightLayout::row_major;
        std::vector<uint8_t> host;
        WeightView fused_host{nullptr, first.dtype, 0, first.cols};
        if (fuse) {  // the parts' rows one after another, on the host, then uploaded like any weight
            const size_t row_bytes = dtype_row_bytes(first.dtype, first.cols);
            for (size_t p = i; p < j; ++p) fused_host.rows += ws[p]->rows;
            host.resize(fused_host.rows * row_bytes);
            for (size_t p = i, at = 0; p < j; at += ws[p]->rows * row_bytes, ++p)
                std::memcpy(host.data() + at, ws[p]->data, ws[p]->rows * row_bytes);
            fused_host.data = host.data();
            fuse = !parts_of(fused_host).empty();  // a row-major view the backend would refuse (offset alignment)
        }
        MatmulRun run;
        if (fuse) {
            run.w = upload_matmul_weight(fused_host);
            run.parts = parts_of(run.w);
        }
        // Parts that the repacked layout cannot start a view at (never at the shapes of real models: panels
        // need parts of whole 16 rows, interleaved groups of 8) run as separate weights.
        if (run.parts.empty()) {
            for (size_t p = i; p < j; ++p) runs.push_back(single(p));
            continue;
        }
        if (run.w.data == host.data()) fused_host_.push_back(std::move(host));  // read in place: keep it
        for (size_t p = i; p < j; ++p) run.part_bias.push_back(upload_vector(biases[p]));
        if (has_bias(i)) {  // then every part has one
            std::vector<float> bias;
            for (size_t p = i; p < j; ++p) bias.insert(bias.end(), biases[p]->begin(), biases[p]->end());
            fused_bias_host_.push_back(std::move(bias));
            run.bias = backend_.upload_vector(fused_bias_host_.back().data(), fused_bias_host_.back().size());
        }
        runs.push_back(std::move(run));
    }
    return runs;
}

void ModelRunner::project(const float* x, int T, const std::vector<MatmulRun>& runs, float** outs) {
    float* fused = fused_out_;
    for (const MatmulRun& run : runs) {
        if (T == 1 && run.parts.size() > 1) {
            backend_.matmul(x, 1, run.w, run.bias, fused);
            for (const WeightView& part : run.parts) {
                *outs++ = fused;
                fused += part.rows;
            }
            continue;
        }
        for (size_t p = 0; p < run.parts.size(); ++p) backend_.matmul(x, T, run.parts[p], run.part_bias[p], *outs++);
    }
}

float* ModelRunner::buffer(size_t floats) {
    void* p = backend_.allocate(floats * sizeof(float));
    allocations_.push_back(p);
    activation_bytes_ += floats * sizeof(float);
    return static_cast<float*>(p);
}

void ModelRunner::allocate_activations() {
    const ModelConfig& c = model_.config;
    const size_t T = max_num_tokens_, S = max_num_logits_;
    x_ = buffer(T * c.hidden_size);
    xb_ = buffer(T * c.hidden_size);
    q_ = buffer(T * c.q_size());
    att_ = buffer(T * c.q_size());
    k_ = buffer(T * c.kv_size());
    v_ = buffer(T * c.kv_size());
    gate_ = buffer(T * c.intermediate_size);
    up_ = buffer(T * c.intermediate_size);
    fused_out_ = buffer(std::max<size_t>(c.q_size() + 2 * c.kv_size(), 2 * static_cast<size_t>(c.intermediate_size)));
    xs_ = buffer(S * c.hidden_size);
    logits_ = buffer(S * static_cast<size_t>(c.vocab_size));
    inv_freq_ = buffer(inv_freq_host_.size());
    backend_.copy_to_device(inv_freq_, inv_freq_host_.data(), inv_freq_host_.size() * sizeof(float));
    if (!inv_freq_local_host_.empty()) {
        inv_freq_local_ = buffer(inv_freq_local_host_.size());
        backend_.copy_to_device(inv_freq_local_, inv_freq_local_host_.data(), inv_freq_local_host_.size() * sizeof(float));
    }
    auto ints = [&](size_t n) { return reinterpret_cast<int32_t*>(buffer(n)); };
    d_tokens_ = ints(T);
    d_positions_ = ints(T);
    d_qsl_ = ints(T + 1);
    d_seq_lens_ = ints(T);
    d_logits_idx_ = ints(S);
    d_slots_ = reinterpret_cast<int64_t*>(buffer(2 * T));
    static_assert(sizeof(SamplingRow) % sizeof(float) == 0);
    d_sampling_rows_ = reinterpret_cast<SamplingRow*>(buffer(S * (sizeof(SamplingRow) / sizeof(float))));
    d_sampled_ = ints(S);
    logits_host_.resize(S * static_cast<size_t>(c.vocab_size));
    sampled_host_.resize(S);
}

void ModelRunner::ensure_capacity(int max_num_tokens, int max_num_logits) {
    if (max_num_tokens <= max_num_tokens_ && max_num_logits <= max_num_logits_) return;
    drop_graphs();  // they point into the buffers freed here
    for (void* p : allocations_) backend_.deallocate(p);
    allocations_.clear();
    activation_bytes_ = 0;
    max_num_tokens_ = std::max(max_num_tokens, max_num_tokens_);
    max_num_logits_ = std::max(max_num_logits, max_num_logits_);
    allocate_activations();
    configure_graphs();
}

void ModelRunner::free_buffers() {
    for (void* p : allocations_) backend_.deallocate(p);
    allocations_.clear();
    if (d_block_tables_) backend_.deallocate(d_block_tables_);
    d_block_tables_ = nullptr;
    if (d_graph_block_tables_) backend_.deallocate(d_graph_block_tables_);
    d_graph_block_tables_ = nullptr;
    if (kv_cache_) backend_.deallocate(kv_cache_);
    kv_cache_ = nullptr;
}

void ModelRunner::profile_run() {
    const int T = max_num_tokens_, S = std::max(1, std::min(max_num_logits_, T));
    const int bs = layout_.block_size;
    ModelInput in;
    in.clear();
    std::vector<int32_t> tokens(T, 0);
    int next_block = 0;
    std::vector<std::pair<int, std::vector<int32_t>>> seqs;  // (length, block table)
    for (int i = 0; i < S; ++i) {
        const int len = T / S + (i < T % S ? 1 : 0);
        std::vector<int32_t> table((len + bs - 1) / bs);
        for (auto& b : table) b = next_block++;
        seqs.emplace_back(len, std::move(table));
    }
    reset_kv_cache(next_block, bs, layout_.kv_dtype);
    for (const auto& [len, table] : seqs) in.add_sequence(tokens.data(), 0, len, table, bs, true);
    in.finalize();
    execute(in);
}

void ModelRunner::check_logits_finite(int32_t token) {
    ModelInput in;
    in.clear();
    in.add_sequence(&token, 0, 1, {0}, layout_.block_size, true);
    in.finalize();
    const StepOutput o = execute(in);
    if (!o.logits) return;  // (a row without sampling comes back to the host: this is a safeguard)
    const int vocab = model_.config.vocab_size;
    for (int i = 0; i < vocab; ++i)
        if (!std::isfinite(o.logits[i]))
            throw BadInput(model_.source + ": the model's logits for token " + std::to_string(token) +
                           " are not finite (" + (std::isnan(o.logits[i]) ? "NaN" : "Inf") + " for token id " +
                           std::to_string(i) + "): its weights hold NaN or Inf values (a damaged file?)");
}

void ModelRunner::reset_kv_cache(int num_blocks, int block_size, DType kv_dtype) {
    const ModelConfig& c = model_.config;
    if (!backend_.supports_kv_dtype(kv_dtype))
        throw std::invalid_argument("ModelRunner: the " + backend_.name() + " backend cannot hold a " +
                                    std::string(dtype_name(kv_dtype)) + " KV cache");
    drop_graphs();  // they write and read the old cache, with the old block size
    if (kv_cache_) backend_.deallocate(kv_cache_);
    kv_cache_ = nullptr;
    layout_ = KvCacheLayout{c.num_layers, num_blocks, block_size, c.num_kv_heads, c.head_dim, kv_dtype};
    kv_cache_ = backend_.allocate(std::max<size_t>(layout_.total_bytes(), 64));
    configure_graphs();
}

void ModelRunner::set_cuda_graphs(bool enabled, int max_model_len) {
    const bool on = enabled && max_model_len > 0 && backend_.supports_graphs();
    if (on == graphs_enabled_ && max_model_len == graph_max_model_len_) return;
    graphs_enabled_ = on;
    graph_max_model_len_ = max_model_len;
    configure_graphs();
}

void ModelRunner::configure_graphs() {
    drop_graphs();
    capture_sizes_.clear();
    if (d_graph_block_tables_) backend_.deallocate(d_graph_block_tables_);
    d_graph_block_tables_ = nullptr;
    if (!graphs_enabled_) return;
    // A padded step must fit the buffers: its rows are tokens and logits rows alike.
    const int cap = std::min({max_num_tokens_, max_num_logits_, kMaxCaptureSize});
    if (cap < 1) return;
    for (int b = 1; b < cap; b *= 2) capture_sizes_.push_back(b);
    capture_sizes_.push_back(cap);
    // No sequence holds more blocks than the pool has, nor more tokens than max_model_len.
    const int bs = layout_.block_size;
    graph_max_blocks_ = std::max(1, std::min(layout_.num_blocks, (graph_max_model_len_ + bs - 1) / bs));
    graph_max_seq_len_ = static_cast<int>(std::min<int64_t>(graph_max_model_len_, static_cast<int64_t>(graph_max_blocks_) * bs));
    d_graph_block_tables_ =
        static_cast<int32_t*>(backend_.allocate(static_cast<size_t>(cap) * graph_max_blocks_ * sizeof(int32_t)));
}

void ModelRunner::drop_graphs() {
    for (const auto& [key, id] : graphs_)
        if (id >= 0) backend_.destroy_graph(id);
    graphs_.clear();
}

int ModelRunner::num_graphs() const {
    return static_cast<int>(std::count_if(graphs_.begin(), graphs_.end(), [](const auto& g) { return g.second >= 0; }));
}

SamplerOutput ModelRunner::execute(const SchedulerOutput& out, const KvCacheManager& kv) {
    input_batch_.prepare(out, kv, backend_.supports_sampling(), step_input_);
    const StepOutput step = execute(step_input_);
    const int vocab = model_.config.vocab_size;
    prompt_logits(step_input_, [&](int first, int n, const float* logits) {
        input_batch_.add_prompt_logits(first, n, logits, vocab);
    });
    return input_batch_.sample(out, step, vocab);
}

StepOutput ModelRunner::execute(const ModelInput& in) {
    const int T = in.num_tokens(), S = static_cast<int>(in.logits_indices.size());
    if (T == 0) return {};
    if (T > max_num_tokens_ || S > max_num_logits_)
        throw std::logic_error("ModelRunner: step of " + std::to_string(T) + " tokens / " + std::to_string(S) +
                               " logits exceeds the buffers (" + std::to_string(max_num_tokens_) + " / " +
                               std::to_string(max_num_logits_) + ")");
    const bool sample = !in.sampling_rows.empty();
    if (sample && (static_cast<int>(in.sampling_rows.size()) != S || !backend_.supports_sampling()))
        throw std::logic_error("ModelRunner: " + std::to_string(in.sampling_rows.size()) + " sampling rows for " +
                               std::to_string(S) + " logits rows on the " + backend_.name() + " backend");

    if (const int batch = graph_batch_size(in)) {
        run_graph(in, batch);
    } else {
        if (in.block_tables.size() > block_tables_capacity_) {
            if (d_block_tables_) backend_.deallocate(d_block_tables_);
            block_tables_capacity_ = std::max(in.block_tables.size(), block_tables_capacity_ * 2);
            d_block_tables_ = static_cast<int32_t*>(backend_.allocate(block_tables_capacity_ * sizeof(int32_t)));
        }
        upload_inputs(in, d_block_tables_);
        forward(metadata(in, d_block_tables_, *std::max_element(in.seq_lens.begin(), in.seq_lens.end())), S, sample);
    }

    StepOutput out;
    if (S == 0) return out;
    if (sample) {
        backend_.copy_to_host(sampled_host_.data(), d_sampled_, static_cast<size_t>(S) * sizeof(int32_t));
        out.sampled_token_ids = sampled_host_.data();
    }
    if (!sample || in.logits_to_host) {
        backend_.copy_to_host(logits_host_.data(), logits_,
                              static_cast<size_t>(S) * model_.config.vocab_size * sizeof(float));
        out.logits = logits_host_.data();
    }
    return out;
}

void ModelRunner::upload_inputs(const ModelInput& in, int32_t* block_tables) {
    const int T = in.num_tokens(), S = static_cast<int>(in.logits_indices.size());
    backend_.copy_to_device(d_tokens_, in.token_ids.data(), T * sizeof(int32_t));
    backend_.copy_to_device(d_positions_, in.positions.data(), T * sizeof(int32_t));
    backend_.copy_to_device(d_slots_, in.slot_mapping.data(), T * sizeof(int64_t));
    backend_.copy_to_device(d_qsl_, in.query_start_loc.data(), in.query_start_loc.size() * sizeof(int32_t));
    backend_.copy_to_device(d_seq_lens_, in.seq_lens.data(), in.seq_lens.size() * sizeof(int32_t));
    if (S) backend_.copy_to_device(d_logits_idx_, in.logits_indices.data(), S * sizeof(int32_t));
    backend_.copy_to_device(block_tables, in.block_tables.data(), in.block_tables.size() * sizeof(int32_t));
    if (!in.sampling_rows.empty())
        backend_.copy_to_device(d_sampling_rows_, in.sampling_rows.data(), in.sampling_rows.size() * sizeof(SamplingRow));
}

AttentionMetadata ModelRunner::metadata(const ModelInput& in, const int32_t* block_tables, int max_seq_len) const {
    AttentionMetadata meta;
    meta.num_tokens = in.num_tokens();
    meta.num_seqs = in.num_seqs();
    meta.query_start_loc = d_qsl_;
    meta.seq_lens = d_seq_lens_;
    meta.block_tables = block_tables;
    meta.max_blocks_per_seq = in.max_blocks_per_seq;
    meta.slot_mapping = d_slots_;
    meta.max_seq_len = max_seq_len;
    return meta;
}

void ModelRunner::forward(const AttentionMetadata& meta, int S, bool sample) {
    const ModelConfig& c = model_.config;
    const int T = meta.num_tokens;
    const RopeParams rope{inv_freq_, c.head_dim, c.head_dim, c.rope_neox};
    // Gemma 3's windowed layers rotate with their own base.
    const RopeParams rope_local{inv_freq_local_ ? inv_freq_local_ : inv_freq_, c.head_dim, c.head_dim, c.rope_neox};
    const int h = c.hidden_size;
    const int64_t Th = static_cast<int64_t>(T) * h;

    backend_.embedding(token_embedding_, d_tokens_, T, x_);
    if (c.scale_embeddings) backend_.scale(x_, Th, std::sqrt(static_cast<float>(h)));
    for (int l = 0; l < c.num_layers; ++l) {
        const LayerOnDevice& L = layers_[l];
        const AttentionParams attention{c.attention_scale(), c.layer_window(l), c.attn_logit_softcapping};
        backend_.rms_norm(x_, L.attn_norm, T, h, c.rms_norm_eps, xb_);
        float* qkv[3] = {q_, k_, v_};
        project(xb_, T, L.qkv, qkv);
        float *q = qkv[0], *k = qkv[1], *v = qkv[2];
        if (L.q_norm) {  // Qwen3: each head's q and k normalised before RoPE (rows of head_dim)
            backend_.rms_norm(q, L.q_norm, T * c.num_heads, c.head_dim, c.rms_norm_eps, q);
            backend_.rms_norm(k, L.k_norm, T * c.num_kv_heads, c.head_dim, c.rms_norm_eps, k);
        }
        backend_.rope(q, k, d_positions_, T, c.num_heads, c.num_kv_heads, attention.sliding_window ? rope_local : rope);
        backend_.write_kv(k, v, d_slots_, T, layout_, kv_cache_, l);
        backend_.paged_attention(q, meta, layout_, kv_cache_, l, c.num_heads, attention, att_);
        backend_.matmul(att_, T, L.wo, nullptr, xb_);
        if (L.post_attn_norm) backend_.rms_norm(xb_, L.post_attn_norm, T, h, c.rms_norm_eps, xb_);
        backend_.add(x_, xb_, Th);
        backend_.rms_norm(x_, L.ffn_norm, T, h, c.rms_norm_eps, xb_);
        float* gate_up[2] = {gate_, up_};  // q, k and v are spent: a single-token step reuses fused_out_
        project(xb_, T, L.gate_up, gate_up);
        float *gate = gate_up[0], *up = gate_up[1];
        const int64_t Tf = static_cast<int64_t>(T) * c.intermediate_size;
        if (c.gelu_tanh)
            backend_.gelu_tanh_mul(gate, up, Tf, gate);
        else
            backend_.silu_mul(gate, up, Tf, gate);
        backend_.matmul(gate, T, L.w_down, nullptr, xb_);
        if (L.post_ffn_norm) backend_.rms_norm(xb_, L.post_ffn_norm, T, h, c.rms_norm_eps, xb_);
        backend_.add(x_, xb_, Th);
    }
    if (S == 0) return;
    // Only the rows that sample need the final norm and the (large) vocabulary projection.
    project_rows(S);
    if (sample) backend_.sample(logits_, S, c.vocab_size, d_sampling_rows_, d_sampled_);
}

void ModelRunner::project_rows(int n) {
    const ModelConfig& c = model_.config;
    const int h = c.hidden_size;
    backend_.gather_rows(x_, d_logits_idx_, n, h, xs_);
    backend_.rms_norm(xs_, final_norm_, n, h, c.rms_norm_eps, xb_);
    backend_.matmul(xb_, n, lm_head_, nullptr, logits_);
    if (c.final_logit_softcapping > 0)
        backend_.softcap(logits_, static_cast<int64_t>(n) * c.vocab_size, c.final_logit_softcapping);
}

void ModelRunner::prompt_logits(const ModelInput& in, const std::function<void(int, int, const float*)>& take) {
    const int rows = static_cast<int>(in.prompt_logits_indices.size());
    const size_t vocab = model_.config.vocab_size;
    // The logits buffer holds max_num_logits_ rows: a long prompt goes through it in pieces, so asking for
    // prompt logprobs costs time (the lm_head over every prompt position) but no memory.
    if (rows > 0 && prompt_logits_host_.size() < static_cast<size_t>(max_num_logits_) * vocab)  // buffers may grow
        prompt_logits_host_.resize(static_cast<size_t>(max_num_logits_) * vocab);
    for (int first = 0; first < rows; first += max_num_logits_) {
        const int n = std::min(max_num_logits_, rows - first);
        backend_.copy_to_device(d_logits_idx_, in.prompt_logits_indices.data() + first, n * sizeof(int32_t));
        project_rows(n);
        backend_.copy_to_host(prompt_logits_host_.data(), logits_, static_cast<size_t>(n) * vocab * sizeof(float));
        take(first, n, prompt_logits_host_.data());
    }
}

int ModelRunner::graph_batch_size(const ModelInput& in) const {
    if (capture_sizes_.empty()) return 0;
    const int T = in.num_tokens();
    if (T > capture_sizes_.back() || in.num_seqs() != T || static_cast<int>(in.logits_indices.size()) != T ||
        in.max_blocks_per_seq > graph_max_blocks_)
        return 0;
    for (int i = 0; i < T; ++i)
        if (in.query_start_loc[i + 1] != i + 1 || in.logits_indices[i] != i || in.seq_lens[i] > graph_max_seq_len_)
            return 0;
    const int batch = *std::lower_bound(capture_sizes_.begin(), capture_sizes_.end(), T);
    const auto it = graphs_.find(graph_key(batch, !in.sampling_rows.empty()));
    return it != graphs_.end() && it->second < 0 ? 0 : batch;
}

void ModelRunner::run_graph(const ModelInput& in, int batch) {
    in.pad_decode_to(batch, graph_max_blocks_, graph_input_);
    upload_inputs(graph_input_, d_graph_block_tables_);
    const bool sample = !in.sampling_rows.empty();
    const int key = graph_key(batch, sample);
    if (const auto it = graphs_.find(key); it != graphs_.end()) {
        backend_.replay(it->second);
        ++num_graph_replays_;
        return;
    }
    // First step of this shape: run it op by op (this computes the step, and grows the backend's scratch
    // to these shapes, which a capture may not do), then record the very same ops for the next ones.
    const AttentionMetadata meta = metadata(graph_input_, d_graph_block_tables_, graph_max_seq_len_);
    forward(meta, batch, sample);
    // A capture that fails (an op that cannot be recorded, or a graph the driver will not instantiate)
    // costs nothing beyond this step: the step's results are already computed, the shape is marked
    // eager-only so later steps do not retry, and serving goes on.
    try {
        backend_.begin_capture();
    } catch (const std::exception& e) {
        capture_failed(batch, sample, std::string("begin_capture: ") + e.what());
        return;
    }
    try {
        forward(meta, batch, sample);
    } catch (const std::exception& e) {
        const int partial = backend_.end_capture();
        if (partial >= 0) backend_.destroy_graph(partial);
        capture_failed(batch, sample, e.what());
        return;
    }
    const int graph = backend_.end_capture();
    if (graph < 0) {
        capture_failed(batch, sample, backend_.last_capture_error());
        return;
    }
    graphs_[key] = graph;
}

void ModelRunner::capture_failed(int batch, bool sample, const std::string& why) {
    graphs_[graph_key(batch, sample)] = -1;
    if (!graph_capture_error_.empty()) return;  // report why once, not once per shape
    graph_capture_error_ = "graph capture of decode batch " + std::to_string(batch) +
                           (sample ? " (device sampling)" : "") + " failed: " + (why.empty() ? "no reason given" : why) +
                           "; shapes that fail run op by op";
    std::fprintf(stderr, "kvscope: %s\n", graph_capture_error_.c_str());
}

}  // namespace kvscope
