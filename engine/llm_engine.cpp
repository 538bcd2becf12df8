#include "llm_engine.h"

#include "backend_factory.h"
#include "kv/kv_cache_dtype.h"
#include "sched/continuous_scheduler.h"
#include "sched/naive_scheduler.h"
#include "util/errors.h"
#include "util/host_memory.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace kvscope {

LlmEngine::LlmEngine(std::shared_ptr<const Model> model, const EngineConfig& config, std::unique_ptr<Backend> backend)
    : model_(std::move(model)), config_(config), backend_(std::move(backend)), t0_(std::chrono::steady_clock::now()),
      seed_rng_(config.seed) {
    config_.validate();
    if (config_.scheduler.max_model_len > model_->config.max_position_embeddings)
        throw BadInput("max_model_len " + std::to_string(config_.scheduler.max_model_len) +
                       " exceeds the model's context length " + std::to_string(model_->config.max_position_embeddings));
    if (!backend_) {
        try {
            backend_ = make_backend(config_.backend, config_.num_threads);
        } catch (const std::invalid_argument& e) {
            throw BadInput(std::string("backend: ") + e.what());
        }
    }
    build_pool(config_);
}

LlmEngine::~LlmEngine() = default;

double LlmEngine::now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

DType LlmEngine::resolve_kv_dtype(const EngineConfig& c) const {
    return resolve_kv_cache_dtype(c.kv_cache_dtype, model_->config.weight_dtype, *backend_);
}

int LlmEngine::compute_num_blocks(const EngineConfig& c, DType kv_dtype) const {
    if (c.num_blocks > 0) return c.num_blocks;
    const ModelConfig& m = model_->config;
    const int64_t bytes_per_block =
        KvCacheLayout::bytes_per_block(m.num_layers, m.num_kv_heads, m.head_dim, c.block_size, kv_dtype);
    const int64_t budget = c.kv_cache_memory > 0
                               ? c.kv_cache_memory
                               : default_kv_cache_memory(m.kv_bytes_per_token(kv_dtype), c.scheduler.max_num_seqs,
                                                         c.scheduler.max_model_len);
    const int64_t n = budget / bytes_per_block;
    if (n < 1)
        throw BadInput("KV cache budget of " + std::to_string(budget) + " bytes holds no block of " +
                       std::to_string(bytes_per_block) + " bytes (block_size " + std::to_string(c.block_size) + ")");
    return static_cast<int>(std::min<int64_t>(n, 1 << 24));
}

std::unique_ptr<Scheduler> LlmEngine::make_scheduler(const EngineConfig& c) {
    SchedulerConfig sc = c.scheduler;
    if (c.mode == "naive") {
        sc.enable_prefix_caching = false;  // the baseline has no prefix cache
        return std::make_unique<NaiveScheduler>(*kv_, sc);
    }
    return std::make_unique<ContinuousScheduler>(*kv_, sc);
}

void LlmEngine::build_pool(const EngineConfig& c) {
    const DType kv_dtype = resolve_kv_dtype(c);
    const int num_blocks = compute_num_blocks(c, kv_dtype);
    const bool caching = c.scheduler.enable_prefix_caching && c.mode == "paged";
    if (!kv_ || kv_->enable_caching() != caching)
        kv_ = std::make_unique<KvCacheManager>(num_blocks, c.block_size, caching);
    else
        kv_->reset(num_blocks, c.block_size);
    const int max_tokens = c.scheduler.max_num_batched_tokens;
    const int max_logits = std::min(c.scheduler.max_num_seqs, max_tokens);
    if (!runner_)
        runner_ = std::make_unique<ModelRunner>(*model_, *backend_, num_blocks, c.block_size, max_tokens, max_logits,
                                                kv_dtype);
    else {
        runner_->ensure_capacity(max_tokens, max_logits);
        runner_->reset_kv_cache(num_blocks, c.block_size, kv_dtype);
    }
    runner_->set_cuda_graphs(!c.enforce_eager, c.scheduler.max_model_len);
    std::deque<Request*> waiting;
    if (scheduler_) waiting = scheduler_->waiting();
    scheduler_ = make_scheduler(c);
    for (Request* r : waiting) scheduler_->add_request(r);
}

