// BenchmarkSummary against hand-computed values: numpy's linear percentiles, vLLM's TPOT / ITL / E2EL
// definitions, goodput, 1 s peak buckets, vLLM key names; plus StepRecorder's engine aggregates.
#include "metrics/export.h"
#include "metrics/step_recorder.h"
#include "metrics/summary.h"

#include <QtTest>

using namespace kvscope;

namespace {

// A finished request: arrival, token times (seconds) and finish = last token.
RequestMetrics req(double arrival, std::vector<double> tokens, FinishReason reason = FinishReason::LENGTH) {
    RequestMetrics m;
    m.arrival_time = arrival;
    m.num_prompt_tokens = 10;
    m.num_output_tokens = static_cast<int>(tokens.size());
    m.token_times = std::move(tokens);
    m.finish_time = m.token_times.empty() ? arrival : m.token_times.back();
    m.finish_reason = reason;
    return m;
}

}  // namespace

class TestSummary : public QObject {
    Q_OBJECT
private slots:
    void percentileMatchesNumpy_data() {
        QTest::addColumn<QVector<double>>("values");
        QTest::addColumn<double>("p");
        QTest::addColumn<double>("expected");
        // Expected values from numpy.percentile(values, p) (linear interpolation).
        QTest::newRow("median even") << QVector<double>{1, 2, 3, 4} << 50.0 << 2.5;
        QTest::newRow("p90") << QVector<double>{1, 2, 3, 4} << 90.0 << 3.7;
        QTest::newRow("p99") << QVector<double>{10, 20, 30, 40, 50} << 99.0 << 49.6;
        QTest::newRow("p99.9") << QVector<double>{0, 100} << 99.9 << 99.9;
        QTest::newRow("unsorted") << QVector<double>{3, 1, 2} << 50.0 << 2.0;
        QTest::newRow("p0 min") << QVector<double>{5, 7, 9} << 0.0 << 5.0;
        QTest::newRow("p100 max") << QVector<double>{5, 7, 9} << 100.0 << 9.0;
        QTest::newRow("single") << QVector<double>{42} << 99.0 << 42.0;
        QTest::newRow("empty") << QVector<double>{} << 99.0 << 0.0;
    }
    void percentileMatchesNumpy() {
        QFETCH(QVector<double>, values);
        QFETCH(double, p);
        QFETCH(double, expected);
        QVERIFY(qAbs(percentile(std::vector<double>(values.begin(), values.end()), p) - expected) < 1e-9);
    }

    void latencyDefinitions() {
        // a: TTFT 500 ms, ITLs 100/200/300 ms, E2EL 1100 ms, TPOT (1100 - 500) / 3 = 200 ms.
        // b: TTFT 200 ms, one ITL 400 ms, E2EL 600 ms, TPOT 400 ms.
        const std::vector<RequestMetrics> rs{req(1.0, {1.5, 1.6, 1.8, 2.1}), req(2.0, {2.2, 2.6})};
        QCOMPARE(rs[0].tpot(), (1.1 - 0.5) / 3);
        const BenchmarkSummary s = summarize(rs, 2.0, {50, 99});
        QCOMPARE(s.completed, 2);
        QCOMPARE(s.total_input_tokens, int64_t(20));
        QCOMPARE(s.total_output_tokens, int64_t(6));
        QVERIFY(qAbs(s.ttft.mean - 350) < 1e-6);
        QVERIFY(qAbs(s.e2el.mean - 850) < 1e-6);
        QVERIFY(qAbs(s.tpot.mean - 300) < 1e-6);
        QVERIFY(qAbs(s.itl.mean - 250) < 1e-6);   // pooled: 100, 200, 300, 400
        QVERIFY(qAbs(s.itl.median - 250) < 1e-6);
        QVERIFY(qAbs(s.ttft.std - 150) < 1e-6);   // population std, as numpy
        QVERIFY(qAbs(s.itl.percentiles[1].second - 397) < 1e-6);  // p99 of 100..400
        QVERIFY(qAbs(s.output_throughput - 3.0) < 1e-9);
        QVERIFY(qAbs(s.request_throughput - 1.0) < 1e-9);
        QVERIFY(qAbs(s.total_token_throughput - 13.0) < 1e-9);
    }

    void oneTokenRequestHasNoTpot() {
        const BenchmarkSummary s = summarize({req(0, {0.3}), req(0, {0.1, 0.2, 0.3})}, 1.0, {99});
        QCOMPARE(s.completed, 2);
        QVERIFY(qAbs(s.tpot.mean - 100) < 1e-6);  // only the second request has a TPOT
    }

