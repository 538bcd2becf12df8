// ThreadPool (cpu/thread_pool.h): every task runs exactly once with a thread id in range, for many job
// sizes and thread counts; back-to-back tiny jobs (a decode step issues hundreds) stay fast; the pool
// is destroyed cleanly while idle, asleep, or just after a job. Each thread runs its own region's tasks in
// order.
#include "test_support.h"

#include "cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

using namespace kvscope::cpu;

class TestThreadPool : public QObject {
    Q_OBJECT

private slots:
    void every_task_once_data() {
        QTest::addColumn<int>("threads");
        for (int t : {1, 2, 3, 4, 8}) QTest::addRow("threads=%d", t) << t;
    }
    void every_task_once() {
        QFETCH(int, threads);
        ThreadPool pool(threads);
        QCOMPARE(pool.size(), threads);
        for (int64_t num_tasks : {int64_t(0), int64_t(1), int64_t(2), int64_t(3), int64_t(7), int64_t(16),
                                  int64_t(17), int64_t(100), int64_t(1000), int64_t(12345), int64_t(100003)}) {
            std::vector<std::atomic<int>> runs(static_cast<size_t>(num_tasks));
            std::atomic<int> bad_thread{0};
            pool.run(num_tasks, [&](int64_t task, int thread) {
                if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
                runs[static_cast<size_t>(task)].fetch_add(1, std::memory_order_relaxed);
            });
            QCOMPARE(bad_thread.load(), 0);
            for (int64_t t = 0; t < num_tasks; ++t)
                QVERIFY2(runs[static_cast<size_t>(t)].load() == 1,
                         qPrintable(QString("tasks=%1: task %2 ran %3 times").arg(num_tasks).arg(t).arg(runs[t].load())));
        }
    }

    // Regions: contiguous, in thread order, covering every task once; the caller's first.
    void region_bounds() {
        for (int threads : {2, 3, 5, 16})
            for (int64_t num_tasks : {int64_t(1), int64_t(2), int64_t(3), int64_t(4), int64_t(15), int64_t(17),
                                      int64_t(1001)}) {
                QCOMPARE(ThreadPool::region_begin(num_tasks, threads, 0), int64_t(0));
                QCOMPARE(ThreadPool::region_begin(num_tasks, threads, threads), num_tasks);
                for (int r = 0; r < threads; ++r) {
                    const int64_t b = ThreadPool::region_begin(num_tasks, threads, r);
                    const int64_t e = ThreadPool::region_begin(num_tasks, threads, r + 1);
                    QVERIFY(b <= e);
                    // Balanced: no region more than one task longer than another.
                    QVERIFY2(e - b <= num_tasks / threads + 1,
                             qPrintable(QString("threads=%1 tasks=%2 region %3: [%4, %5)")
                                            .arg(threads).arg(num_tasks).arg(r).arg(b).arg(e)));
                }
                // With fewer tasks than threads, the first threads get one each: the caller has work at once.
                if (num_tasks < threads) QCOMPARE(ThreadPool::region_begin(num_tasks, threads, 1), int64_t(1));
            }
    }

    // A thread takes its own region's tasks in order from the front and another region's from the back (a
    // region's tasks are claimed from one counter), so the tasks a thread runs from its own region increase
    // and those it runs from another's decrease. Seen with tasks that take long enough for both threads to
    // run some of each region.
    void a_threads_tasks_of_a_region_in_order() {
        for (int threads : {2, 3}) {
            ThreadPool pool(threads);
            int stolen = 0;
            for (int round = 0; round < 50; ++round) {
                const int64_t num_tasks = 64 + round;
                std::vector<std::vector<int64_t>> ran(static_cast<size_t>(threads));
                pool.run(num_tasks, [&](int64_t task, int thread) {
                    ran[static_cast<size_t>(thread)].push_back(task);
                    if (task % 7 == round % 7) std::this_thread::sleep_for(std::chrono::microseconds(20));
                });
                int64_t total = 0;
                for (int t = 0; t < threads; ++t) {
                    total += static_cast<int64_t>(ran[t].size());
                    std::vector<int64_t> last(static_cast<size_t>(threads), -1);
                    for (int64_t task : ran[t]) {
                        int r = 0;
                        while (ThreadPool::region_begin(num_tasks, threads, r + 1) <= task) ++r;
                        if (r != t) ++stolen;
                        const bool in_order = last[r] < 0 || (r == t ? task > last[r] : task < last[r]);
                        QVERIFY2(in_order, qPrintable(QString("thread %1 ran task %2 after %3 of region %4")
                                                          .arg(t).arg(task).arg(last[r]).arg(r)));
                        last[r] = task;
                    }
                }
                QCOMPARE(total, num_tasks);
            }
            QVERIFY2(stolen > 0, "no thread ever ran another's task: the order of stolen tasks went unchecked");
        }
    }

