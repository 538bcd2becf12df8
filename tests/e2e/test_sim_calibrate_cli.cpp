// kvscope-cli sim-calibrate end to end: a real CPU benchmark (the CPU taken as the device, its peak
// figures given on the command line) writes a timeline, the fit's calibration file predicts those
// measured steps clearly better than sim-v1's defaults (recomputed here from the file), a simulated
// GPU runs with a file it wrote, and bad input (no device, no timeline, a simulated run, too few
// steps, a missing file) exits 2 naming the problem.
#include "process_run.h"
#include "test_support.h"

#include "metrics/step_recorder.h"
#include "model/model.h"
#include "sim/gpu_specs.h"
#include "sim/step_time_model.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <fstream>

using namespace kvscope;

namespace {

test::ProcessResult cli(const QStringList& args, int timeout_s = 300) {
    return test::run_process(QString::fromStdString(test::cli_path()), args, QProcessEnvironment::systemEnvironment(),
                             timeout_s);
}

// The CPU as the device: one thread's nominal peaks, upper bounds (efficiencies stay at most 1).
const QStringList kCpuDevice = {"--peak-tflops", "0.2", "--memory-bandwidth-gbs", "50", "--device-name", "cpu"};

GpuSpec cpu_spec() {
    GpuSpec s;
    s.name = "cpu";
    s.bf16_flops = 0.2e12;
    s.memory_bandwidth = 50e9;
    s.interconnect_bandwidth = 1e12;
    return s;
}

struct Errors {
    double mean = 0, median = 0;  // of |pred - measured| / measured per step
    double total_ratio = 0;       // sum pred / sum measured
};

Errors prediction_errors(const nlohmann::json& timeline, const StepTimeConstants& k) {
    const std::unique_ptr<Model> m = load_model("dummy:tiny", false);
    const StepTimeModel model(m->config, cpu_spec(), 1, k, 4.0, 4.0);  // F32 weights and cache
    std::vector<double> errors;
    double predicted = 0, measured = 0, mean = 0;
    for (const auto& s : timeline) {
        const StepWorkSummary w = step_work_from_json(s["work"]);
        if (w.num_tokens == 0) continue;
        const double p = model.predict(w).total(), y = s["duration"].get<double>();
        errors.push_back(std::abs(p - y) / y);
        mean += errors.back();
        predicted += p;
        measured += y;
    }
    std::sort(errors.begin(), errors.end());
    return {mean / static_cast<double>(errors.size()), errors[errors.size() / 2], predicted / measured};
}

}  // namespace

