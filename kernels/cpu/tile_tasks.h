// How the row-major matmuls (matmul.cpp's dot tiles, matmul_q8.cpp's int8 tiles) spread an [n, N] output
// over the pool: tiles of tile_w weight rows, grouped into tasks, and inside a task the x rows in chunks.
#pragma once

#include "cpu/kernel_set.h"
#include "cpu/thread_pool.h"

#include <algorithm>
#include <cstdint>

KVSCOPE_CPU_KERNEL_SET_ONLY("cpu/tile_tasks.h");

namespace KVSCOPE_CPU_NAMESPACE {

// x rows in chunks that stay in L2 while a task's weight rows pass over them.
constexpr int kChunkX = 64;

struct TileTasks {
    int64_t num_tiles, tiles_per_task, num_tasks;
    // Enough tasks for balance (8 per thread), few enough that each streams a good run of weight rows.
    TileTasks(int64_t N, int tile_w, int num_threads)
        : num_tiles((N + tile_w - 1) / tile_w),
          tiles_per_task(std::max<int64_t>(1, num_tiles / (int64_t{num_threads} * 8))),
          num_tasks((num_tiles + tiles_per_task - 1) / tiles_per_task) {}
    int64_t first(int64_t task) const { return task * tiles_per_task; }
    int64_t end(int64_t task) const { return std::min(num_tiles, first(task) + tiles_per_task); }
};

// fn(tile, x0, nx, thread) for every weight tile and every chunk [x0, x0 + nx) of the n x rows: a task
// takes its tiles chunk by chunk, so that each chunk stays cached while the task's weight rows pass, and a
// task's first call is (first(task), 0) (n > 1).
// Single-row decode reads kDecodeStreams tasks' weight rows side by side, a tile of each in turn: two
// sequential streams per thread. One stream per thread read memory at 32-39 GB/s here where two read
// 44-47 (kvscope-kernel-bench's read reference); two took bench-135m's tg128 from 168 to 196 t/s on Q8_0
// and from 174 to 196 on Q6_K (kvscope-model-bench, alternating runs), four no further. A caller whose
// tiles already read several streams passes its own count (matmul_x8's decode groups pass 1).
constexpr int kDecodeStreams = 2;

template <class Fn>
void for_each_tile(ThreadPool& pool, const TileTasks& tasks, int n, Fn&& fn, int decode_streams = kDecodeStreams) {
    if (n == 1) {
        // A pool task reads `streams` consecutive tasks' tiles side by side; the pool hands a thread its own
        // region's pool tasks in order, so its streams move through one part of the matrix.
        const int streams = std::clamp(decode_streams, 1, kDecodeStreams);
        pool.run((tasks.num_tasks + streams - 1) / streams, [&](int64_t p, int thread) {
            int64_t tile[kDecodeStreams], end[kDecodeStreams];
            int live = 0;
            for (int64_t task = p * streams; live < streams && task < tasks.num_tasks; ++live, ++task) {
                tile[live] = tasks.first(task);
                end[live] = tasks.end(task);
            }
            for (bool more = true; more;) {
                more = false;
                for (int s = 0; s < live; ++s)
                    if (tile[s] < end[s]) {
                        fn(tile[s]++, 0, 1, thread);
                        more = true;
                    }
            }
        });
        return;
    }
    pool.run(tasks.num_tasks, [&](int64_t task, int thread) {
        for (int x0 = 0; x0 < n; x0 += kChunkX) {
            const int nx = std::min(kChunkX, n - x0);
            for (int64_t tile = tasks.first(task); tile < tasks.end(task); ++tile) fn(tile, x0, nx, thread);
        }
    });
}

}  // namespace KVSCOPE_CPU_NAMESPACE