    // Jobs larger than the claim counters hold run in parts: every task still once.
    void job_larger_than_counters() {
        ThreadPool pool(2);
        const int64_t num_tasks = 3 * 4095 * 2 + 17;
        std::vector<std::atomic<int>> runs(static_cast<size_t>(num_tasks));
        pool.run(num_tasks, [&](int64_t task, int) { runs[static_cast<size_t>(task)].fetch_add(1); });
        for (int64_t t = 0; t < num_tasks; ++t) QCOMPARE(runs[static_cast<size_t>(t)].load(), 1);
    }

    // The caller's first task is its region's first, whatever the workers do.
    void caller_starts_its_region() {
        ThreadPool pool(3);
        for (int round = 0; round < 1000; ++round) {
            int64_t first = -1;
            pool.run(30, [&](int64_t task, int thread) {
                if (thread == 0 && first < 0) first = task;
            });
            QCOMPARE(first, int64_t(0));
        }
    }

    // run() returns only when every task is done: plain (non-atomic) writes are visible afterwards,
    // and per-thread slots indexed by the thread id never collide.
    void results_visible_after_run() {
        ThreadPool pool(3);
        std::vector<int64_t> out(5000);
        std::vector<int64_t> per_thread_sum(pool.size(), 0);
        for (int round = 0; round < 50; ++round) {
            pool.run(static_cast<int64_t>(out.size()), [&](int64_t task, int thread) {
                out[static_cast<size_t>(task)] = task * round;
                per_thread_sum[thread] += task;
            });
            for (size_t i = 0; i < out.size(); ++i) QCOMPARE(out[i], static_cast<int64_t>(i) * round);
        }
        int64_t total = 0;
        for (int64_t s : per_thread_sum) total += s;
        QCOMPARE(total, int64_t(50) * 4999 * 5000 / 2);
    }

    // 100k tiny jobs back to back: what a decode step does. Must neither lose a job nor take long.
    // With more threads than hardware threads every job waits for a descheduled worker (dispatch spins
    // until all workers checked in), so that row runs fewer jobs and only checks that none is lost.
    void back_to_back_tiny_jobs_data() {
        QTest::addColumn<int>("threads");
        QTest::addColumn<int>("tasks");
        QTest::addColumn<int>("jobs");
        const int hw = default_num_threads();
        const int t = std::min(hw, 4);
        QTest::addRow("threads=%d tasks=1", t) << t << 1 << 100000;
        QTest::addRow("threads=%d tasks=%d", t, t) << t << t << 100000;
        QTest::addRow("threads=%d tasks=16", t) << t << 16 << 20000;
        QTest::addRow("oversubscribed threads=%d tasks=%d", hw + 1, hw + 1) << hw + 1 << hw + 1 << 300;
    }
    void back_to_back_tiny_jobs() {
        QFETCH(int, threads);
        QFETCH(int, tasks);
        QFETCH(int, jobs);
        ThreadPool pool(threads);
        std::atomic<int64_t> count{0};
        const auto t0 = std::chrono::steady_clock::now();
        for (int j = 0; j < jobs; ++j)
            pool.run(tasks, [&](int64_t, int) { count.fetch_add(1, std::memory_order_relaxed); });
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        QCOMPARE(count.load(), int64_t(jobs) * tasks);
        qInfo("%d jobs of %d tasks on %d threads: %.2f us per job", jobs, tasks, threads, seconds / jobs * 1e6);
        // Generous: this machine may be shared; a lost wake-up would hang instead.
        QVERIFY2(seconds < 60.0, qPrintable(QString("%1 s").arg(seconds)));
    }