void LlmEngine::reconfigure(const EngineConfig& next) {
    // A transaction: everything is checked before anything changes. A configuration that cannot hold
    // every unfinished request is refused whole (BadInput naming the request and the shortfall), and
    // the engine goes on as it was; one that can, loses nothing (drained requests resume by recompute).
    next.validate();
    if (next.scheduler.max_model_len != config_.scheduler.max_model_len)
        throw BadInput("max_model_len cannot change while the engine runs (reload the model)");
    // Resolved before anything drains: a type the backend cannot hold throws here, and a new name for
    // the same type (fp16 -> float16, auto -> bfloat16 on BF16 weights) rebuilds nothing.
    const DType next_kv_dtype = resolve_kv_dtype(next);
    const bool rebuild = next.block_size != config_.block_size || next.kv_cache_memory != config_.kv_cache_memory ||
                         next.num_blocks != config_.num_blocks || next.mode != config_.mode ||
                         next_kv_dtype != kv_cache_dtype() ||
                         next.scheduler.enable_prefix_caching != config_.scheduler.enable_prefix_caching;
    if (!rebuild) {
        scheduler_->set_config(next.scheduler);
        runner_->ensure_capacity(next.scheduler.max_num_batched_tokens,
                                 std::min(next.scheduler.max_num_seqs, next.scheduler.max_num_batched_tokens));
        runner_->set_cuda_graphs(!next.enforce_eager, next.scheduler.max_model_len);
        config_ = next;
        return;
    }
    const int next_num_blocks = compute_num_blocks(next, next_kv_dtype);  // BadInput: the budget holds no block
    for (const auto& [id, st] : requests_)
        if (!st.request->is_finished())
            check_fits_pool(id, st.request->num_prompt_tokens, st.request->sampling_params.max_tokens, next,
                            next_num_blocks, " after the change; nothing was changed");

    // Drain: every running request gives its blocks back and waits to be recomputed.
    const double drained_at = now();
    for (const Request* r : scheduler_->running())
        requests_.at(r->request_id).metrics.preemption_times.push_back(drained_at);
    scheduler_->preempt_all();
    std::string event = "rebuild:";
    if (next.block_size != config_.block_size)
        event += " block_size " + std::to_string(config_.block_size) + " -> " + std::to_string(next.block_size);
    if (next.mode != config_.mode) event += " mode " + config_.mode + " -> " + next.mode;
    if (next_kv_dtype != kv_cache_dtype())
        event += " kv_cache_dtype " + kv_cache_dtype_name(kv_cache_dtype()) + " -> " + kv_cache_dtype_name(next_kv_dtype);
    if (next.kv_cache_memory != config_.kv_cache_memory || next.num_blocks != config_.num_blocks) event += " kv budget";
    if (next.scheduler.enable_prefix_caching != config_.scheduler.enable_prefix_caching)
        event += next.scheduler.enable_prefix_caching ? " prefix caching on" : " prefix caching off";
    const int old_blocks = kv_->num_blocks();
    try {
        build_pool(next);
    } catch (...) {
        build_pool(config_);  // the old geometry worked (device memory, say, ran out for the new one): keep it
        throw;
    }
    pending_event_ = event + " (" + std::to_string(old_blocks) + " -> " + std::to_string(kv_->num_blocks()) + " blocks)";
    config_ = next;
}

void LlmEngine::check_fits_pool(const std::string& id, int prompt_len, int max_tokens, const EngineConfig& c,
                                int num_blocks, const char* context) const {
    // A request longer than the whole pool could never run, not even alone; in naive mode every request
    // reserves max_model_len slots.
    const int max_len = c.scheduler.max_model_len;
    const int64_t longest = std::min<int64_t>(max_len, static_cast<int64_t>(prompt_len) + max_tokens);
    const int64_t need = c.mode == "naive" ? (max_len + c.block_size - 1) / c.block_size
                                           : (longest + c.block_size - 1) / c.block_size;
    if (need > num_blocks)
        throw BadInput("request " + id + ": needs " + std::to_string(need) + " KV blocks of " +
                       std::to_string(c.block_size) + " tokens" + (c.mode == "naive" ? " (naive mode reserves max_model_len)" : "") +
                       " but the pool has " + std::to_string(num_blocks) + context +
                       " (raise the KV cache memory or lower max_model_len)");
}