    void failedRequestsAreExcluded() {
        const BenchmarkSummary s = summarize({req(0, {0.5, 1.0}), req(0, {}, FinishReason::ERROR),
                                              req(0, {0.1}, FinishReason::ABORT)}, 1.0, {99});
        QCOMPARE(s.completed, 1);
        QCOMPARE(s.failed, 2);
        QCOMPARE(s.total_output_tokens, int64_t(2));
    }

    void goodput_data() {
        QTest::addColumn<double>("ttft_ms");
        QTest::addColumn<double>("tpot_ms");
        QTest::addColumn<double>("e2el_ms");
        QTest::addColumn<int>("good");
        // Requests: (ttft 500, tpot 200, e2el 1100) and (ttft 200, tpot 400, e2el 600). -1 = no SLO.
        QTest::newRow("ttft 300") << 300.0 << -1.0 << -1.0 << 1;
        QTest::newRow("ttft 500 inclusive") << 500.0 << -1.0 << -1.0 << 2;
        QTest::newRow("tpot 250") << -1.0 << 250.0 << -1.0 << 1;
        QTest::newRow("ttft and tpot") << 300.0 << 250.0 << -1.0 << 0;
        QTest::newRow("e2el 1000") << -1.0 << -1.0 << 1000.0 << 1;
        QTest::newRow("all loose") << 1e6 << 1e6 << 1e6 << 2;
    }
    void goodput() {
        QFETCH(double, ttft_ms);
        QFETCH(double, tpot_ms);
        QFETCH(double, e2el_ms);
        QFETCH(int, good);
        GoodputSlo slo;
        if (ttft_ms >= 0) slo.ttft_ms = ttft_ms;
        if (tpot_ms >= 0) slo.tpot_ms = tpot_ms;
        if (e2el_ms >= 0) slo.e2el_ms = e2el_ms;
        const BenchmarkSummary s = summarize({req(1.0, {1.5, 1.6, 1.8, 2.1}), req(2.0, {2.2, 2.6})}, 2.0, {99}, slo);
        QVERIFY(s.request_goodput.has_value());
        QVERIFY(qAbs(*s.request_goodput - good / 2.0) < 1e-6);
    }

    void noSloNoGoodput() {
        const BenchmarkSummary s = summarize({req(0, {0.5, 1.0})}, 1.0, {99});
        QVERIFY(!s.request_goodput);
        QVERIFY(s.to_json()["request_goodput"].is_null());
    }

    void peakBuckets() {
        // Buckets from the earliest arrival (0): second 0 has 3 tokens, second 1 has 2, second 2 has 1.
        // Concurrency per second: a spans 0..1, b spans 0..2, c spans 2..2 -> peak 2.
        const BenchmarkSummary s = summarize({req(0.0, {0.1, 0.5, 1.2}), req(0.2, {0.9, 1.5, 2.5}), req(2.1, {2.4})}, 3.0, {99});
        QCOMPARE(s.max_output_tokens_per_s, 3.0);
        QCOMPARE(s.max_concurrent_requests, 2);
        QCOMPARE(s.max_concurrent_requests_instant, 2);  // a and b overlap; c starts after a ended
    }

    // Requests 10^9 s apart (a tiny --request-rate) cost their count, not a billion buckets (a dense vector
    // of them took 9 GB here, and crashed at 10^20 s).
    void peakBucketsOfRequestsFarApart() {
        const BenchmarkSummary s = summarize({req(0.0, {0.1, 0.5}), req(1e9, {1e9 + 0.25, 1e9 + 0.5, 1e9 + 0.75})}, 1e9 + 1, {99});
        QCOMPARE(s.max_output_tokens_per_s, 3.0);
        QCOMPARE(s.max_concurrent_requests, 1);
        QCOMPARE(s.max_concurrent_requests_instant, 1);
    }

    void jsonKeysFollowVllm() {
        const BenchmarkSummary s = summarize({req(0, {0.1, 0.2, 0.4})}, 1.0, {50, 90, 99, 99.9}, GoodputSlo{100.0, {}, {}});
        const nlohmann::json j = s.to_json();
        for (const char* k : {"completed", "failed", "duration", "total_input_tokens", "total_output_tokens",
                              "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
                              "max_output_tokens_per_s", "max_concurrent_requests"})
            QVERIFY2(j.contains(k), k);
        for (const char* m : {"ttft", "tpot", "itl", "e2el"})
            for (const char* stat : {"mean_", "median_", "std_", "p50_", "p90_", "p99_", "p99.9_"}) {
                const std::string key = std::string(stat) + m + "_ms";
                QVERIFY2(j.contains(key), key.c_str());
            }
        const BenchmarkSummary back = BenchmarkSummary::from_json(j);
        QCOMPARE(back.completed, 1);
        QCOMPARE(back.ttft.percentiles.size(), size_t(4));
        QCOMPARE(back.e2el.mean, s.e2el.mean);
        QCOMPARE(back.request_goodput.value_or(-1), 1.0);
    }

