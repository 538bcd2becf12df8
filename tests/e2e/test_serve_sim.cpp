// kvscope-cli serve on a simulated GPU, as an HTTP client sees it: completions paced at the simulated
// H100's speed, and /metrics saying that every figure is simulated (a SIMULATED comment and the
// simulation_info gauge with the GPU, tensor parallelism and step-time model). Stopped with SIGTERM.
#include "serve_process.h"

#include <nlohmann/json.hpp>

using namespace kvscope::test;
using nlohmann::json;

class TestServeSim : public QObject {
    Q_OBJECT
    ServeProcess server_;
    int port_ = 0;

private slots:
    void initTestCase() {
        QByteArray error;
        QVERIFY2(server_.start({"--model", "dummy:llama-3-8b", "--backend", "sim:h100-sxm", "--max-model-len", "4096"},
                               &error),
                 error.constData());
        port_ = server_.port();
        QVERIFY2(server_.stderr_text().contains("SIMULATED, not measured: simulated NVIDIA H100 SXM 80GB"),
                 server_.stderr_text().constData());
    }

    void cleanupTestCase() {
        QByteArray error;
        QVERIFY2(server_.stop(&error), error.constData());
    }

    void completionRuns() {
        const Reply r = post(port_, "/v1/completions",
                             {{"model", "dummy:llama-3-8b"}, {"prompt", "hello"}, {"max_tokens", 24}, {"ignore_eos", true}});
        QCOMPARE(r.status, 200);
        const json j = json::parse(r.body.toStdString());
        QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 24);
        QCOMPARE(j["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
    }

    void metricsSaySimulated() {
        const Reply r = http(port_, "GET", "/metrics");
        QCOMPARE(r.status, 200);
        QVERIFY2(r.body.startsWith("# SIMULATED, not measured: simulated NVIDIA H100 SXM 80GB, dummy:llama-3-8b, "
                                   "step-time model sim-v1"),
                 r.body.left(300).constData());
        QCOMPARE(metric(r.body, "simulation_info", "gpu=\"h100-sxm\",tensor_parallel_size=\"1\","
                                                            "step_time_model=\"sim-v1\""),
                 1.0);
        // 24 tokens of Llama-3-8B on an H100 take simulated milliseconds, not the CPU's seconds.
        const double e2e = metric(r.body, "e2e_request_latency_seconds_sum");
        QVERIFY2(e2e > 0.05 && e2e < 1.0, qPrintable(QString::number(e2e)));
    }
};

QTEST_GUILESS_MAIN(TestServeSim)
#include "test_serve_sim.moc"