    // Back-to-back jobs whose task counts change from one job to the next (a decode step's matmuls and
    // attention do). A worker still finishing job E must never take a task of job E + 1 with E's claim:
    // that ran a task twice (or out of range) and left the done count one too high, so the caller
    // waited forever (seen in kvscope-kernel-bench).
    // With more threads than cores, workers are descheduled between reading a job and claiming from it,
    // so they claim late, from regions that later jobs have retagged.
    void changing_task_counts_data() {
        QTest::addColumn<int>("threads");
        QTest::addColumn<int>("jobs");
        QTest::addRow("threads=2") << 2 << 3000000;  // the caller often finishes a job alone before the worker looks
        const int over = default_num_threads() + 2;
        QTest::addRow("oversubscribed threads=%d", over) << over << 20000;
    }
    void changing_task_counts() {
        QFETCH(int, threads);
        QFETCH(int, jobs);
        // On a worker thread of the test, so that a hang fails the test in a minute instead of at the
        // CTest timeout.
        std::atomic<bool> finished{false};
        QString failure;
        std::thread driver([&] {
            ThreadPool pool(threads);
            std::atomic<int> runs[3];
            for (int j = 0; j < jobs && failure.isEmpty(); ++j) {
                const int tasks = 2 + j % 2;
                for (auto& r : runs) r.store(0, std::memory_order_relaxed);
                std::atomic<int> out_of_range{0};
                pool.run(tasks, [&](int64_t task, int) {
                    if (task >= tasks) out_of_range.fetch_add(1);
                    else runs[task].fetch_add(1, std::memory_order_relaxed);
                });
                for (int t = 0; t < tasks; ++t)
                    if (runs[t].load() != 1 || out_of_range.load() != 0)
                        failure = QString("job %1 (%2 tasks): task %3 ran %4 times, %5 out of range")
                                      .arg(j).arg(tasks).arg(t).arg(runs[t].load()).arg(out_of_range.load());
            }
            finished = true;
        });
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!finished && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (!finished) qFatal("ThreadPool hung: a job never completed (lost or doubled task)");
        driver.join();
        QVERIFY2(failure.isEmpty(), qPrintable(failure));
    }

    // Jobs issued after the workers fell asleep (past their spin) still run, repeatedly, and wake the workers:
    // each task of a 3-task job waits (up to 5 s) until all three threads hold one, which only woken workers do.
    void wakes_after_sleep() {
        ThreadPool pool(3);
        for (int round = 0; round < 5; ++round) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            std::atomic<int> count{0};
            pool.run(64, [&](int64_t, int) { count.fetch_add(1); });
            QCOMPARE(count.load(), 64);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            std::atomic<int> arrived{0};
            std::atomic<unsigned> threads_seen{0};
            pool.run(3, [&](int64_t, int thread) {
                threads_seen.fetch_or(1u << thread);
                arrived.fetch_add(1);
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                while (arrived.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
            });
            QCOMPARE(threads_seen.load(), 7u);
        }
    }

    void destruction_while_idle() {
        {  // never used: workers may not even have started
            ThreadPool pool(4);
        }
        {  // just after a job, while workers spin
            ThreadPool pool(4);
            std::atomic<int> count{0};
            pool.run(100, [&](int64_t, int) { count.fetch_add(1); });
            QCOMPARE(count.load(), 100);
        }
        {  // after the workers went to sleep
            ThreadPool pool(4);
            pool.run(8, [](int64_t, int) {});
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        for (int i = 0; i < 200; ++i) {  // many short lives
            auto pool = std::make_unique<ThreadPool>(1 + i % 4);
            if (i % 2) pool->run(5, [](int64_t, int) {});
        }
        QVERIFY(true);
    }

    void single_thread_runs_inline() {
        ThreadPool pool(1);
        const auto caller = std::this_thread::get_id();
        bool same = true;
        pool.run(10, [&](int64_t, int thread) { same = same && thread == 0 && std::this_thread::get_id() == caller; });
        QVERIFY(same);
        QVERIFY(default_num_threads() >= 1 && default_num_threads() <= 16);
    }
};

QTEST_GUILESS_MAIN(TestThreadPool)
#include "test_thread_pool.moc"