void LlmEngine::validate_request(const NewRequest& r) const {
    r.sampling_params.validate();
    const int len = static_cast<int>(r.prompt_token_ids.size());
    const int max_len = config_.scheduler.max_model_len;
    if (len == 0) throw BadInput("request " + r.request_id + ": the prompt is empty");
    if (len >= max_len)
        throw BadInput("request " + r.request_id + ": prompt of " + std::to_string(len) +
                       " tokens does not fit max_model_len " + std::to_string(max_len) +
                       " (at least one token must be generated)");
    for (int32_t t : r.prompt_token_ids)
        if (t < 0 || t >= model_->config.vocab_size)
            throw BadInput("request " + r.request_id + ": token id " + std::to_string(t) + " is outside the vocabulary (" +
                           std::to_string(model_->config.vocab_size) + ")");
    for (const auto& [t, bias] : r.sampling_params.logit_bias)
        if (t < 0 || t >= model_->config.vocab_size)
            throw BadInput("request " + r.request_id + ": logit_bias token id " + std::to_string(t) +
                           " is outside the vocabulary (" + std::to_string(model_->config.vocab_size) + ")");
    check_fits_pool(r.request_id, len, r.sampling_params.max_tokens, config_, kv_->num_blocks(), "");
}

std::vector<std::string> LlmEngine::add_request(NewRequest r) {
    if (r.request_id.empty()) r.request_id = "req-" + std::to_string(next_request_id_++);
    const int n = r.sampling_params.n;
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) ids.push_back(n == 1 ? r.request_id : r.request_id + "-" + std::to_string(i));
    for (const auto& id : ids)
        if (requests_.count(id)) throw BadInput("request id '" + id + "' is already in use");
    validate_request(r);
    const double t = now();
    for (int i = 0; i < n; ++i) {
        RequestState st;
        st.request = std::make_unique<Request>();
        Request& q = *st.request;
        q.request_id = ids[i];
        q.all_token_ids = r.prompt_token_ids;
        q.num_prompt_tokens = static_cast<int>(r.prompt_token_ids.size());
        q.sampling_params = r.sampling_params;
        q.sampling_params.n = 1;
        q.priority = r.priority;
        q.arrival_time = t;
        q.arrival_seq = next_arrival_seq_++;
        q.cache_salt = r.cache_salt;
        const uint64_t seed = r.sampling_params.seed ? *r.sampling_params.seed + i : seed_rng_();
        st.seed = seed;
        st.rng.seed(seed);
        st.detokenizer = std::make_unique<IncrementalDetokenizer>(model_->tokenizer, std::span<const int32_t>(q.all_token_ids));
        st.metrics.request_id = q.request_id;
        st.metrics.priority = q.priority;
        st.metrics.num_prompt_tokens = q.num_prompt_tokens;
        st.metrics.arrival_time = t;
        Request* ptr = st.request.get();
        requests_.emplace(ids[i], std::move(st));
        scheduler_->add_request(ptr);
    }
    return ids;
}

bool LlmEngine::abort_request(const std::string& id) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.request->is_finished()) return false;
    finish(it->second, FinishReason::ABORT);
    return true;
}

bool LlmEngine::has_unfinished_requests() const { return scheduler_->has_unfinished_requests(); }

void LlmEngine::prepare_input(const SchedulerOutput& out) {
    input_.clear();
    const bool device_sampling = backend_->supports_sampling();
    input_.logits_to_host = !device_sampling;
    for (const ScheduledRequest& s : out.scheduled) {
        const Request& r = *s.request;
        input_.add_sequence(r.all_token_ids.data(), r.num_computed_tokens, s.num_new_tokens,
                            kv_->block_table(r.request_id), kv_->block_size(), s.samples);
        if (!s.samples || !device_sampling) continue;
        // Every sampled row gets a device row; one the host must sample brings all logits back.
        const std::optional<SamplingRow> row =
            device_sampling_row(r.sampling_params, r.num_output_tokens(), requests_.at(r.request_id).seed);
        if (!row) input_.logits_to_host = true;
        input_.sampling_rows.push_back(row.value_or(SamplingRow{}));
    }
    for (const PaddingRows& p : out.padding)
        input_.add_padding(p.num_tokens, p.context->num_computed_tokens, kv_->block_table(p.context->request_id));
    input_.finalize();
}

