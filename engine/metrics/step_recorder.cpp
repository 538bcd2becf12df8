#include "metrics/step_recorder.h"

#include <algorithm>

namespace kvscope {

void StepRecorder::on_step(const StepStats& stats) {
    steps_.push_back(stats);
    last_ = stats;
}

void StepRecorder::on_request_finished(const RequestMetrics& metrics) { requests_.push_back(metrics); }

void StepRecorder::clear() {
    steps_.clear();
    requests_.clear();
    base_ = last_;
}

void StepRecorder::set_baseline(int64_t total_preemptions, int64_t prefix_cache_queries, int64_t prefix_cache_hits) {
    base_.total_preemptions = total_preemptions;
    base_.prefix_cache_queries = prefix_cache_queries;
    base_.prefix_cache_hits = prefix_cache_hits;
}

namespace {

// A cumulative counter since the baseline; a pool rebuild that restarts the counter restarts it at 0.
int64_t since(int64_t now, int64_t base) { return now >= base ? now - base : now; }

}  // namespace

EngineAggregates StepRecorder::aggregates() const {
    EngineAggregates a;
    int64_t seqs = 0, tokens = 0, reserved_steps = 0;
    double usage = 0, waste = 0;
    for (const StepStats& s : steps_) {
        a.kv_usage_peak = std::max(a.kv_usage_peak, s.kv_usage);
        if (s.num_used_blocks > 0) ++reserved_steps, waste += s.kv_waste;
        if (s.num_scheduled_seqs == 0) continue;
        ++a.num_steps;
        seqs += s.num_scheduled_seqs;
        tokens += s.num_prefill_tokens + s.num_decode_tokens;
        a.num_padding_tokens += s.num_padding_tokens;
        usage += s.kv_usage;
    }
    if (a.num_steps) {
        a.mean_batch_size = double(seqs) / double(a.num_steps);
        a.mean_tokens_per_step = double(tokens) / double(a.num_steps);
        a.kv_usage_mean = usage / double(a.num_steps);
    }
    if (reserved_steps) a.kv_waste_mean = waste / double(reserved_steps);
    if (!steps_.empty()) {
        const StepStats& e = steps_.back();
        a.block_size = e.block_size;
        a.num_blocks = e.num_blocks;
        a.num_preemptions = since(e.total_preemptions, base_.total_preemptions);
        a.prefix_cache_queries = since(e.prefix_cache_queries, base_.prefix_cache_queries);
        a.prefix_cache_hits = since(e.prefix_cache_hits, base_.prefix_cache_hits);
        if (a.prefix_cache_queries > 0) a.prefix_cache_hit_rate = double(a.prefix_cache_hits) / double(a.prefix_cache_queries);
    }
    return a;
}

nlohmann::json EngineAggregates::to_json() const {
    return {{"block_size", block_size},
            {"num_blocks", num_blocks},
            {"num_steps", num_steps},
            {"mean_batch_size", mean_batch_size},
            {"mean_tokens_per_step", mean_tokens_per_step},
            {"num_padding_tokens", num_padding_tokens},
            {"kv_usage_peak", kv_usage_peak},
            {"kv_usage_mean", kv_usage_mean},
            {"kv_waste_mean", kv_waste_mean},
            {"num_preemptions", num_preemptions},
            {"prefix_cache_queries", prefix_cache_queries},
            {"prefix_cache_hits", prefix_cache_hits},
            {"prefix_cache_hit_rate", prefix_cache_hit_rate}};
}

EngineAggregates EngineAggregates::from_json(const nlohmann::json& j) {
    EngineAggregates a;
    a.block_size = j.value("block_size", 0);
    a.num_blocks = j.value("num_blocks", 0);
    a.num_steps = j.value("num_steps", int64_t{0});
    a.mean_batch_size = j.value("mean_batch_size", 0.0);
    a.mean_tokens_per_step = j.value("mean_tokens_per_step", 0.0);
    a.num_padding_tokens = j.value("num_padding_tokens", int64_t{0});
    a.kv_usage_peak = j.value("kv_usage_peak", 0.0);
    a.kv_usage_mean = j.value("kv_usage_mean", 0.0);
    a.kv_waste_mean = j.value("kv_waste_mean", 0.0);
    a.num_preemptions = j.value("num_preemptions", int64_t{0});
    a.prefix_cache_queries = j.value("prefix_cache_queries", int64_t{0});
    a.prefix_cache_hits = j.value("prefix_cache_hits", int64_t{0});
    a.prefix_cache_hit_rate = j.value("prefix_cache_hit_rate", 0.0);
    return a;
}

nlohmann::json step_work_to_json(const StepWorkSummary& w) {
    return {{"num_tokens", w.num_tokens}, {"num_seqs", w.num_seqs}, {"num_sampled", w.num_sampled},
            {"prefill_attention_pairs", w.prefill_attention_pairs}, {"prefill_kv_tokens", w.prefill_kv_tokens},
            {"decode_kv_tokens", w.decode_kv_tokens}};
}

StepWorkSummary step_work_from_json(const nlohmann::json& j) {
    StepWorkSummary w;
    w.num_tokens = j.at("num_tokens").get<int>();
    w.num_seqs = j.at("num_seqs").get<int>();
    w.num_sampled = j.at("num_sampled").get<int>();
    w.prefill_attention_pairs = j.at("prefill_attention_pairs").get<double>();
    w.prefill_kv_tokens = j.at("prefill_kv_tokens").get<double>();
    w.decode_kv_tokens = j.at("decode_kv_tokens").get<double>();
    return w;
}

nlohmann::json step_stats_to_json(const StepStats& s) {
    nlohmann::json j = {{"step", s.step}, {"start_time", s.start_time}, {"duration", s.duration}, {"mode", s.mode},
                        {"num_running", s.num_running}, {"num_waiting", s.num_waiting},
                        {"num_scheduled_seqs", s.num_scheduled_seqs}, {"num_prefill_tokens", s.num_prefill_tokens},
                        {"num_decode_tokens", s.num_decode_tokens},
                        {"num_padding_tokens", s.num_padding_tokens}, {"block_size", s.block_size},
                        {"num_blocks", s.num_blocks}, {"num_used_blocks", s.num_used_blocks},
                        {"num_cached_free_blocks", s.num_cached_free_blocks}, {"num_free_blocks", s.num_free_blocks},
                        {"kv_usage", s.kv_usage}, {"kv_waste", s.kv_waste},
                        {"prefix_cache_queries", s.prefix_cache_queries}, {"prefix_cache_hits", s.prefix_cache_hits},
                        {"num_preemptions", s.num_preemptions}, {"num_finished", s.num_finished},
                        {"host_rss_bytes", s.memory.host_rss_bytes},
                        {"work", step_work_to_json(s.work)}};
    if (!s.event.empty()) j["event"] = s.event;
    return j;
}

}  // namespace kvscope
