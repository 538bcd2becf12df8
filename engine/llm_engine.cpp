#include "llm_engine.h"

#include "backend_factory.h"
#include "kv/kv_cache_dtype.h"
#include "sched/continuous_scheduler.h"
#include "sched/naive_scheduler.h"
#include "sim/sim_backend.h"
#include "sim/sim_model_runner.h"
#include "util/errors.h"
#include "util/host_memory.h"

#include <algorithm>
#include <new>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace kvscope {

LlmEngine::LlmEngine(std::shared_ptr<const Model> model, const EngineConfig& config, std::unique_ptr<Backend> backend)
    : model_(std::move(model)), config_(config), backend_(std::move(backend)),
      output_processor_(model_->tokenizer, config.scheduler.max_model_len), seed_rng_(config.seed) {
    config_.validate();
    if (config_.scheduler.max_model_len > model_->config.max_position_embeddings)
        throw BadInput("max_model_len " + std::to_string(config_.scheduler.max_model_len) +
                       " exceeds the model's context length " + std::to_string(model_->config.max_position_embeddings));
    if (config_.backend == BackendKind::SIM) {
        const int tp = config_.tensor_parallel_size;
        if (model_->config.num_heads % tp != 0)
            throw BadInput("tensor_parallel_size " + std::to_string(tp) + " does not divide the model's " +
                           std::to_string(model_->config.num_heads) + " attention heads");
        backend_ = std::make_unique<SimBackend>(find_gpu_spec(config_.sim_gpu), tp);
        clock_ = EngineClock::virtual_time(config_.sim_pace);
    }
    if (!backend_) {
        try {
            backend_ = make_backend(std::string(to_string(config_.backend)), config_.num_threads);
        } catch (const std::invalid_argument& e) {
            throw BadInput(std::string("backend: ") + e.what());
        }
    }
    // Before any weight goes to the device: a model whose attention shape the backend has no kernel for.
    const ModelConfig& m = model_->config;
    if (!backend_->supports_attention(m.head_dim, m.num_heads, m.num_kv_heads))
        throw BadInput("the " + backend_->name() + " backend has no attention kernel for this model's heads (head_dim " +
                       std::to_string(m.head_dim) + ", " + std::to_string(m.num_heads) + " query heads over " +
                       std::to_string(m.num_kv_heads) + " KV heads)");
    build_pool(config_);
    check_naive_pool(config_, kv_->num_blocks(), "");
    const int32_t bos = model_->tokenizer.bos_id();
    runner_->check_logits_finite(bos >= 0 && bos < m.vocab_size ? bos : 0);
}

LlmEngine::~LlmEngine() = default;

const SimModelRunner* LlmEngine::sim_model_runner() const { return dynamic_cast<const SimModelRunner*>(runner_.get()); }

std::string LlmEngine::simulation_label() const {
    const SimModelRunner* sim = sim_model_runner();
    if (!sim) return "";
    const StepTimeModel& m = sim->step_time_model();
    const int tp = m.tensor_parallel_size();
    return "simulated " + m.gpu().display_name + (tp > 1 ? " x " + std::to_string(tp) : "") + ", " + model_->name +
           ", step-time model " + m.version();
}

std::unique_ptr<ModelExecutor> LlmEngine::make_executor(const EngineConfig& c, int num_blocks, DType kv_dtype) {
    const int max_tokens = c.scheduler.max_num_batched_tokens;
    const int max_logits = std::min(c.scheduler.max_num_seqs, max_tokens);
    if (auto* sim = dynamic_cast<SimBackend*>(backend_.get())) {
        const ModelConfig& m = model_->config;
        const StepTimeConstants k =
            c.sim_calibration.empty() ? StepTimeConstants{} : read_calibration(c.sim_calibration, c.sim_gpu);
        const double weight_bytes =  // per element
            static_cast<double>(dtype_block_bytes(m.weight_dtype)) / static_cast<double>(dtype_block_elems(m.weight_dtype));
        StepTimeModel step_time(m, sim->gpu(), sim->tensor_parallel_size(), k, weight_bytes,
                                static_cast<double>(dtype_block_bytes(kv_dtype)));
        return std::make_unique<SimModelRunner>(*model_, *sim, clock_, std::move(step_time), num_blocks, c.block_size,
                                                max_tokens, max_logits, kv_dtype);
    }
    try {
        return std::make_unique<ModelRunner>(*model_, *backend_, num_blocks, c.block_size, max_tokens, max_logits, kv_dtype,
                                             c.scheduler.max_model_len);
    } catch (const std::bad_alloc&) {
        // The KV pool was checked against memory already (compute_num_blocks): what remains is the activations,
        // max_num_batched_tokens rows of every layer's widest tensors.
        throw BadInput("the activation buffers for max_num_batched_tokens " + std::to_string(max_tokens) + " (beside a KV cache of " +
                       std::to_string(num_blocks) + " blocks) do not fit in memory: lower max_num_batched_tokens");
    }
}

