// A fixed pool of worker threads for the CPU kernels. The calling thread takes part in every job.
// Workers spin briefly between jobs (a decode step issues hundreds of small jobs: sleeping and waking
// through the kernel each time would cost more than the work), then sleep on a futex (std::atomic::wait).
// Not reentrant: one job at a time, issued from one thread (the engine thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace kvscope::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int num_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return num_threads_; }

    // Calls fn(task, thread) for every task in [0, num_tasks), spread over the threads; returns when all
    // are done. thread is in [0, size()) and identifies per-thread scratch space.
    template <class Fn>
    void run(int64_t num_tasks, Fn&& fn) {
        if (num_tasks <= 0) return;
        if (num_threads_ == 1 || num_tasks == 1) {
            for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
            return;
        }
        dispatch(num_tasks, &invoke<Fn>, &fn);
    }

private:
    using Trampoline = void (*)(void* ctx, int64_t task, int thread);
    template <class Fn>
    static void invoke(void* ctx, int64_t task, int thread) {
        (*static_cast<Fn*>(ctx))(task, thread);
    }
    void dispatch(int64_t num_tasks, Trampoline fn, void* ctx);
    void worker_main(int thread);
    void work(int thread);

    int num_threads_;
    std::vector<std::thread> workers_;
    // Job description, published by the release store of generation_.
    Trampoline job_fn_ = nullptr;
    void* job_ctx_ = nullptr;
    int64_t job_tasks_ = 0;
    alignas(64) std::atomic<int64_t> next_task_{0};
    alignas(64) std::atomic<uint32_t> generation_{0};
    alignas(64) std::atomic<int> busy_workers_{0};
    std::atomic<bool> stop_{false};
};

// The number of threads to use by default: the hardware threads, at most 16.
int default_num_threads();

}  // namespace kvscope::cpu
