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
// About 50-100 microseconds of spinning before a worker sleeps; the waiting caller yields its core
// after a shorter spin, so a descheduled worker can run.
constexpr int kWorkerSpin = 20000;
constexpr int kCallerSpin = 2000;
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
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
    for (auto& w : workers_) w.join();
}

void ThreadPool::work(uint32_t epoch, int thread) {
    for (;;) {
        uint64_t c = claim_.load(std::memory_order_acquire);
        if (static_cast<uint32_t>(c >> 32) != epoch) return;
        // The job's fields are read after the claim and checked by the CAS below: dispatch() closes the
        // claim word before it rewrites them, so if any field read here already belongs to the next job,
        // the fence makes the CAS see the closed (changed) word and fail. A successful claim therefore
        // always pairs a task index with its own job's fn, ctx and task count.
        const Trampoline fn = job_fn_.load(std::memory_order_relaxed);
        void* ctx = job_ctx_.load(std::memory_order_relaxed);
        const int64_t tasks = job_tasks_.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        const int64_t task = static_cast<int64_t>(c & 0xffffffffu);
        if (task >= tasks) return;
        if (!claim_.compare_exchange_strong(c, c + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) continue;
        fn(ctx, task, thread);
        done_.fetch_add(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::dispatch(int64_t num_tasks, Trampoline fn, void* ctx) {
    const uint32_t epoch = epoch_.load(std::memory_order_relaxed) + 1;
    // Close the claim word first (new epoch, no task claimable) so that a worker still in the previous
    // job cannot claim with fields it reads from this one (see work()).
    claim_.store(static_cast<uint64_t>(epoch) << 32 | 0xffffffffu, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    job_fn_.store(fn, std::memory_order_relaxed);
    job_ctx_.store(ctx, std::memory_order_relaxed);
    job_tasks_.store(num_tasks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    claim_.store(static_cast<uint64_t>(epoch) << 32, std::memory_order_release);
    epoch_.store(epoch, std::memory_order_release);
    epoch_.notify_all();
    work(epoch, 0);
    for (int spin = 0; done_.load(std::memory_order_acquire) != num_tasks; ++spin) {
        if (spin < kCallerSpin)
            cpu_relax();
        else
            std::this_thread::yield();
    }
}

void ThreadPool::worker_main(int thread) {
    uint32_t seen = 0;
    for (;;) {
        uint32_t e = epoch_.load(std::memory_order_acquire);
        for (int i = 0; e == seen && i < kWorkerSpin; ++i) {
            cpu_relax();
            e = epoch_.load(std::memory_order_acquire);
        }
        if (e == seen) {
            epoch_.wait(seen, std::memory_order_acquire);
            continue;
        }
        seen = e;
        if (stop_.load(std::memory_order_relaxed)) return;
        work(e, thread);
    }
}

}  // namespace kvscope::cpu
