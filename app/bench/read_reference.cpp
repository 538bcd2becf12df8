#include "bench/read_reference.h"

#include "cpu/cpu_kernel_sets.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace kvscope::bench {

double median_seconds(const std::function<void()>& fn, double min_time) {
    fn();
    std::vector<double> times;
    double total = 0;
    while (times.size() < 5 || (total < min_time && times.size() < 10000)) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        times.push_back(s);
        total += s;
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    return times[times.size() / 2];
}

// In 16 parts per thread, as a GEMV's tasks: on a shared machine a descheduled thread's part is taken by the
// others instead of holding up the pass. A part is a multiple of every stream count's lines.
ReadReference::ReadReference(Backend& backend, int threads, double min_time)
    : backend_(backend), pool_(threads), min_time_(min_time), buf_(static_cast<uint8_t*>(backend.allocate(kBytes))),
      parts_(threads * 16), part_bytes_(kBytes / parts_ / 4096 * 4096), sink_(parts_) {
    std::memset(buf_, 1, kBytes);
}

ReadReference::~ReadReference() { backend_.deallocate(buf_); }

double ReadReference::read_at(int streams) {
    const auto read_streams = cpu::chosen_cpu_kernel_set().read_streams;
    const double t = median_seconds([&] {
        pool_.run(parts_, [&](int64_t part, int) { sink_[part] = read_streams(buf_ + part * part_bytes_, part_bytes_, streams); });
    }, min_time_);
    return static_cast<double>(part_bytes_ * parts_) / t / 1e9;
}

double ReadReference::best(int& best_streams, std::string& tried) {
    double best = 0;
    for (int streams : {1, 2, 4, 8}) {
        const double gbs = read_at(streams);
        if (gbs > best) best = gbs, best_streams = streams;
        char one[32];
        std::snprintf(one, sizeof one, "%s%d: %.1f", tried.empty() ? "" : ", ", streams, gbs);
        tried += one;
    }
    return best;
}

}  // namespace kvscope::bench
