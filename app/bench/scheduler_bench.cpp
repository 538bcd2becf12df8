// kvscope-scheduler-bench: the scheduler's own cost, with no model. Microseconds per step of
// schedule() + update_after_step() in steady decode (every running request computes one token a step)
// at 16, 256 and 1,024 running requests over a pool of 100k blocks, under fcfs and priority, with and
// without prefix caching. The goal is 20 us or less at 256 running requests: at 20-50 ms per model
// step that keeps the scheduler under 0.1% of a step.
//   kvscope-scheduler-bench [--steps N] [--num-blocks N] [--block-size N] [--seed N] [--running N...]
//                           [--policy fcfs|priority...] [--prefix-caching off|on...]
#include "command_line/command_line.h"
#include "command_line/option_checks.h"
#include "kv/kv_cache_manager.h"
#include "sched/continuous_scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace kvscope;

namespace {

struct Config {
    std::string policy;
    bool prefix_caching = false;
    int num_running = 0;
};

struct Timing {
    double median_us = 0, mean_us = 0, p99_us = 0;
};

// Prompts of 128..511 tokens; with prefix caching the first 64 tokens (4 blocks of 16) are a shared
// system prompt, so hits and shared blocks take part as they do in a chat workload.
std::vector<std::unique_ptr<Request>> make_requests(int n, bool shared_prefix, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> len(128, 511), tok(3, 31999), prio(0, 3);
    std::vector<std::unique_ptr<Request>> out;
    for (int i = 0; i < n; ++i) {
        auto r = std::make_unique<Request>();
        r->request_id = "req-" + std::to_string(i);
        const int n_tokens = len(rng);
        for (int t = 0; t < n_tokens; ++t) r->all_token_ids.push_back(shared_prefix && t < 64 ? t + 3 : tok(rng));
        r->num_prompt_tokens = n_tokens;
        r->sampling_params.max_tokens = 1 << 20;  // nobody finishes while we measure
        r->priority = prio(rng);
        r->arrival_seq = uint64_t(i);
        r->arrival_time = i * 1e-3;
        out.push_back(std::move(r));
    }
    return out;
}

// What is timed; a function of its own so that a profiler can count it alone
// (valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*timed_step*').
[[gnu::noinline]] SchedulerOutput timed_step(Scheduler& sched) {
    SchedulerOutput out = sched.schedule();
    sched.update_after_step(out);
    return out;
}

// The engine's sampler, faked: every scheduled request that reached its last token gets one more.
void sample(const SchedulerOutput& out, std::mt19937_64& rng) {
    for (const ScheduledRequest& s : out.scheduled)
        if (s.samples) s.request->all_token_ids.push_back(int32_t(3 + rng() % 32000));
}

Timing run(const Config& c, int steps, int num_blocks, int block_size, uint64_t seed) {
    std::mt19937_64 rng(seed);
    KvCacheManager kv(num_blocks, block_size, c.prefix_caching);
    SchedulerConfig sc;
    sc.policy = parse_scheduler_policy(c.policy);
    sc.enable_prefix_caching = c.prefix_caching;
    sc.max_num_seqs = c.num_running;
    sc.max_model_len = 8192;
    sc.max_num_batched_tokens = 1 << 16;  // warm-up: prefill everything quickly
    ContinuousScheduler sched(kv, sc);
    auto requests = make_requests(c.num_running, c.prefix_caching, rng);
    for (auto& r : requests) sched.add_request(r.get());
    // Warm up until every request runs and has sampled its first token: from then on it is steady decode.
    for (int i = 0; i < 10000; ++i) {
        const SchedulerOutput out = sched.schedule();
        sched.update_after_step(out);
        sample(out, rng);
        if (int(sched.running().size()) == c.num_running && sched.waiting().empty() &&
            std::all_of(requests.begin(), requests.end(), [](const auto& r) { return r->num_output_tokens() > 0; }))
            break;
    }
    sc.max_num_batched_tokens = 2048;  // the CLI default: decodes of up to 2,048 requests fit
    sched.set_config(sc);
    std::vector<double> us;
    us.reserve(size_t(steps));
    for (int i = 0; i < steps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const SchedulerOutput out = timed_step(sched);
        const auto t1 = std::chrono::steady_clock::now();
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        if (int(out.scheduled.size()) != c.num_running || !out.preempted.empty()) {
            std::fprintf(stderr, "kvscope-scheduler-bench: step %d scheduled %zu of %d requests (%zu preempted): "
                                 "not steady decode; use more --num-blocks or fewer --steps\n",
                         i, out.scheduled.size(), c.num_running, out.preempted.size());
            std::exit(1);
        }
        sample(out, rng);
    }
    Timing t;
    for (double x : us) t.mean_us += x / double(us.size());
    std::sort(us.begin(), us.end());
    t.median_us = us[us.size() / 2];
    t.p99_us = us[std::min(us.size() - 1, us.size() * 99 / 100)];
    for (auto& r : requests) sched.finish_request(r.get(), FinishReason::ABORT);
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    int steps = 500, num_blocks = 100000, block_size = 16;
    uint64_t seed = 1;
    std::vector<int> running = {16, 256, 1024};
    std::vector<std::string> policies = {"fcfs", "priority"};
    std::vector<std::string> caching_modes = {"off", "on"};
    using command_line::int_in;
    auto app = command_line::make_app("kvscope-scheduler-bench",
                                      "Microseconds per scheduler step (schedule() + update_after_step()) in "
                                      "steady decode, with no model.");
    app->add_option("--steps", steps, "timed decode steps per configuration")->type_name("UINT")->check(int_in(1, 100000));
    app->add_option("--num-blocks", num_blocks, "KV blocks in the pool")->type_name("UINT")->check(int_in(1, 1 << 24));
    app->add_option("--block-size", block_size, "tokens per block")->type_name("UINT")->check(int_in(1, 256));
    app->add_option("--seed", seed, "prompt lengths, tokens and priorities")->type_name("UINT")->check(command_line::any_uint64());
    app->add_option("--running", running, "running requests (one configuration each)")
        ->type_name("UINT")->check(int_in(1, 65536))->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app->add_option("--policy", policies, "scheduling policies")
        ->type_name("fcfs|priority")->check(CLI::IsMember({"fcfs", "priority"}))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app->add_option("--prefix-caching", caching_modes, "prefix caching")
        ->type_name("off|on")->check(CLI::IsMember({"off", "on"}))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    if (auto exit_code = command_line::parse_command_line(*app, argc, argv)) return *exit_code;

    std::printf("kvscope scheduler bench: steady decode, %d blocks of %d tokens, %d timed steps, seed %llu\n"
                "us per schedule() + update_after_step() (goal: <= 20 us median at 256 running)\n\n",
                num_blocks, block_size, steps, static_cast<unsigned long long>(seed));
    std::printf("%-9s %-14s %8s %10s %10s %10s\n", "policy", "prefix cache", "running", "median us", "mean us", "p99 us");
    for (const std::string& policy : policies)
        for (const std::string& caching_mode : caching_modes)
            for (int n : running) {
                const bool caching = caching_mode == "on";
                const Timing t = run({policy, caching, n}, steps, num_blocks, block_size, seed);
                std::printf("%-9s %-14s %8d %10.2f %10.2f %10.2f\n", policy.c_str(), caching ? "on" : "off", n, t.median_us,
                            t.mean_us, t.p99_us);
            }
    return 0;
}
