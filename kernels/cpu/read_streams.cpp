// The memory-read kernel behind the decode roofline's bandwidth figure (kvscope-kernel-bench): the
// fastest a thread of this kernel set reads memory, to measure the GEMVs against. Compiled per set, so it
// reads in the set's widest vectors whatever flags the bench itself was built with.
#include "cpu/cpu_backend.h"
#include "cpu/simd.h"

#include <cstring>

namespace KVSCOPE_CPU_NAMESPACE {

namespace {

// One register of the set (16, 32 or 64 bytes) as 64-bit lanes.
typedef uint64_t vu64 __attribute__((vector_size(4 * KVSCOPE_CPU_LANES)));
constexpr int kLine = 64;

// S equal parts of p read side by side, a cache line of each per step: S sequential streams in flight
// at once, as the panel GEMV reads its panels. One sequential stream per thread read well below what the
// GEMVs streamed (a core's misses in flight, and its prefetcher's streams, are what bound it).
template <int S>
uint64_t sum_streams(const uint8_t* p, size_t bytes) {
    constexpr int kPerLine = kLine / sizeof(vu64);
    const size_t per = bytes / S / kLine * kLine;  // bytes of each stream
    vu64 acc[S] = {};
    for (size_t i = 0; i < per; i += kLine)
        for (int s = 0; s < S; ++s)
            for (int j = 0; j < kPerLine; ++j) {
                vu64 v;
                std::memcpy(&v, p + s * per + i + j * sizeof v, sizeof v);
                acc[s] += v;
            }
    vu64 total = {};
    for (int s = 0; s < S; ++s) total += acc[s];
    uint64_t sum = 0;
    for (size_t j = 0; j < sizeof total / sizeof sum; ++j) sum += total[j];
    return sum;
}

}  // namespace

uint64_t read_streams(const void* data, size_t bytes, int streams) {
    uint64_t sum = 0;
    with_constant<kMaxReadStreams>(streams, [&](auto S) { sum = sum_streams<S()>(static_cast<const uint8_t*>(data), bytes); });
    return sum;
}

}  // namespace KVSCOPE_CPU_NAMESPACE