DType LlmEngine::resolve_kv_dtype(const EngineConfig& c) const {
    return resolve_kv_cache_dtype(c.kv_cache_dtype, model_->config.weight_dtype, *backend_);
}

int LlmEngine::compute_num_blocks(const EngineConfig& c, DType kv_dtype) const {
    const ModelConfig& m = model_->config;
    const int64_t bytes_per_block =
        KvCacheLayout::bytes_per_block(m.num_layers, m.num_kv_heads, m.head_dim, c.block_size, kv_dtype);
    // A pool in host memory (the CPU backend: no device) larger than the machine would only fail in the
    // allocator, as std::bad_alloc, or swap: refused here, with both sizes.
    int64_t device_total = 0, device_used = 0;
    backend_->device_memory(device_total, device_used);
    const int64_t host = host_memory_bytes();
    const auto check_host = [&](int64_t blocks) {
        if (device_total == 0 && host > 0 && blocks * bytes_per_block > host)
            throw BadInput("KV cache of " + std::to_string(blocks) + " blocks (" + std::to_string((blocks * bytes_per_block) >> 20) +
                           " MiB) exceeds this machine's memory (" + std::to_string(host >> 20) + " MiB)");
        return static_cast<int>(blocks);
    };
    if (c.num_blocks > 0) return check_host(c.num_blocks);
    const int64_t budget = c.kv_cache_memory > 0  ? c.kv_cache_memory
                           : device_kv_budget_ > 0 ? device_kv_budget_
                                                   : default_kv_cache_memory(m.kv_bytes_per_token(kv_dtype), c.scheduler.max_num_seqs,
                                                         c.scheduler.max_model_len);
    const int64_t n = budget / bytes_per_block;
    if (n < 1)
        throw BadInput("KV cache budget of " + std::to_string(budget) + " bytes holds no block of " +
                       std::to_string(bytes_per_block) + " bytes (block_size " + std::to_string(c.block_size) + ")");
    return check_host(std::min<int64_t>(n, 1 << 24));
}

std::unique_ptr<Scheduler> LlmEngine::make_scheduler(const EngineConfig& c) {
    SchedulerConfig sc = c.scheduler;
    if (c.mode == BatchingMode::NAIVE) {
        sc.enable_prefix_caching = false;  // the baseline has no prefix cache
        return std::make_unique<NaiveScheduler>(*kv_, sc);
    }
    return std::make_unique<ContinuousScheduler>(*kv_, sc);
}

int64_t LlmEngine::device_kv_budget(const EngineConfig& c, DType kv_dtype) const {
    int64_t total = 0, used = 0;
    backend_->device_memory(total, used);
    const int64_t base = used - static_cast<int64_t>(runner_->kv_cache_bytes());  // weights, activations, context
    const auto mib = [](int64_t b) { return std::to_string(b >> 20) + " MiB"; };
    if (c.num_blocks > 0) return 0;
    if (c.kv_cache_memory > 0) {
        if (c.kv_cache_memory > total - base)
            throw BadInput("--kv-cache-memory " + mib(c.kv_cache_memory) + " exceeds the " + mib(total - base) +
                           " the device has free after weights and activations (" + mib(base) + " of " + mib(total) +
                           " in use)");
        return 0;
    }
    const int64_t budget = static_cast<int64_t>(c.gpu_memory_utilization * static_cast<double>(total)) - base;
    const ModelConfig& m = model_->config;
    const int64_t bytes_per_block =
        KvCacheLayout::bytes_per_block(m.num_layers, m.num_kv_heads, m.head_dim, c.block_size, kv_dtype);
    const int64_t need = (c.scheduler.max_model_len + c.block_size - 1) / c.block_size * bytes_per_block;
    if (budget < need) {
        char util[16];
        std::snprintf(util, sizeof util, "%.2f", c.gpu_memory_utilization);
        throw BadInput(std::string("--gpu-memory-utilization ") + util + " of " + mib(total) + " leaves " +
                       mib(std::max<int64_t>(0, budget)) + " for the KV cache after weights, activations and the " +
                       "runtime (" + mib(base) + "); one request of max_model_len " +
                       std::to_string(c.scheduler.max_model_len) + " needs " + mib(need) +
                       ": raise it, or lower --max-model-len or --max-num-batched-tokens" +
                       (c.backend == BackendKind::SIM ? ", or simulate more GPUs with --tensor-parallel-size" : ""));
    }
    return budget;
}

