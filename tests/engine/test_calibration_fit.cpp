// The step-time calibration fit (engine/sim/calibration_fit.h) on steps whose times come from known
// constants: it recovers them (exactly without noise, closely with noise and with a few steps stretched
// 5x as a busy machine stretches them), it keeps what the steps cannot determine, it refuses too few
// steps and steps that all did the same work, and its file is one that --sim-calibration reads.
#include "test_support.h"

#include "model/model.h"
#include "sim/calibration_fit.h"
#include "sim/gpu_specs.h"
#include "sim/step_time_model.h"
#include "util/errors.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <random>

using namespace kvscope;

namespace {

StepTimeConstants truth() {
    StepTimeConstants k;
    k.mfu_linear = 0.52;
    k.bw_efficiency_linear = 0.66;
    k.mfu_attention = 0.31;
    k.bw_efficiency_attention = 0.58;
    k.step_overhead = 2.5e-3;
    k.per_seq_overhead = 11e-6;
    return k;
}

StepTimeModel model_with(const StepTimeConstants& k) {
    const std::unique_ptr<Model> m = load_model("dummy:llama-3-8b", false);
    return StepTimeModel(m->config, find_gpu_spec("h200"), 1, k, 2.0, 2.0);
}

// A benchmark-like mix: prefill chunks of up to 2048 tokens beside decodes, decode-only steps from
// batch 1 to 256 over contexts of 100 to 4000 tokens.
std::vector<StepWork> varied_work(std::mt19937_64& rng, int n) {
    std::vector<StepWork> out;
    for (int i = 0; i < n; ++i) {
        StepWork w;
        const int decodes = 1 + static_cast<int>(rng() % 256);
        for (int d = 0; d < decodes; ++d) w.seqs.push_back({1, 100 + static_cast<int>(rng() % 3900)});
        w.num_sampled = decodes;
        if (i % 3 == 0) {
            const int chunk = 16 + static_cast<int>(rng() % 2032), prior = static_cast<int>(rng() % 2048);
            w.seqs.push_back({chunk, prior + chunk});
            w.num_sampled += 1;
        }
        out.push_back(std::move(w));
    }
    return out;
}

std::vector<MeasuredStep> measure(const std::vector<StepWork>& work, const StepTimeConstants& k, double noise,
                                  std::mt19937_64& rng) {
    const StepTimeModel m = model_with(k);
    std::normal_distribution<double> jitter(0.0, noise);
    std::vector<MeasuredStep> steps;
    for (const StepWork& w : work) steps.push_back({w.summary(), m.predict(w).total() * (1 + jitter(rng))});
    return steps;
}

}  // namespace

class TestCalibrationFit : public QObject {
    Q_OBJECT
private slots:
    void recoversKnownConstants_data() {
        QTest::addColumn<double>("noise");
        QTest::addColumn<int>("stretched");  // steps made 5x longer (another process took the core)
        // Relative tolerance on what dominates step times: mfu_linear, and the fixed cost of a
        // memory-bound step (step_overhead + weight bytes / (bandwidth x bw_efficiency_linear)). Noise
        // trades those two parts against each other (only the compute-bound steps tell them apart), and
        // hides the attention factors and the per-sequence overhead (each under a tenth of a step), so
        // those are checked one by one without noise only.
        QTest::addColumn<double>("tolerance");
        QTest::newRow("exact") << 0.0 << 0 << 1e-4;
        QTest::newRow("2% noise") << 0.02 << 0 << 0.05;
        QTest::newRow("2% noise, 10% of steps stretched 5x") << 0.02 << 20 << 0.05;
    }
    void recoversKnownConstants() {
        QFETCH(double, noise);
        QFETCH(int, stretched);
        QFETCH(double, tolerance);
        std::mt19937_64 rng(test::test_seed(7));
        std::vector<MeasuredStep> steps = measure(varied_work(rng, 200), truth(), noise, rng);
        for (int i = 0; i < stretched; ++i) steps[static_cast<size_t>(i) * 10 + 5].duration *= 5;

        const CalibrationFit fit = fit_calibration(model_with(StepTimeConstants{}), steps);
        const StepTimeConstants want = truth(), &got = fit.constants;
        const auto near = [&](double a, double b) { return std::abs(a - b) <= tolerance * std::abs(b); };
        QVERIFY2(near(got.mfu_linear, want.mfu_linear), qPrintable(QString::number(got.mfu_linear)));
        const double weights_s = model_with(want).terms(varied_work(rng, 1).front().summary()).linear_memory;
        QVERIFY2(near(got.step_overhead + weights_s / got.bw_efficiency_linear,
                      want.step_overhead + weights_s / want.bw_efficiency_linear),
                 qPrintable(QString("step_overhead %1, bw_efficiency_linear %2").arg(got.step_overhead).arg(got.bw_efficiency_linear)));
        if (noise == 0) {
            QVERIFY2(near(got.bw_efficiency_linear, want.bw_efficiency_linear), qPrintable(QString::number(got.bw_efficiency_linear)));
            QVERIFY2(near(got.step_overhead, want.step_overhead), qPrintable(QString::number(got.step_overhead)));
            QVERIFY2(near(got.mfu_attention, want.mfu_attention), qPrintable(QString::number(got.mfu_attention)));
            QVERIFY2(near(got.bw_efficiency_attention, want.bw_efficiency_attention),
                     qPrintable(QString::number(got.bw_efficiency_attention)));
            QVERIFY2(near(got.per_seq_overhead, want.per_seq_overhead), qPrintable(QString::number(got.per_seq_overhead)));
        }
        QCOMPARE(fit.num_steps, 200);
        QCOMPARE(static_cast<int>(fit.fitted.size()), 6);
        QVERIFY(fit.median_abs_rel_error_after < fit.median_abs_rel_error_before);
        QVERIFY(fit.median_abs_rel_error_after <= std::max(2 * noise, 1e-6));
    }

