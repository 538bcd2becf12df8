// ThreadPool (cpu/thread_pool.h): every task runs exactly once with a thread id in range, for many job
// sizes and thread counts; back-to-back tiny jobs (a decode step issues hundreds) stay fast; the pool
// is destroyed cleanly while idle, asleep, or just after a job. TaskRegions (cpu/task_regions.h) hands
// out every task once, each thread its own region in order first.
#include "test_support.h"

#include "cpu/task_regions.h"
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

    // Claimed inside pool jobs, as for_each_tile does: every task exactly once, whatever the counts.
    void regions_claim_every_task_once() {
        for (int threads : {1, 2, 3, 5}) {
            ThreadPool pool(threads);
            for (int64_t num_tasks : {int64_t(1), int64_t(2), int64_t(4), int64_t(16), int64_t(17), int64_t(1001)}) {
                TaskRegions regions(num_tasks, pool.size());
                std::vector<std::atomic<int>> runs(static_cast<size_t>(num_tasks));
                std::atomic<int> missing{0};
                pool.run(num_tasks, [&](int64_t, int thread) {
                    const int64_t task = regions.claim(thread);
                    if (task < 0 || task >= num_tasks) missing.fetch_add(1);
                    else runs[static_cast<size_t>(task)].fetch_add(1, std::memory_order_relaxed);
                });
                QCOMPARE(missing.load(), 0);
                for (int64_t t = 0; t < num_tasks; ++t)
                    QVERIFY2(runs[static_cast<size_t>(t)].load() == 1,
                             qPrintable(QString("threads=%1 tasks=%2: task %3 claimed %4 times")
                                            .arg(threads).arg(num_tasks).arg(t).arg(runs[t].load())));
            }
        }
    }

    // A thread's claims run through its own region in order, then the others' from the next one on.
    void regions_own_run_first() {
        TaskRegions regions(10, 3);  // regions [0, 3), [3, 6), [6, 10)
        QCOMPARE(regions.claim(1), int64_t(3));
        QCOMPARE(regions.claim(1), int64_t(4));
        QCOMPARE(regions.claim(2), int64_t(6));
        QCOMPARE(regions.claim(1), int64_t(5));
        QCOMPARE(regions.claim(1), int64_t(7));  // own region done: the next region's front
        QCOMPARE(regions.claim(0), int64_t(0));
        std::vector<int64_t> rest;
        for (int i = 0; i < 4; ++i) rest.push_back(regions.claim(0));
        QCOMPARE(rest, (std::vector<int64_t>{1, 2, 8, 9}));
        QCOMPARE(regions.claim(2), int64_t(-1));  // all claimed
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
    void changing_task_counts() {
        // On a worker thread of the test, so that a hang fails the test in a minute instead of at the
        // CTest timeout.
        std::atomic<bool> finished{false};
        QString failure;
        std::thread driver([&] {
            ThreadPool pool(2);  // the caller often finishes a job alone before the worker looks
            std::atomic<int> runs[3];
            for (int j = 0; j < 3000000 && failure.isEmpty(); ++j) {
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

    // Jobs issued after the workers fell asleep (past their spin) still run, repeatedly.
    void wakes_after_sleep() {
        ThreadPool pool(3);
        for (int round = 0; round < 5; ++round) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            std::atomic<int> count{0};
            pool.run(64, [&](int64_t, int) { count.fetch_add(1); });
            QCOMPARE(count.load(), 64);
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