void LlmEngine::build_pool(const EngineConfig& c) {
    const DType kv_dtype = resolve_kv_dtype(c);
    if (!runner_) {
        int64_t total = 0, used = 0;
        backend_->device_memory(total, used);
        if (total > 0) {
            // vLLM's order: weights, a profile run to the activation peak, then the pool from what is left.
            runner_ = make_executor(c, 1, kv_dtype);
            runner_->profile_run();
            device_kv_budget_ = device_kv_budget(c, kv_dtype);
        }
    }
    const int num_blocks = compute_num_blocks(c, kv_dtype);
    const bool caching = c.scheduler.enable_prefix_caching && c.mode == BatchingMode::PAGED;
    if (!kv_ || kv_->enable_caching() != caching)
        kv_ = std::make_unique<KvCacheManager>(num_blocks, c.block_size, caching);
    else
        kv_->reset(num_blocks, c.block_size);
    // The naive baseline reserves max_model_len up front and its padding rows read from position 0: it
    // never frees; the snapshot still marks the blocks the windows left behind.
    const ModelConfig& m = model_->config;
    kv_->set_sliding_window(m.sliding_window, m.all_layers_windowed() && c.mode == BatchingMode::PAGED &&
                                                  c.free_outside_window);
    const int max_tokens = c.scheduler.max_num_batched_tokens;
    const int max_logits = std::min(c.scheduler.max_num_seqs, max_tokens);
    if (!runner_)
        runner_ = make_executor(c, num_blocks, kv_dtype);
    else {
        runner_->ensure_capacity(max_tokens, max_logits);
        runner_->reset_kv_cache(num_blocks, c.block_size, kv_dtype);
    }
    runner_->set_cuda_graphs(!c.enforce_eager, c.scheduler.max_model_len);
    std::deque<Request*> waiting;
    if (scheduler_) {
        waiting = scheduler_->waiting();
        // The engine's count runs on over rebuilds (a rebuild's drain preempts too), as each request's does.
        preemptions_before_rebuild_ += scheduler_->num_preemptions();
    }
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
    if (backend_name(next) != backend_name(config_) || next.tensor_parallel_size != config_.tensor_parallel_size ||
        next.sim_calibration != config_.sim_calibration)
        throw BadInput("the backend, tensor_parallel_size and sim calibration cannot change while the engine runs "
                       "(reload the model)");
    clock_.set_pace(next.sim_pace);
    // Resolved before anything drains: a type the backend cannot hold throws here, and a new name for
    // the same type (fp16 -> float16, auto -> bfloat16 on BF16 weights) rebuilds nothing.
    const DType next_kv_dtype = resolve_kv_dtype(next);
    const bool rebuild = next.block_size != config_.block_size || next.kv_cache_memory != config_.kv_cache_memory ||
                         next.num_blocks != config_.num_blocks || next.mode != config_.mode ||
                         next.free_outside_window != config_.free_outside_window ||
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
    check_naive_pool(next, next_num_blocks, " after the change; nothing was changed");
    for (const auto& [id, st] : requests_)
        if (!st.request->is_finished())
            check_fits_pool(id, st.request->num_prompt_tokens, st.request->sampling_params.max_tokens, next,
                            next_num_blocks, " after the change; nothing was changed");

    // Drain: every running request gives its blocks back and waits to be recomputed.
    const double drained_at = now();
    for (const Request* r : scheduler_->running())
        requests_.at(r->request_id).metrics.preemption_times.push_back(drained_at);
    // The drain's preemptions go into the next step's figures: they were in the totals and each request's
    // count but in no step's, so the timeline summed to less than the status bar (22 against 46).
    pending_preemptions_ += static_cast<int>(scheduler_->running().size());
    scheduler_->preempt_all();
    // What changed, comma-separated (a chart label lists them and shortens the list by them).
    std::vector<std::string> changes;
    if (next.block_size != config_.block_size)
        changes.push_back("block_size " + std::to_string(config_.block_size) + " -> " + std::to_string(next.block_size));
    if (next.mode != config_.mode)
        changes.push_back(std::string("mode ") + std::string(to_string(config_.mode)) + " -> " + std::string(to_string(next.mode)));
    if (next_kv_dtype != kv_cache_dtype())
        changes.push_back("kv_cache_dtype " + kv_cache_dtype_name(kv_cache_dtype()) + " -> " + kv_cache_dtype_name(next_kv_dtype));
    if (next.kv_cache_memory != config_.kv_cache_memory || next.num_blocks != config_.num_blocks) changes.push_back("kv budget");
    if (next.scheduler.enable_prefix_caching != config_.scheduler.enable_prefix_caching)
        changes.push_back(next.scheduler.enable_prefix_caching ? "prefix caching on" : "prefix caching off");
    std::string event = "rebuild:";
    for (size_t i = 0; i < changes.size(); ++i) event += (i ? ", " : " ") + changes[i];
    const int old_blocks = kv_->num_blocks();
    try {
        build_pool(next);
    } catch (...) {
        build_pool(config_);  // the old geometry worked (device memory, say, ran out for the new one): keep it
        throw;
    }
    // Rebuilds before the next step are each told, in order (the GUI moves knobs while the engine idles).
    if (!pending_event_.empty()) pending_event_ += "; ";
    pending_event_ += event + " (" + std::to_string(old_blocks) + " -> " + std::to_string(kv_->num_blocks()) + " blocks)";
    config_ = next;
}