class TestSimCalibrateCli : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        // Prefill chunks of up to 2048 tokens beside decode batches of 1 to 40: steps from under a
        // millisecond to a few hundred.
        m_timeline = m_dir.filePath("cpu-run.json");
        const auto r = cli({"bench", "--model", "dummy:tiny", "--dataset", "random", "--num-prompts", "40", "--input-len",
                            "256", "--output-len", "48", "--range-ratio", "0.9", "--output-range-ratio", "0.9",
                            "--request-rate", "40", "--seed", "3", "--threads", "1", "--save-timeline", "--output-json",
                            m_timeline});
        QVERIFY2(r.code == 0, qPrintable(r.err));
    }

    void fitPredictsTheMeasuredStepsBetter() {
        const QString out = m_dir.filePath("calib-cpu.json");
        const auto r = cli(QStringList{"sim-calibrate", "--timeline", m_timeline, "--output", out} + kCpuDevice);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        qInfo().noquote() << r.out.trimmed();
        // The file is one read_calibration accepts for this device; predict every measured step with it
        // and with sim-v1's defaults.
        const StepTimeConstants fitted = read_calibration(out.toStdString(), "cpu");
        const nlohmann::json timeline = test::read_json(m_timeline)["timeline"];
        const Errors before = prediction_errors(timeline, StepTimeConstants{});
        const Errors after = prediction_errors(timeline, fitted);
        qInfo("|error| per step, mean (median): %.1f%% (%.1f%%) with sim-v1's constants, %.1f%% (%.1f%%) calibrated; "
              "predicted / measured seconds: %.2f and %.2f",
              before.mean * 100, before.median * 100, after.mean * 100, after.median * 100, before.total_ratio,
              after.total_ratio);
        // sim-v1's efficiencies belong to a GPU running cuBLAS: on this CPU it predicts far too fast.
        // This machine is shared: other processes stretch steps several times, all of them when it is
        // busy (then the fit, robust to stretched steps, follows the quicker ones). So what is checked
        // is "better step by step" (mean and median: the fit's own objective, clearly so), not a precision.
        // The run's total is not judged: sim-v1's per-step errors of +-200% can cancel in a sum by chance
        // (0.97 of the measured total once, with a median step error of 219%).
        QVERIFY2(after.mean < 0.85 * before.mean, "the calibrated model does not predict the steps clearly better");
        QVERIFY2(after.median < before.median, "the calibrated model's median step error is no better");
        const nlohmann::json file = test::read_json(out);
        QCOMPARE(file["gpu"].get<std::string>(), std::string("cpu"));
        QVERIFY(file["fit"]["num_steps"].get<int>() >= 16);
        QVERIFY(file["source"].get<std::string>().find("kvscope-cpu") != std::string::npos);
    }

    // A file written for a GPU of the table is one the sim backend runs with, and says so.
    void simBackendRunsWithTheFile() {
        const QString out = m_dir.filePath("calib-h200.json"), result = m_dir.filePath("sim.json");
        auto r = cli({"sim-calibrate", "--timeline", m_timeline, "--gpu", "h200", "--output", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        r = cli({"bench", "--model", "dummy:llama-3-8b", "--backend", "sim:h200", "--sim-calibration", out, "--num-prompts",
                 "20", "--output-json", result});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const nlohmann::json j = test::read_json(result);
        QCOMPARE(j["simulated"]["step_time_model"].get<std::string>(), std::string("sim-v1+calibrated"));
        QVERIFY(j["simulated"]["constants_source"].get<std::string>().find("sim-calibrate") != std::string::npos);
        // ... and a file measured on the CPU is refused for a simulated H200.
        r = cli({"bench", "--model", "dummy:llama-3-8b", "--backend", "sim:h200", "--sim-calibration",
                 m_dir.filePath("calib-cpu.json"), "--num-prompts", "4"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("not on the simulated h200"), qPrintable(r.err));
        // ... and a calibration without a simulated GPU is refused, not ignored.
        r = cli({"bench", "--model", "dummy:tiny", "--sim-calibration", out, "--num-prompts", "4"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("needs --backend sim:GPU"), qPrintable(r.err));
    }

    void badInputExits2NamingIt_data() {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QString>("message");
        QTest::newRow("no device") << "no-device" << "no device: give --gpu";
        QTest::newRow("unknown gpu") << "unknown-gpu" << "unknown GPU 'b200'";
        QTest::newRow("missing file") << "missing" << "cannot open: No such file";
        QTest::newRow("not JSON") << "not-json" << "not JSON";
        QTest::newRow("no timeline") << "no-timeline" << "no timeline in the result (run bench with --save-timeline)";
        QTest::newRow("simulated run") << "simulated" << "a simulated run";
        QTest::newRow("too few steps") << "few" << "at least 16 are needed";
        QTest::newRow("every step the same work") << "same" << "do not vary enough";
        QTest::newRow("steps without work") << "old" << "steps without \"work\"";
    }
    void badInputExits2NamingIt() {
        QFETCH(QString, kind);
        QFETCH(QString, message);
        nlohmann::json j = test::read_json(m_timeline);
        QString timeline = m_dir.filePath(kind + ".json");
        QStringList device = kCpuDevice;
        auto& steps = j["timeline"];
        if (kind == "no-device") device.clear();
        else if (kind == "unknown-gpu") device = {"--gpu", "b200"};
        else if (kind == "missing") timeline = m_dir.filePath("absent.json");
        else if (kind == "no-timeline") j.erase("timeline");
        else if (kind == "simulated") j["backend"] = "kvscope-sim:h200";
        else if (kind == "few") steps.erase(steps.begin() + 12, steps.end());
        else if (kind == "same") {
            nlohmann::json decode;
            for (const auto& s : steps)
                if (s["work"]["num_tokens"].get<int>() > 4 && s["work"]["num_tokens"] == s["work"]["num_seqs"]) decode = s;
            QVERIFY(!decode.is_null());
            for (auto& s : steps) s["work"] = decode["work"];
        } else if (kind == "old")
            for (auto& s : steps) s.erase("work");
        if (kind == "not-json") std::ofstream(timeline.toStdString()) << "{\"timeline\": [";
        else if (kind != "missing") std::ofstream(timeline.toStdString()) << j.dump();
        const auto r = cli(QStringList{"sim-calibrate", "--timeline", timeline, "--output", m_dir.filePath("bad-out.json")} +
                           device);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
        QVERIFY2(r.err.count('\n') <= 2, qPrintable(r.err));  // one clear message, no dump
    }

private:
    QTemporaryDir m_dir;
    QString m_timeline;
};

QTEST_GUILESS_MAIN(TestSimCalibrateCli)
#include "test_sim_calibrate_cli.moc"
