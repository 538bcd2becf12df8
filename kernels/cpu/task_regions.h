// Tasks handed out to pool threads by region: one contiguous run of tasks per thread, each thread's own run
// first and in order, then what is left of the others'.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace kvscope::cpu {

// The tasks split into one contiguous region per thread. Each thread takes its own region's tasks in
// order, so that it reads its weight rows as one sequential stream, then helps with what is left of the
// others'. Tasks handed out from one shared counter alternate between the threads, and every thread
// jumped to a new part of the matrix at each task: a Q8_0 decode step ran 10-15% slower that way
// (kvscope-model-bench tg128, bench-135m Q8_0 and Q6_K), while a few large tasks left a thread that the
// OS deschedules holding up the step.
class TaskRegions {
public:
    TaskRegions(int64_t num_tasks, int num_threads) : regions_(static_cast<size_t>(num_threads)) {
        for (int r = 0; r < num_threads; ++r) {
            regions_[r].next.store(num_tasks * r / num_threads, std::memory_order_relaxed);
            regions_[r].end = num_tasks * (r + 1) / num_threads;
        }
    }
    // A task not yet claimed: the caller's region first, then the others' in turn; -1 once every task is
    // claimed (a region once empty stays empty). Called once per task, it always finds one; decode's
    // for_each_tile claims two at a time and takes the -1 as the end.
    int64_t claim(int thread) {
        const int num = static_cast<int>(regions_.size());
        for (int i = 0; i < num; ++i) {
            Region& region = regions_[(thread + i) % num];
            if (region.next.load(std::memory_order_relaxed) >= region.end) continue;
            const int64_t task = region.next.fetch_add(1, std::memory_order_relaxed);
            if (task < region.end) return task;
        }
        return -1;
    }

private:
    struct alignas(64) Region {
        std::atomic<int64_t> next{0};
        int64_t end = 0;
    };
    std::vector<Region> regions_;
};

}  // namespace kvscope::cpu