void LlmEngine::check_naive_pool(const EngineConfig& c, int num_blocks, const char* context) const {
    // Naive batching reserves max_model_len for every request: a smaller pool can run none of them.
    const int max_len = c.scheduler.max_model_len;
    const int64_t need = (static_cast<int64_t>(max_len) + c.block_size - 1) / c.block_size;
    if (c.mode == BatchingMode::NAIVE && need > num_blocks)
        throw BadInput("naive mode reserves max_model_len " + std::to_string(max_len) + " tokens (" + std::to_string(need) +
                       " KV blocks of " + std::to_string(c.block_size) + ") for every request but the pool has " +
                       std::to_string(num_blocks) + context + " (raise the KV cache memory or lower max_model_len)");
}

void LlmEngine::check_fits_pool(const std::string& id, int prompt_len, int max_tokens, const EngineConfig& c,
                                int num_blocks, const char* context) const {
    // A request longer than the whole pool could never run, not even alone (naive mode's reservation of
    // max_model_len is check_naive_pool's, before any request).
    const int max_len = c.scheduler.max_model_len;
    const int64_t longest = std::min<int64_t>(max_len, static_cast<int64_t>(prompt_len) + max_tokens);
    int64_t need = (longest + c.block_size - 1) / c.block_size;
    // Where blocks behind the window are freed, a step's chunk of up to max_num_batched_tokens queries
    // reads keys from window - 1 before its first one: that many tokens, plus one block of misalignment.
    const ModelConfig& m = model_->config;
    if (c.mode == BatchingMode::PAGED && c.free_outside_window && m.all_layers_windowed())
        need = std::min<int64_t>(
            need, (m.sliding_window - 1 + c.scheduler.max_num_batched_tokens + c.block_size - 1) / c.block_size + 1);
    if (need > num_blocks)
        throw BadInput("request " + id + ": needs " + std::to_string(need) + " KV blocks of " +
                       std::to_string(c.block_size) + " tokens but the pool has " + std::to_string(num_blocks) + context +
                       " (raise the KV cache memory or lower max_model_len)");
}

EngineConfig LlmEngine::resolved_config() const {
    EngineConfig c = config_;
    c.num_blocks = num_blocks();
    c.kv_cache_dtype = kv_cache_dtype_name(kv_cache_dtype());
    return c;
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
    const int vocab = model_->config.vocab_size;
    for (const auto& [name, k] : {std::pair{"logprobs", r.sampling_params.logprobs},
                                  std::pair{"prompt_logprobs", r.sampling_params.prompt_logprobs}})
        if (k && *k > vocab)
            throw BadInput("request " + r.request_id + ": " + name + " " + std::to_string(*k) +
                           " exceeds the vocabulary (" + std::to_string(vocab) + " tokens)");
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
        runner_->add_request(q, r.sampling_params.seed ? *r.sampling_params.seed + i : seed_rng_());
        output_processor_.add_request(q);
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
    ++num_aborted_since_step_;
    return true;
}

