#include "cpu/thread_pool.h"

#include <algorithm>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kvscope::cpu {

namespace {
inline void cpu_relax() {
#if defined(__x86_64__)
    _mm_pause();
#endif
}
// About 50-100 microseconds of spinning before a worker sleeps.
constexpr int kSpinIterations = 20000;
}  // namespace

int default_num_threads() {
    unsigned n = std::thread::hardware_concurrency();
    return static_cast<int>(std::clamp(n == 0 ? 1u : n, 1u, 16u));
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
    for (int t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
    for (;;) {
        int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
        if (task >= job_tasks_) break;
        job_fn_(job_ctx_, task, thread);
    }
}

void ThreadPool::dispatch(int64_t num_tasks, Trampoline fn, void* ctx) {
    job_fn_ = fn;
    job_ctx_ = ctx;
    job_tasks_ = num_tasks;
    next_task_.store(0, std::memory_order_relaxed);
    busy_workers_.store(num_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    work(0);
    while (busy_workers_.load(std::memory_order_acquire) != 0) cpu_relax();
}

void ThreadPool::worker_main(int thread) {
    uint32_t seen = 0;
    for (;;) {
        uint32_t gen = generation_.load(std::memory_order_acquire);
        for (int i = 0; gen == seen && i < kSpinIterations; ++i) {
            cpu_relax();
            gen = generation_.load(std::memory_order_acquire);
        }
        if (gen == seen) {
            generation_.wait(seen, std::memory_order_acquire);
            continue;
        }
        seen = gen;
        if (stop_.load(std::memory_order_relaxed)) return;
        work(thread);
        busy_workers_.fetch_sub(1, std::memory_order_release);
    }
}

}  // namespace kvscope::cpu