    // Every per-request record carries the four latencies, null where the request has no such figure: a bench
    // JSONL row of a failed request left ttft_ms out where the GUI's session wrote null, and `generate` wrote
    // -1000 for it.
    void requestLatenciesAreNullWhereUnknown() {
        RequestMetrics done = req(1.0, {1.25, 1.5, 2.0});
        done.first_scheduled_time = 1.125;
        const nlohmann::json d = request_to_json(done, 0.5, "");
        QCOMPARE(d["ttft_ms"].get<double>(), 250.0);
        QCOMPARE(d["tpot_ms"].get<double>(), 375.0);
        QCOMPARE(d["e2el_ms"].get<double>(), 1000.0);
        QCOMPARE(d["queue_time_ms"].get<double>(), 125.0);

        const nlohmann::json failed = request_to_json(req(1.0, {}, FinishReason::ERROR), 0.5, "HTTP 500");
        for (const char* k : {"ttft_ms", "tpot_ms", "queue_time_ms"}) QVERIFY2(failed.contains(k) && failed[k].is_null(), k);
        QCOMPARE(failed["e2el_ms"].get<double>(), 0.0);  // it ended where it arrived
        QCOMPARE(failed["error"].get<std::string>(), std::string("HTTP 500"));

        RequestMetrics counted = req(1.0, {}, FinishReason::ERROR);  // a remote stream's usage said 12, no token came
        counted.num_output_tokens = 12;
        QVERIFY(request_latencies_ms(counted)["tpot_ms"].is_null());

        RequestMetrics running = req(1.0, {1.25, 1.5});
        running.finish_time = -1;
        const nlohmann::json r = request_latencies_ms(running);
        QCOMPARE(r["ttft_ms"].get<double>(), 250.0);
        QVERIFY(r["e2el_ms"].is_null());
        QVERIFY(r["tpot_ms"].is_null());
    }

    void compareRatiosMeanPagedIsBetter() {
        BenchmarkSummary naive, paged;
        naive.output_throughput = 100, paged.output_throughput = 400;
        naive.e2el.mean = 9000, paged.e2el.mean = 3000;
        naive.ttft.percentiles = {{99, 8000}}, paged.ttft.percentiles = {{99, 1000}};
        naive.tpot.mean = 60, paged.tpot.mean = 30;
        const nlohmann::json r = compare_ratios(naive, paged);
        QCOMPARE(r["speedup_output_throughput"].get<double>(), 4.0);
        QCOMPARE(r["ratio_mean_e2el"].get<double>(), 3.0);
        QCOMPARE(r["ratio_p99_ttft"].get<double>(), 8.0);
        QCOMPARE(r["ratio_mean_tpot"].get<double>(), 2.0);
    }

    void recorderAggregates() {
        StepRecorder rec;
        StepStats base;
        base.total_preemptions = 5, base.prefix_cache_queries = 100, base.prefix_cache_hits = 40;
        rec.on_step(base);
        rec.clear();  // counters are measured from the step above
        auto step = [](int seqs, int tokens, int used, double usage, double waste, int64_t q, int64_t h, int64_t pre) {
            StepStats s;
            s.num_scheduled_seqs = seqs, s.num_decode_tokens = tokens, s.num_used_blocks = used, s.kv_usage = usage;
            s.kv_waste = waste, s.prefix_cache_queries = q, s.prefix_cache_hits = h, s.total_preemptions = pre;
            return s;
        };
        rec.on_step(step(2, 10, 4, 0.5, 0.1, 150, 60, 6));
        rec.on_step(step(4, 20, 8, 1.0, 0.3, 200, 90, 7));
        rec.on_step(step(0, 0, 0, 0.0, 0.0, 200, 90, 7));  // idle: not in the means
        const EngineAggregates a = rec.aggregates();
        QCOMPARE(a.num_steps, int64_t(2));
        QCOMPARE(a.mean_batch_size, 3.0);
        QCOMPARE(a.mean_tokens_per_step, 15.0);
        QCOMPARE(a.kv_usage_peak, 1.0);
        QCOMPARE(a.kv_usage_mean, 0.75);
        QVERIFY(qAbs(a.kv_waste_mean - 0.2) < 1e-12);
        QCOMPARE(a.num_preemptions, int64_t(2));
        QCOMPARE(a.prefix_cache_queries, int64_t(100));
        QCOMPARE(a.prefix_cache_hits, int64_t(50));
        QCOMPARE(a.prefix_cache_hit_rate, 0.5);
    }
};

QTEST_GUILESS_MAIN(TestSummary)
#include "test_summary.moc"