std::vector<RequestOutput> LlmEngine::step() {
    const double start = now();
    SchedulerOutput out = scheduler_->schedule();
    if (config_.check_invariants)
        if (std::string err = scheduler_->check_invariants(out); !err.empty())
            throw std::logic_error("invariant broken after schedule(): " + err);
    for (const ScheduledRequest& s : out.scheduled) {
        RequestMetrics& m = requests_.at(s.request->request_id).metrics;
        if (m.first_scheduled_time < 0) m.first_scheduled_time = start;
        if (s.is_prefill) m.prefill_chunk_times.push_back(start);
        m.num_cached_tokens = std::max(s.request->num_cached_tokens, 0);
    }
    for (Request* r : out.preempted) requests_.at(r->request_id).metrics.preemption_times.push_back(start);
    std::vector<RequestOutput> outputs;
    int num_finished = 0;
    if (!out.scheduled.empty()) {
        prepare_input(out);
        const StepOutput result = runner_->execute(input_);
        scheduler_->update_after_step(out);
        process_sampled(out, result, outputs);
        for (const auto& o : outputs) num_finished += o.finished;
    }
    ++num_steps_;
    emit_step_stats(out, start, num_finished, std::exchange(pending_event_, {}));
    return outputs;
}

void LlmEngine::process_sampled(const SchedulerOutput& out, const StepOutput& step, std::vector<RequestOutput>& outputs) {
    const int vocab = model_->config.vocab_size;
    int row = 0;
    for (const ScheduledRequest& s : out.scheduled) {
        if (!s.samples) continue;
        RequestState& st = requests_.at(s.request->request_id);
        Request& r = *st.request;
        const SamplingParams& p = r.sampling_params;
        const int i = row++;
        // The same question prepare_input() asked, on the same state: did the device choose this one?
        if (step.sampled_token_ids && device_sampling_row(p, r.num_output_tokens(), st.seed)) {
            outputs.push_back(append_token(st, step.sampled_token_ids[i]));
            continue;
        }
        std::span<float> l(const_cast<float*>(step.logits) + static_cast<size_t>(i) * vocab, vocab);
        if (r.num_output_tokens() < p.min_tokens) {  // EOS and stop tokens may not end it yet
            if (!p.ignore_eos)
                for (int32_t e : model_->tokenizer.eos_ids()) l[e] = -INFINITY;
            for (int32_t e : p.stop_token_ids)
                if (e >= 0 && e < vocab) l[e] = -INFINITY;
        }
        for (const auto& [id, bias] : p.logit_bias)
            if (id >= 0 && id < vocab) l[id] += bias;
        const std::span<const int32_t> all(r.all_token_ids);
        const int32_t token = sampler_.sample(l, p, all.first(r.num_prompt_tokens), all.subspan(r.num_prompt_tokens), st.rng);
        outputs.push_back(append_token(st, token));
    }
}

RequestOutput LlmEngine::append_token(RequestState& st, int32_t token) {
    Request& r = *st.request;
    r.all_token_ids.push_back(token);
    st.metrics.token_times.push_back(now());
    st.text += st.detokenizer->push(token);
    RequestOutput o;
    o.request_id = r.request_id;
    o.new_token_ids = {token};
    const std::optional<FinishReason> reason = check_stop(st, token);
    if (reason) {
        st.text += st.detokenizer->flush();
        if (*reason == FinishReason::STOP) check_stop(st, -1);  // flushed bytes may complete a stop string
    }
    // Hold back a tail that could still become a stop string.
    size_t holdback = 0;
    if (!reason)
        for (const auto& s : r.sampling_params.stop) holdback = std::max(holdback, s.size() - 1);
    const size_t ready = st.text.size() > holdback ? st.text.size() - holdback : 0;
    if (ready > st.emitted) {
        o.text_delta = st.text.substr(st.emitted, ready - st.emitted);
        st.emitted = ready;
    }
    if (reason) {
        finish(st, *reason);
        o.finished = true;
        o.finish_reason = *reason;
    }
    return o;
}

// Stop strings cut the text where they begin (the stop string itself is not part of the output).
std::optional<FinishReason> LlmEngine::check_stop(RequestState& st, int32_t token) {
    Request& r = *st.request;
    const SamplingParams& p = r.sampling_params;
    for (const auto& s : p.stop) {
        const size_t from = st.emitted > s.size() ? st.emitted - s.size() : 0;
        if (size_t pos = st.text.find(s, from); pos != std::string::npos) {
            st.text.resize(pos);
            return FinishReason::STOP;
        }
    }
    if (token < 0) return std::nullopt;
    if (r.num_output_tokens() > p.min_tokens || r.num_output_tokens() == p.min_tokens) {
        if (!p.ignore_eos && model_->tokenizer.is_eos(token)) return FinishReason::STOP;
        if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end())
            return FinishReason::STOP;
    }
    if (r.num_output_tokens() >= p.max_tokens || r.num_tokens() >= config_.scheduler.max_model_len)
        return FinishReason::LENGTH;
    return std::nullopt;
}

