// One benchmark driver for every front end: the same seeded workload through `kvscope-cli bench` (a
// subprocess) and through the GUI in script mode (in-process, the way `kvscope --script` runs it) gives
// the same requests (count, prompt and output token counts, finish reasons), and both exports define
// and compute TTFT the same way: first token time minus arrival, arrival = when the request fell due
// (with every request due at the start, one arrival time for all).
#include "engine_controller.h"
#include "main_window.h"
#include "script_runner.h"
#include "test_support.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

using namespace kvscope;
using namespace kvscope::ui;
using nlohmann::json;

namespace {

QString modelDir() { return QString::fromStdString(kvscope::test::models_dir() + "/stories260K-hf"); }

// ttft_ms recomputed from the raw timestamps of one exported request record.
double ttftFromRaw(const json& r) { return (r["token_times"][0].get<double>() - r["arrival_time"].get<double>()) * 1e3; }

}  // namespace

class TestBenchEquivalence : public QObject {
    Q_OBJECT
private slots:
    void cliAndGuiRunTheSameBenchmark() {
        QTemporaryDir dir;
        // The CLI.
        const QString requestsPath = dir.filePath("cli_requests.jsonl"), resultPath = dir.filePath("cli.json");
        QProcess cli;
        cli.start(QString::fromStdString(kvscope::test::cli_path()),
                  {"bench", "--model", modelDir(), "--dataset", "random", "--num-prompts", "12", "--input-len", "24",
                   "--output-len", "12", "--seed", "5", "--max-model-len", "512", "--threads", "2", "--output-requests",
                   requestsPath, "--output-json", resultPath});
        QVERIFY(cli.waitForFinished(300000));
        QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
        std::vector<json> cliRequests;
        std::ifstream in(requestsPath.toStdString());
        for (std::string line; std::getline(in, line);) cliRequests.push_back(json::parse(line));
        const json cliResult = json::parse(std::ifstream(resultPath.toStdString()));

        // The GUI, scripted.
        MainWindow window;
        window.resize(1280, 800);
        window.show();
        ScriptRunner runner(&window);
        runner.setOutputDir(dir.path());
        const QString script = QString(R"({
          "model": "%1",
          "engine": {"max_model_len": 512, "threads": 2},
          "actions": [
            {"action": "benchmark", "dataset": "random", "num_prompts": 12, "input_len": 24, "output_len": 12,
             "request_rate": 0, "seed": 5},
            {"action": "wait_benchmark"}
          ]})").arg(modelDir());
        QString error;
        QVERIFY2(runner.loadJson(QJsonDocument::fromJson(script.toUtf8()).object(), &error), qPrintable(error));
        QSignalSpy ready(&window, &MainWindow::modelReady);
        window.loadModel(runner.model(), runner.engineConfig(EngineController::defaultConfig()));
        QVERIFY(ready.wait(60000));
        QSignalSpy finished(&runner, &ScriptRunner::finished);
        runner.start();
        QVERIFY(finished.wait(300000));
        QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
        const QString exportDir = dir.filePath("gui");
        QVERIFY2(window.exportSession(exportDir, &error), qPrintable(error));
        QFile f(exportDir + "/session.json");
        QVERIFY(f.open(QIODevice::ReadOnly));
        const json session = json::parse(f.readAll().toStdString());
        QCOMPARE(session["benchmarks"].size(), size_t(1));
        const json& guiRun = session["benchmarks"][0];
        const json& guiRequests = guiRun["requests"];

        // The same requests.
        QCOMPARE(guiRequests.size(), cliRequests.size());
        QCOMPARE(cliRequests.size(), size_t(12));
        QCOMPARE(guiRun["completed"], cliResult["completed"]);
        QCOMPARE(guiRun["total_input_tokens"], cliResult["total_input_tokens"]);
        QCOMPARE(guiRun["total_output_tokens"], cliResult["total_output_tokens"]);
        for (size_t i = 0; i < cliRequests.size(); ++i) {
            const json &c = cliRequests[i], &g = guiRequests[i];
            QCOMPARE(g["index"], c["index"]);
            QCOMPARE(g["num_prompt_tokens"], c["num_prompt_tokens"]);
            QCOMPARE(g["num_output_tokens"], c["num_output_tokens"]);
            QCOMPARE(g["finish_reason"], c["finish_reason"]);
            // One definition of TTFT, computed from the same kind of raw record.
            QVERIFY(std::fabs(g["ttft_ms"].get<double>() - ttftFromRaw(g)) < 1e-6);
            QVERIFY(std::fabs(c["ttft_ms"].get<double>() - ttftFromRaw(c)) < 1e-6);
            // Every request was due at the start of the timed part: one arrival time in each run.
            QCOMPARE(g["arrival_time"], guiRequests[0]["arrival_time"]);
            QCOMPARE(c["arrival_time"], cliRequests[0]["arrival_time"]);
        }
        QCOMPARE(session["metric_definitions"]["ttft"], cliResult["metric_definitions"]["ttft"]);
        QCOMPARE(session["metric_definitions"]["arrival"], cliResult["metric_definitions"]["arrival"]);
    }
};

QTEST_MAIN(TestBenchEquivalence)
#include "test_bench_equivalence.moc"
