// The memory-read reference of the decode roofline, shared by kvscope-kernel-bench (beside each streamed GEMV)
// and kvscope-model-bench (beside tg): how fast these threads read memory, measured in the same run as what it
// is set against, because on a shared machine a neighbour takes half the bus within seconds.
#pragma once

#include "backend.h"
#include "cpu/thread_pool.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kvscope::bench {

// Median seconds of one call: at least 5 repeats and at least min_time seconds in all (after a warm-up).
double median_seconds(const std::function<void()>& fn, double min_time);

class ReadReference {
public:
    static constexpr size_t kBytes = size_t{256} << 20;  // 8x a 32 MiB L3

    // The buffer comes from `backend` (a CPU backend) and is written once, as repacked weights are (2 MiB pages
    // where the OS gives them: 4 KiB ones read slower).
    ReadReference(Backend& backend, int threads, double min_time);
    ~ReadReference();
    ReadReference(const ReadReference&) = delete;
    ReadReference& operator=(const ReadReference&) = delete;

    // GB/s of the chosen kernel set's read kernel (cpu_kernel_sets.h) at `streams` per thread.
    double read_at(int streams);
    // The best of 1, 2, 4 and 8 streams per thread: one stream per thread read 25% below the F32 GEMV, which
    // streams four panels at once; how many streams a core needs to keep enough misses in flight is the CPU's
    // business. Sets best_streams; appends "1: x, 2: y, ..." to tried.
    double best(int& best_streams, std::string& tried);

private:
    Backend& backend_;
    cpu::ThreadPool pool_;
    double min_time_;
    uint8_t* buf_;
    int parts_;
    size_t part_bytes_;
    std::vector<uint64_t> sink_;
};

}  // namespace kvscope::bench