void LlmEngine::finish(RequestState& st, FinishReason reason) {
    scheduler_->finish_request(st.request.get(), reason);
    st.metrics.finish_time = now();
    st.metrics.finish_reason = reason;
    st.metrics.num_output_tokens = st.request->num_output_tokens();
    st.metrics.num_preemptions = st.request->num_preemptions;
    if (sink_) sink_->on_request_finished(st.metrics);
}

void LlmEngine::release_finished() {
    std::erase_if(requests_, [](const auto& kv) { return kv.second.request->is_finished(); });
}

MemoryStats LlmEngine::memory_stats() const {
    MemoryStats m;
    m.weights_bytes = model_->weights.weight_bytes();
    m.kv_pool_bytes = static_cast<int64_t>(runner_->kv_cache_bytes());
    m.activation_bytes = static_cast<int64_t>(runner_->activation_bytes());
    m.host_rss_bytes = host_rss_bytes();
    backend_->device_memory(m.device_total_bytes, m.device_used_bytes);
    return m;
}

void LlmEngine::emit_step_stats(const SchedulerOutput& out, double start, int num_finished, const std::string& event) {
    if (!sink_) return;
    StepStats s;
    s.step = num_steps_;
    s.start_time = start;
    s.duration = now() - start;
    s.mode = config_.mode;
    s.num_running = static_cast<int>(scheduler_->running().size());
    s.num_waiting = static_cast<int>(scheduler_->waiting().size());
    s.num_scheduled_seqs = static_cast<int>(out.scheduled.size());
    s.num_prefill_tokens = out.num_prefill_tokens;
    s.num_decode_tokens = out.num_decode_tokens;
    s.num_padding_tokens = out.num_padding_tokens;
    s.max_num_seqs = config_.scheduler.max_num_seqs;
    s.max_num_batched_tokens = config_.scheduler.max_num_batched_tokens;
    s.block_size = kv_->block_size();
    s.num_blocks = kv_->num_blocks();
    s.num_free_blocks = kv_->num_free_blocks();
    s.num_cached_free_blocks = kv_->num_cached_free_blocks();
    s.num_used_blocks = s.num_blocks - s.num_free_blocks;
    s.kv_usage = kv_->usage();
    s.kv_waste = kv_->kv_waste();
    const PrefixCacheStats pc = kv_->prefix_cache_stats();
    s.prefix_cache_queries = pc.num_query_tokens;
    s.prefix_cache_hits = pc.num_hit_tokens;
    s.num_preemptions = static_cast<int>(out.preempted.size());
    s.total_preemptions = scheduler_->num_preemptions();
    s.num_finished = num_finished;
    s.memory = memory_stats();
    s.event = event;
    sink_->on_step(s);
}

std::optional<RequestInfo> LlmEngine::request_info(const std::string& id) const {
    auto it = requests_.find(id);
    if (it == requests_.end()) return std::nullopt;
    const Request& r = *it->second.request;
    return RequestInfo{r.request_id, r.status, r.finish_reason, r.num_prompt_tokens, r.num_output_tokens(),
                       r.num_computed_tokens, std::max(r.num_cached_tokens, 0), r.num_preemptions, r.priority,
                       kv_->block_table(r.request_id)};
}

std::optional<RequestMetrics> LlmEngine::request_metrics(const std::string& id) const {
    auto it = requests_.find(id);
    if (it == requests_.end()) return std::nullopt;
    return it->second.metrics;
}

std::vector<int32_t> LlmEngine::request_output_token_ids(const std::string& id) const {
    auto it = requests_.find(id);
    return it == requests_.end() ? std::vector<int32_t>{} : it->second.request->output_token_ids();
}

std::vector<RequestInfo> LlmEngine::active_requests() const {
    std::vector<RequestInfo> out;
    for (const auto& [id, st] : requests_)
        if (!st.request->is_finished()) out.push_back(*request_info(id));
    return out;
}

}  // namespace kvscope