    // Decode-only steps never run the prefill attention or the compute-bound linear branch: those
    // constants keep their starting values and the report says so.
    void keepsWhatTheStepsCannotDetermine() {
        std::mt19937_64 rng(test::test_seed(8));
        std::vector<StepWork> work;
        for (int i = 0; i < 40; ++i) {
            StepWork w;
            const int batch = 1 + static_cast<int>(rng() % 64);
            for (int d = 0; d < batch; ++d) w.seqs.push_back({1, 200 + static_cast<int>(rng() % 3000)});
            w.num_sampled = batch;
            work.push_back(std::move(w));
        }
        const CalibrationFit fit = fit_calibration(model_with(StepTimeConstants{}), measure(work, truth(), 0, rng));
        QCOMPARE(fit.constants.mfu_attention, StepTimeConstants{}.mfu_attention);
        QCOMPARE(fit.constants.mfu_linear, StepTimeConstants{}.mfu_linear);
        QVERIFY(std::any_of(fit.kept.begin(), fit.kept.end(), [](const std::string& s) { return s.starts_with("mfu_attention:"); }));
        QVERIFY(fit.median_abs_rel_error_after < 1e-3);
    }

    void refusesTooFewSteps() {
        std::mt19937_64 rng(test::test_seed(9));
        const auto steps = measure(varied_work(rng, kMinCalibrationSteps - 1), truth(), 0, rng);
        try {
            fit_calibration(model_with(StepTimeConstants{}), steps);
            QFAIL("a fit from 15 steps was accepted");
        } catch (const BadInput& e) {
            QVERIFY2(QString(e.what()).contains("at least 16"), e.what());
        }
    }

    // The same work every step: only a fixed time per step can be fitted, which is no calibration.
    void refusesStepsThatAllDidTheSameWork() {
        std::mt19937_64 rng(test::test_seed(10));
        std::vector<StepWork> work(50, varied_work(rng, 1).front());
        const auto steps = measure(work, truth(), 0.05, rng);
        try {
            fit_calibration(model_with(StepTimeConstants{}), steps);
            QFAIL("a fit from identical steps was accepted");
        } catch (const BadInput& e) {
            QVERIFY2(QString(e.what()).contains("do not vary enough"), e.what());
        }
    }

    void writesAFileThatSimCalibrationReads() {
        std::mt19937_64 rng(test::test_seed(11));
        const CalibrationFit fit =
            fit_calibration(model_with(StepTimeConstants{}), measure(varied_work(rng, 60), truth(), 0, rng));
        QTemporaryDir dir;
        const std::string path = dir.filePath("calib.json").toStdString();
        std::ofstream(path) << calibration_to_json(fit, "h200", "test").dump(2);
        const StepTimeConstants k = read_calibration(path, "h200");
        QVERIFY(std::abs(k.mfu_linear - fit.constants.mfu_linear) < 1e-12);
        QVERIFY(std::abs(k.step_overhead - fit.constants.step_overhead) < 1e-12);
        QVERIFY(std::abs(k.per_seq_overhead - fit.constants.per_seq_overhead) < 1e-12);
        QVERIFY(model_with(k).version() == "sim-v1+calibrated");
        QVERIFY_THROWS_EXCEPTION(BadInput, read_calibration(path, "h100-sxm"));  // measured on another GPU
    }
};

QTEST_APPLESS_MAIN(TestCalibrationFit)
#include "test_calibration_fit.moc"
