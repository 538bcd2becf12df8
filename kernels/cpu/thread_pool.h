// A fixed pool of worker threads for the CPU kernels. The calling thread takes part in every job.
// Workers spin briefly between jobs (a decode step issues hundreds of small jobs: sleeping and waking
// through the kernel each time would cost more than the work), then sleep on a futex (std::atomic::wait).
//
// A job's tasks are split into one contiguous region per thread. Each thread runs its own region's tasks in
// order from the front, so that it reads its weight rows as one sequential stream, then helps with what is
// left of the others' from their backs. Tasks handed out from one shared counter alternated between the
// threads, and every thread jumped to a new part of the matrix at each task: a Q8_0 decode step ran 10-15%
// slower that way. A thread that took another's next task broke that one's stream where its prefetchers
// were already reading: streamed Q8_0 GEMVs lost about 10% on a quiet memory bus.
//
// The caller waits for tasks, not for workers: a worker that the OS has descheduled never holds up a job
// (the machines are shared, and waiting for every worker to check in made a busy machine 100x slower); the
// others take its region.
//
// Each region's claim counter and each thread's report of finished tasks has a cache line of its own, kept
// from job to job and tagged with the job's epoch instead of being reset, so that in the usual job a worker
// touches one line that another core wrote (the job) and one that another core reads (its report). On the
// two far-apart vCPUs of our machines a line moving between cores costs about 250 ns, and a decode step
// issues about 150 jobs.
//
// Not reentrant: one job at a time, issued from one thread (the engine thread).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

namespace kvscope::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int num_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return num_threads_; }

    // Calls fn(task, thread) for every task in [0, num_tasks), spread over the threads by region (see
    // above); returns when all are done. thread is in [0, size()) and identifies per-thread scratch space.
    template <class Fn>
    void run(int64_t num_tasks, Fn&& fn) {
        if (num_tasks <= 0) return;
        if (num_threads_ == 1 || num_tasks == 1) {
            for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
            return;
        }
        const int64_t max_tasks = int64_t{kMaxRegionTasks - 1} * num_threads_;
        if (num_tasks > max_tasks) {  // in parts whose regions fit a claim counter
            for (int64_t base = 0; base < num_tasks; base += max_tasks) {
                auto part = [&](int64_t task, int thread) { fn(base + task, thread); };
                dispatch(std::min(max_tasks, num_tasks - base), &invoke<decltype(part)>, &part);
            }
            return;
        }
        dispatch(num_tasks, &invoke<std::remove_reference_t<Fn>>, &fn);
    }

    // The first task of `region`'s run when a job of num_tasks tasks is split over num_threads threads; region
    // r holds [region_begin(r), region_begin(r + 1)). With fewer tasks than threads, the first threads (the
    // caller first) get one task each.
    static int64_t region_begin(int64_t num_tasks, int num_threads, int region) {
        return num_tasks >= num_threads ? num_tasks * region / num_threads : std::min<int64_t>(region, num_tasks);
    }

private:
    static constexpr int kRegionIndexBits = 12;  // a region's next and end take 12 bits each
    static constexpr int kMaxRegionTasks = (1 << kRegionIndexBits) - 1;
    using Trampoline = void (*)(void* ctx, int64_t task, int thread);
    template <class Fn>
    static void invoke(void* ctx, int64_t task, int thread) {
        (*static_cast<Fn*>(ctx))(task, thread);
    }
    struct Job {
        Trampoline fn;
        void* ctx;
        int64_t tasks;
        uint64_t epoch;
    };
    struct alignas(64) Line {
        std::atomic<uint64_t> value{0};  // (epoch << 24) | 24 bits: see claim() and dispatch()
    };

    void dispatch(int64_t num_tasks, Trampoline fn, void* ctx);
    void worker_main(int thread);
    // The job published with sequence number seq into job, if it is still the current one.
    bool read_job(uint32_t seq, Job& job) const;
    static uint64_t region_left(uint64_t epoch, int64_t next, int64_t end);
    // A task of `region` not yet claimed in the job, or -1: its first if `front`, else its last.
    int64_t claim(int region, const Job& job, bool front);
    // Runs tasks of the job, the thread's own region first, then the others'; returns how many. A worker
    // reports its count as it goes.
    int64_t work(const Job& job, int thread, int64_t done);

    int num_threads_;
    std::vector<std::thread> workers_;
    // The job, under a sequence lock: seq_ is odd while the caller rewrites the fields. Workers wait on seq_.
    alignas(64) std::atomic<uint32_t> seq_{0};
    std::atomic<int> sleepers_{0};  // workers inside seq_.wait: a job with none to wake makes no system call
    std::atomic<Trampoline> job_fn_{nullptr};
    std::atomic<void*> job_ctx_{nullptr};
    std::atomic<int64_t> job_tasks_{0};
    std::atomic<uint64_t> job_epoch_{0};
    std::atomic<bool> stop_{false};
    std::unique_ptr<Line[]> claims_;  // per region: the next task to claim, for the epoch it is tagged with
    std::unique_ptr<Line[]> done_;    // per thread: the tasks it finished in the epoch it is tagged with
    uint64_t epoch_ = 0;              // the caller's count of jobs
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