bool LlmEngine::has_unfinished_requests() const { return scheduler_->has_unfinished_requests(); }

void LlmEngine::note_scheduled(const SchedulerOutput& out, double start) {
    for (const ScheduledRequest& s : out.scheduled) {
        RequestMetrics& m = requests_.at(s.request->request_id).metrics;
        if (m.first_scheduled_time < 0) m.first_scheduled_time = start;
        if (s.is_prefill) m.prefill_chunk_times.push_back(start);
        m.num_cached_tokens = std::max(s.request->num_cached_tokens, 0);
    }
    for (Request* r : out.preempted) requests_.at(r->request_id).metrics.preemption_times.push_back(start);
}

// schedule -> run the model and sample -> process the outputs -> record the step.
std::vector<RequestOutput> LlmEngine::step() {
    const double start = now();
    SchedulerOutput out = scheduler_->schedule();
    if (config_.check_invariants)
        if (std::string err = scheduler_->check_invariants(out); !err.empty())
            throw std::logic_error("invariant broken after schedule(): " + err);
    note_scheduled(out, start);
    std::vector<RequestOutput> outputs;
    StepWorkSummary work;  // before update_after_step moves num_computed_tokens on
    if (!out.scheduled.empty()) {
        if (sink_) work = step_work(out, kv_->block_size()).summary();
        const SamplerOutput tokens = runner_->execute(out, *kv_);
        scheduler_->update_after_step(out);
        outputs = process_outputs(out, tokens);
    }
    ++num_steps_;
    int num_finished = 0;
    for (const RequestOutput& o : outputs) num_finished += o.finished;
    std::string event = std::exchange(pending_event_, {});
    if (const int n = std::exchange(num_aborted_since_step_, 0); n > 0)
        event += (event.empty() ? "" : "; ") + std::string("aborted ") + std::to_string(n) + (n == 1 ? " request" : " requests");
    emit_step_stats(out, work, start, num_finished, event);
    return outputs;
}

std::vector<RequestOutput> LlmEngine::process_outputs(const SchedulerOutput& out, const SamplerOutput& sampled) {
    std::vector<RequestOutput> outputs;
    size_t next = 0;
    for (const ScheduledRequest& s : out.scheduled) {
        if (!s.samples) continue;
        RequestState& st = requests_.at(s.request->request_id);
        const size_t i = next++;
        st.request->all_token_ids.push_back(sampled.token_ids.at(i));
        st.metrics.token_times.push_back(now());
        RequestOutput o = output_processor_.process_token(*st.request, st.request->all_token_ids.back());
        if (sampled.logprobs.at(i)) o.logprobs.push_back(*sampled.logprobs[i]);
        if (i < sampled.prompt_logprobs.size()) o.prompt_logprobs = sampled.prompt_logprobs[i];
        if (o.finished) finish(st, o.finish_reason);
        outputs.push_back(std::move(o));
    }
    return outputs;
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
    std::erase_if(requests_, [this](const auto& kv) {
        if (!kv.second.request->is_finished()) return false;
        runner_->remove_request(kv.first);
        output_processor_.remove_request(kv.first);
        return true;
    });
}

MemoryStats LlmEngine::memory_stats() const {
    MemoryStats m;
    const SimModelRunner* sim = sim_model_runner();
    m.weights_bytes = sim ? static_cast<int64_t>(sim->step_time_model().weight_bytes()) : model_->weights.weight_bytes();
    m.kv_pool_bytes = static_cast<int64_t>(runner_->kv_cache_bytes());
    m.activation_bytes = static_cast<int64_t>(runner_->activation_bytes());
    m.host_rss_bytes = host_rss_bytes();
    backend_->device_memory(m.device_total_bytes, m.device_used_bytes);
    return m;
}

void LlmEngine::emit_step_stats(const SchedulerOutput& out, const StepWorkSummary& work, double start, int num_finished,
                                const std::string& event) {
    if (!sink_) return;
    StepStats s;
    s.step = num_steps_;
    s.start_time = start;
    s.duration = now() - start;
    s.mode = std::string(to_string(config_.mode));
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
    s.num_preemptions = static_cast<int>(out.preempted.size()) + std::exchange(pending_preemptions_, 0);
    s.total_preemptions = num_preemptions();
    s.num_finished = num_finished;
    s.work = work;
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
