// A fixed pool of worker threads for the CPU kernels. The calling thread takes part in every job.
// Workers spin briefly between jobs (a decode step issues hundreds of small jobs: sleeping and waking
// through the kernel each time would cost more than the work), then sleep on a futex (std::atomic::wait).
// Tasks are claimed from a counter tagged with the job's epoch, and the caller waits for tasks, not for
// workers: a worker that the OS has descheduled never holds up a job (the machines are shared, and
// waiting for every worker to check in made a busy machine 100x slower).
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
        dispatch(num_tasks, &invoke<std::remove_reference_t<Fn>>, &fn);
    }

private:
    using Trampoline = void (*)(void* ctx, int64_t task, int thread);
    template <class Fn>
    static void invoke(void* ctx, int64_t task, int thread) {
        (*static_cast<Fn*>(ctx))(task, thread);
    }
    void dispatch(int64_t num_tasks, Trampoline fn, void* ctx);
    void worker_main(int thread);
    // Claims and runs tasks of the job of `epoch` until none is left or the job is over.
    void work(uint32_t epoch, int thread);

    int num_threads_;
    std::vector<std::thread> workers_;
    // The job: written by the caller after it closes claim_ and before it publishes the epoch; workers
    // read it after claim_ and trust it only when their CAS on claim_ succeeds (see work()).
    std::atomic<Trampoline> job_fn_{nullptr};
    std::atomic<void*> job_ctx_{nullptr};
    std::atomic<int64_t> job_tasks_{0};
    alignas(64) std::atomic<uint64_t> claim_{0};  // (epoch << 32) | next task
    alignas(64) std::atomic<int64_t> done_{0};    // tasks finished in the current job
    alignas(64) std::atomic<uint32_t> epoch_{0};  // what sleeping workers wait on
    std::atomic<bool> stop_{false};
};

// Grows per-thread scratch (one buffer per pool thread) to at least `count` elements each, plus a page of
// slack at the end: the buffers are separate heap blocks that malloc may place back to back, and a thread's
// writes must not land on lines that the other core holds, shared at a buffer's end or fetched there by its
// prefetchers.
template <class T>
void reserve_per_thread(std::vector<std::vector<T>>& scratch, const ThreadPool& pool, size_t count) {
    if (scratch.size() < static_cast<size_t>(pool.size())) scratch.resize(pool.size());
    const size_t padded = count + (4096 + sizeof(T) - 1) / sizeof(T);
    for (auto& s : scratch)
        if (s.size() < padded) s.resize(padded);
}

// The number of threads to use by default: the hardware threads, at most 16.
int default_num_threads();

}  // namespace kvscope::cpu
