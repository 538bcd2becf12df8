#include "cpu/thread_pool.h"

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

// A claim counter or a report: 24 bits tagged with the low 40 bits of a job's epoch.
constexpr int kCountBits = 24;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
uint64_t tagged(uint64_t epoch, int64_t count) { return epoch << kCountBits | static_cast<uint64_t>(count); }
// Negative when value is tagged with an earlier job than epoch, 0 for that job, positive for a later one.
int64_t age(uint64_t value, uint64_t epoch) { return static_cast<int64_t>(value - (epoch << kCountBits)) >> kCountBits; }
}  // namespace

int default_num_threads() {
    unsigned n = std::thread::hardware_concurrency();
    return static_cast<int>(std::clamp(n == 0 ? 1u : n, 1u, 16u));
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(1, num_threads)),
      claims_(std::make_unique<Line[]>(num_threads_)),
      done_(std::make_unique<Line[]>(num_threads_)) {
    for (int t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_relaxed);
    seq_.fetch_add(2, std::memory_order_release);
    seq_.notify_all();
    for (auto& w : workers_) w.join();
}

bool ThreadPool::read_job(uint32_t seq, Job& job) const {
    if (seq & 1) return false;
    job.fn = job_fn_.load(std::memory_order_relaxed);
    job.ctx = job_ctx_.load(std::memory_order_relaxed);
    job.tasks = job_tasks_.load(std::memory_order_relaxed);
    job.epoch = job_epoch_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    return seq_.load(std::memory_order_relaxed) == seq;
}

// A region's counter holds the offsets, from the region's first task, of its next task and of its end (12
// bits each: [next, end) is what is left), tagged with the job that last claimed from it. A counter tagged
// with an earlier job means none of this job's tasks is claimed yet. This is safe for a thread that holds an
// earlier job's fields (it read them while that job was current and claims after it ended): an ended job has
// no task left, so its counters are either tagged with it and empty, untouched only where its region was
// empty, or tagged with a later job. region_left makes a counter's value.
uint64_t ThreadPool::region_left(uint64_t epoch, int64_t next, int64_t end) {
    return tagged(epoch, next << kRegionIndexBits | end);
}

int64_t ThreadPool::claim(int region, const Job& job, bool front) {
    const int64_t begin = region_begin(job.tasks, num_threads_, region);
    const int64_t size = region_begin(job.tasks, num_threads_, region + 1) - begin;
    if (size == 0) return -1;
    std::atomic<uint64_t>& counter = claims_[region].value;
    uint64_t c = counter.load(std::memory_order_acquire);
    for (;;) {
        const int64_t a = age(c, job.epoch);
        if (a > 0) return -1;
        const int64_t next = a == 0 ? static_cast<int64_t>(c >> kRegionIndexBits & kMaxRegionTasks) : 0;
        const int64_t end = a == 0 ? static_cast<int64_t>(c & kMaxRegionTasks) : size;
        if (next >= end) return -1;
        const uint64_t want = front ? region_left(job.epoch, next + 1, end) : region_left(job.epoch, next, end - 1);
        if (counter.compare_exchange_weak(c, want, std::memory_order_acq_rel, std::memory_order_acquire))
            return begin + (front ? next : end - 1);
    }
}

int64_t ThreadPool::work(const Job& job, int thread, int64_t done) {
    for (int i = 0; i < num_threads_; ++i) {
        const int region = (thread + i) % num_threads_;
        const int64_t before = done;
        for (int64_t task; (task = claim(region, job, i == 0)) >= 0; ++done) job.fn(job.ctx, task, thread);
        // A plain store: only this thread writes its report, and a locked instruction here would wait for
        // the line to come back from the caller, which reads it.
        if (thread != 0 && done != before) done_[thread].value.store(tagged(job.epoch, done), std::memory_order_release);
    }
    return done;
}

void ThreadPool::dispatch(int64_t num_tasks, Trampoline fn, void* ctx) {
    const Job job{fn, ctx, num_tasks, ++epoch_};
    const uint32_t seq = seq_.load(std::memory_order_relaxed);
    seq_.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    job_fn_.store(fn, std::memory_order_relaxed);
    job_ctx_.store(ctx, std::memory_order_relaxed);
    job_tasks_.store(num_tasks, std::memory_order_relaxed);
    job_epoch_.store(job.epoch, std::memory_order_relaxed);
    // The caller's first task is claimed before the job is published, by a plain store: no other thread
    // can claim from this job yet, and none can claim from the previous one (it has ended). Its first task
    // then starts without waiting on a locked instruction for the job's line to reach the workers.
    const int64_t own = region_begin(num_tasks, num_threads_, 1);  // region 0 is [0, own), own >= 1
    claims_[0].value.store(region_left(job.epoch, 1, own), std::memory_order_relaxed);
    seq_.store(seq + 2, std::memory_order_release);
    // std::atomic::notify_all makes a futex call whenever any thread of the process waits on an atomic that
    // shares its slot in libstdc++'s table of waiters (16 slots, hashed by address: every 64-byte aligned
    // atomic lands in the same one), so another pool's sleeping workers cost each job of this one about
    // 1-2 us. A worker that reads sleepers_ == 0 here while it is just falling asleep is woken by the next
    // job; this one runs without it (the caller takes its tasks).
    if (sleepers_.load(std::memory_order_relaxed) > 0) seq_.notify_all();

    fn(ctx, 0, 0);
    const int64_t ran = work(job, 0, 1);
    for (int spin = 0;; ++spin) {
        int64_t done = ran;
        for (int t = 1; t < num_threads_; ++t) {
            const uint64_t d = done_[t].value.load(std::memory_order_acquire);
            if (age(d, job.epoch) == 0) done += static_cast<int64_t>(d & kCountMask);
        }
        if (done == num_tasks) return;
        if (spin < kCallerSpin)
            cpu_relax();
        else
            std::this_thread::yield();
    }
}

void ThreadPool::worker_main(int thread) {
    uint32_t seen = 0;
    for (;;) {
        uint32_t seq = seq_.load(std::memory_order_acquire);
        for (int i = 0; (seq == seen || (seq & 1)) && i < kWorkerSpin; ++i) {
            cpu_relax();
            seq = seq_.load(std::memory_order_acquire);
        }
        if (seq == seen) {
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            seq_.wait(seen, std::memory_order_acquire);
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
            continue;
        }
        Job job;
        if (!read_job(seq, job)) continue;  // rewritten meanwhile: read the next one
        seen = seq;
        if (stop_.load(std::memory_order_relaxed)) return;
        work(job, thread, 0);
    }
}

}  // namespace kvscope::cpu
