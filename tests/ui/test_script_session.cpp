// A whole scripted session in-process on dummy:tiny (what `kvscope --script ... --export DIR` does):
// panes, knobs, a benchmark; then the export: session.json parses and holds every request, and the
// main window and every chart (the latency histogram and the request timeline too) are non-blank PNGs
// (pixel variety); the timeline's lanes are painted in the panes' colours; the GUI's stall figure is
// written.
#include "bench_results_model.h"
#include "charts_panel.h"
#include "chat_pane.h"
#include "engine_controller.h"
#include "main_window.h"
#include "script_runner.h"
#include "session_data.h"
#include "theme.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QScrollArea>
#include <QSet>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <algorithm>

using namespace kvscope;
using namespace kvscope::ui;

namespace {

int distinctColors(const QImage& image) {
    QSet<QRgb> colors;
    for (int y = 0; y < image.height(); y += 3)
        for (int x = 0; x < image.width(); x += 3) colors.insert(image.pixel(x, y));
    return int(colors.size());
}

// Runs `script` on dummy:tiny in `window` as main.cpp starts it (on modelReady), to its end: whether it
// succeeded, and its message.
std::pair<bool, QString> runToEnd(MainWindow& window, const QByteArray& script) {
    ScriptRunner runner(&window);
    QString error;
    if (!runner.loadJson(QJsonDocument::fromJson(script).object(), &error)) return {false, "not loaded: " + error};
    QSignalSpy finished(&runner, &ScriptRunner::finished);
    QObject::connect(&window, &MainWindow::modelReady, &runner, &ScriptRunner::start);
    window.loadModel("dummy:tiny", runner.engineConfig(EngineController::defaultConfig()));
    if (!finished.wait(60000)) return {false, "did not finish in 60 s"};
    return {finished.at(0).at(0).toBool(), finished.at(0).at(1).toString()};
}

}  // namespace

class TestScriptSession : public QObject {
    Q_OBJECT
private slots:
    void scriptRunExportsEverything() {
        Theme::apply(true);
        MainWindow window;
        window.resize(1400, 900);
        window.show();
        ScriptRunner runner(&window);
        QTemporaryDir dir;
        runner.setOutputDir(dir.path());
        const QByteArray script = R"({
          "model": "dummy:tiny",
          "engine": {"max_model_len": 256, "kv_cache_memory_mib": 2, "max_num_seqs": 8, "threads": 2},
          "actions": [
            {"action": "open_pane", "temperature": 0, "max_tokens": 40},
            {"action": "open_pane", "temperature": 0.7, "seed": 3, "max_tokens": 40, "priority": 1},
            {"action": "send_all", "prompt": "Hello there"},
            {"action": "set", "max_num_seqs": 1},
            {"action": "wait", "ms": 30},
            {"action": "set", "max_num_seqs": 8, "block_size": 32, "kv_cache_dtype": "float16"},
            {"action": "wait_idle", "timeout_ms": 60000},
            {"action": "benchmark", "dataset": "random", "num_prompts": 12, "input_len": 24, "output_len": 12,
             "request_rate": 0, "seed": 2},
            {"action": "submit", "pane": 1, "prompt": "Again"},
            {"action": "select", "pane": 1},
            {"action": "screenshot", "file": "during.png"},
            {"action": "wait_idle", "timeout_ms": 60000}
          ]})";
        QString error;
        QVERIFY2(runner.loadJson(QJsonDocument::fromJson(script).object(), &error), qPrintable(error));
        QCOMPARE(runner.model(), QString("dummy:tiny"));
        QSignalSpy ready(&window, &MainWindow::modelReady);
        window.loadModel(runner.model(), runner.engineConfig(EngineController::defaultConfig()));
        QVERIFY(ready.wait(60000));
        QSignalSpy finished(&runner, &ScriptRunner::finished);
        runner.start();
        QVERIFY(finished.wait(120000));
        QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
        QVERIFY2(!finished.at(0).at(1).toString().contains("in flight"), qPrintable(finished.at(0).at(1).toString()));

        // Idle, the window runs no timer: charts replot, the stall monitor ticks and the benchmark is fed
        // only while something changes.
        QTRY_VERIFY_WITH_TIMEOUT(window.controller()->isIdle(), 60000);
        auto anyTimerActive = [&window] {
            const QList<QTimer*> timers = window.findChildren<QTimer*>();
            return std::any_of(timers.begin(), timers.end(), [](QTimer* t) { return t->isActive(); });
        };
        QTRY_VERIFY_WITH_TIMEOUT(!anyTimerActive(), 5000);
        // An earlier export's chart that this one does not write goes; a file of the user's stays.
        QVERIFY(QDir(dir.path()).mkpath("charts"));
        for (const char* name : {"charts/server_metrics.png", "charts/server_metrics.pdf", "charts/notes.txt"}) {
            QFile old(dir.filePath(name));
            QVERIFY(old.open(QIODevice::WriteOnly) && old.write("old") == 3);
        }
        QVERIFY2(window.exportSession(dir.path(), &error), qPrintable(error));
        QVERIFY(!QFileInfo::exists(dir.filePath("charts/server_metrics.png")));
        QVERIFY(!QFileInfo::exists(dir.filePath("charts/server_metrics.pdf")));
        QVERIFY(QFileInfo::exists(dir.filePath("charts/notes.txt")));
        QFile f(dir.filePath("session.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QJsonParseError pe;
        const QJsonObject session = QJsonDocument::fromJson(f.readAll(), &pe).object();
        QCOMPARE(pe.error, QJsonParseError::NoError);
        // The switch to a float16 cache reaches the model's summary (the engine panel and the export said
        // float32, the type at load, before).
        QCOMPARE(window.controller()->modelSummary().kvCacheDtype, QString("float16"));
        QCOMPARE(session.value("model").toObject().value("kv_cache_dtype").toString(), QString("float16"));
        const QJsonArray requests = session.value("requests").toArray();
        // 2 panes x 1 prompt + the benchmark's warm-up request and its 12 timed ones + 1 more prompt: the
        // warm-up ran in the engine, so the session shows it (its origin is "benchmark").
        QCOMPARE(requests.size(), 16);
        QCOMPARE(int(window.controller()->session()->requests().size()), 16);
        QSet<QString> ids;
        for (const QJsonValue& r : requests) {
            ids.insert(r.toObject().value("request_id").toString());
            QCOMPARE(r.toObject().value("status").toString(), QString("finished"));
            QVERIFY(r.toObject().contains("ttft_ms"));
        }
        QCOMPARE(ids.size(), 16);
        QVERIFY(ids.contains("bench-1-warmup-0"));
        QCOMPARE(session.value("completed").toInt(), 16);
        for (const char* key : {"mean_ttft_ms", "p99_itl_ms", "output_throughput", "total_token_throughput",
                                "request_throughput", "total_input_tokens", "gui_max_stall_ms"})
            QVERIFY2(session.contains(key), key);
        QVERIFY(session.value("timeline").toArray().size() > 10);
        QCOMPARE(session.value("config").toObject().value("block_size").toInt(), 32);
        QCOMPARE(session.value("config").toObject().value("kv_cache_dtype").toString(), QString("float16"));
        // The pool as it ran, as the benchmark's config and the timeline say (it said num_blocks 0: auto).
        const int numBlocks = session.value("config").toObject().value("num_blocks").toInt();
        QCOMPARE(numBlocks, session.value("timeline").toArray().last().toObject().value("num_blocks").toInt());
        QCOMPARE(numBlocks, window.controller()->session()->benchmarks().front().config.value("num_blocks").toInt());
        QVERIFY(numBlocks > 0);
        QCOMPARE(window.controller()->session()->benchmarks().front().config.value("kv_cache_dtype").toString(),
                 QString("float16"));
        QCOMPARE(session.value("benchmarks").toArray().size(), 1);
        bool rebuild = false;
        for (const QJsonValue& e : session.value("events").toArray()) rebuild |= e.toObject().value("event").toString().startsWith("rebuild");
        QVERIFY(rebuild);
        qInfo("GUI max stall: %.1f ms", session.value("gui_max_stall_ms").toDouble());

        // Every request has its timeline lane from arrival to finish, through prefill and decode.
        for (const RequestRecord& r : window.controller()->session()->requests()) {
            QVERIFY2(r.metrics && !r.phases.empty(), qPrintable(r.requestId));
            QCOMPARE(r.phases.front().start, r.metrics->arrival_time);
            QCOMPARE(r.phases.back().end, r.metrics->finish_time);
            QVERIFY(std::any_of(r.phases.begin(), r.phases.end(),
                                [](const PhaseSpan& s) { return s.phase == RequestPhase::Prefill; }));
        }

        QStringList pngs = {"main_window.png", "during.png"};
        for (const auto& c : window.chartsPanel()->charts()) pngs << "charts/" + c.name + ".png";
        QVERIFY(pngs.contains("charts/latency_histogram.png"));
        QVERIFY(pngs.contains("charts/request_timeline.png"));
        for (const QString& png : pngs) {
            QImage image(dir.filePath(png));
            QVERIFY2(!image.isNull(), qPrintable(png));
            QVERIFY2(distinctColors(image) >= 8, qPrintable(png + " looks blank"));
            if (png.startsWith("charts/")) QVERIFY(QFileInfo::exists(dir.filePath(QString(png).replace(".png", ".pdf"))));
        }
        // The first prefill chunk of a lane is painted opaque in the request's colour (lighter): find
        // both panes' colours in the exported timeline.
        const QImage timeline(dir.filePath("charts/request_timeline.png"));
        for (ChatPane* pane : window.panes()) {
            const QRgb prefill = pane->color().lighter(115).rgb();
            bool found = false;
            for (int y = 0; y < timeline.height() && !found; ++y)
                for (int x = 0; x < timeline.width() && !found; ++x) found = timeline.pixel(x, y) == prefill;
            QVERIFY2(found, qPrintable(pane->color().name() + " lane not found in the timeline export"));
        }
        QVERIFY(QFileInfo(dir.filePath("timeline.csv")).size() > 100);
        // requests.csv's latencies are session.json's to the last digit (6 significant digits, before).
        QFile csv(dir.filePath("requests.csv"));
        QVERIFY(csv.open(QIODevice::ReadOnly));
        QMap<QString, QString> csvE2el;
        for (const QByteArray& line : csv.readAll().split('\n').mid(1))
            if (!line.isEmpty()) csvE2el[QString(line.split(',').front())] = QString(line.split(',').back());
        QCOMPARE(csvE2el.size(), 16);
        for (const QJsonValue& r : requests) {
            const QJsonObject o = r.toObject();
            QCOMPARE(csvE2el.value(o.value("request_id").toString()).toDouble(), o.value("e2el_ms").toDouble());
        }

        // The export loads back into the benchmark comparison.
        BenchResultsModel results;
        QCOMPARE(results.loadFile(dir.filePath("session.json"), &error), 1);
    }

    // `select` is a click on the request's row: its pane comes into view and stays there through resizes
    // (the keyboard, left in the last pane opened, brought that pane back at the next resize).
    void selectKeepsTheSendersPaneInView() {
        MainWindow window;
        window.show();
        const auto [ok, message] = runToEnd(window, R"({"engine": {"max_model_len": 128, "kv_cache_memory_mib": 2, "threads": 2},
            "actions": [{"action": "resize", "width": 1024, "height": 700},
                        {"action": "open_pane", "max_tokens": 4}, {"action": "open_pane", "max_tokens": 4},
                        {"action": "send_all", "prompt": "Hi"}, {"action": "wait_idle"},
                        {"action": "select", "pane": 1}, {"action": "wait", "ms": 50},
                        {"action": "resize", "width": 1920, "height": 1080}, {"action": "wait", "ms": 50},
                        {"action": "resize", "width": 1024, "height": 700}, {"action": "wait", "ms": 50}]})");
        QVERIFY2(ok, qPrintable(message));
        const QWidget* column = window.findChild<QScrollArea*>("paneArea")->viewport();
        auto shown = [column](const ChatPane* p) {
            const QRect r(p->mapTo(column, QPoint(0, 0)), p->size());
            return column->rect().contains(r.center());
        };
        QTRY_VERIFY_WITH_TIMEOUT(shown(window.panes()[0]), 2000);
        QVERIFY(!shown(window.panes()[1]));  // one pane fits at 1024
    }

    // Started as main.cpp starts it, inside modelReady: a first `set` moves its knob and keeps the
    // script's engine settings (it read the tuning panel's defaults and undid them, before).
    void firstSetKeepsTheEngineSettings() {
        MainWindow window;
        const auto [ok, message] = runToEnd(window, R"({"engine": {"block_size": 32, "kv_cache_memory_mib": 8, "enable_prefix_caching": true,
                                                                   "max_model_len": 256, "threads": 2},
                                                        "actions": [{"action": "set", "max_num_seqs": 2}, {"action": "wait", "ms": 50}]})");
        QVERIFY2(ok, qPrintable(message));
        QTRY_COMPARE_WITH_TIMEOUT(window.controller()->config().scheduler.max_num_seqs, 2, 10000);
        const EngineConfig c = window.controller()->config();
        QCOMPARE(c.block_size, 32);
        QVERIFY(c.scheduler.enable_prefix_caching);
        QCOMPARE(c.kv_cache_memory, int64_t(8) << 20);
    }

    // An engine max_model_len past the model's context (dummy:tiny: 2048) is not taken: the script fails
    // naming it, instead of running with 2048.
    void maxModelLenNotTakenFailsTheScript() {
        MainWindow window;
        const auto [ok, message] = runToEnd(window, R"({"engine": {"max_model_len": 4096}, "actions": [{"action": "wait", "ms": 10}]})");
        QVERIFY(!ok);
        QVERIFY2(message.contains("engine.max_model_len 4096 was not taken") && message.contains("2048"), qPrintable(message));
    }

    // A script that ends with a request in flight says so: the export holds it unfinished.
    void requestsInFlightAtTheEndAreNamed() {
        MainWindow window;
        const auto [ok, message] = runToEnd(window, R"({"engine": {"max_model_len": 512, "threads": 2},
                                                        "actions": [{"action": "open_pane", "max_tokens": 400},
                                                                    {"action": "submit", "pane": 1, "prompt": "Once upon a time"}]})");
        QVERIFY2(ok, qPrintable(message));
        QVERIFY2(message.contains("1 request(s) still in flight"), qPrintable(message));
    }

    // A `set` the engine refuses fails the script, naming the action (it went on, and exited 0).
    void refusedSetFailsTheScript() {
        MainWindow window;
        // Naive mode reserves max_model_len (32 blocks of 16): a pool of 1 MiB (16 blocks) cannot hold the
        // request, which is still running: the commands reach the engine together, before its 400 tokens.
        const auto [ok, message] = runToEnd(window, R"({"engine": {"max_model_len": 512, "kv_cache_memory_mib": 2, "block_size": 16, "threads": 2},
                                                        "actions": [{"action": "open_pane", "max_tokens": 400},
                                                                    {"action": "submit", "pane": 1, "prompt": "Once upon a time"},
                                                                    {"action": "set", "mode": "naive"},
                                                                    {"action": "set", "kv_cache_memory_mib": 1},
                                                                    {"action": "wait", "ms": 2000}]})");
        QVERIFY(!ok);
        QVERIFY2(message.contains("actions[3] (set): the engine refused it"), qPrintable(message));
    }

    void badScriptIsRejectedWithItsProblem() {
        MainWindow window;
        ScriptRunner runner(&window);
        QString error;
        QVERIFY(!runner.loadJson(QJsonDocument::fromJson(R"({"actions": [{"action": "fly"}]})").object(), &error));
        QVERIFY(error.contains("fly"));
        QVERIFY(!runner.load("/nonexistent/script.json", &error));
        QVERIFY(error.contains("/nonexistent/script.json"));
        // Mistakes are named at load, never run as something else: engine values the engine refuses (once
        // an uncaught exception at start-up), keys no action takes (a typo did nothing), values of the
        // wrong kind (a number as a prompt sent an empty message), and datasets the panel does not have.
        const std::pair<const char*, const char*> cases[] = {
            {R"({"engine": {"block_size": 3}, "actions": []})", "block_size"},
            {R"({"engine": {"max_num_seqs": 0}, "actions": []})", "max_num_seqs"},
            {R"({"engine": {"kv_cache_dtype": "int3"}, "actions": []})", "kv_cache_dtype"},
            {R"({"engine": {"kv_cache_memory_mib": -1}, "actions": []})", "kv_cache_memory"},
            {R"({"engine": {"max_model_len": -5}, "actions": []})", "max_model_len"},
            {R"({"engine": {"block_sise": 16}, "actions": []})", "block_sise"},
            {R"({"actions": [{"action": "set", "max_num_seq": 4}]})", "max_num_seq"},
            {R"({"actions": [{"action": "set", "block_size": 24}]})", "block_size"},
            {R"({"actions": [{"action": "submit", "prompt": 42}]})", "\"prompt\" must be a string"},
            {R"({"actions": [{"action": "submit", "prompt": " "}]})", "actions[0] (submit): \"prompt\" is empty"},
            {R"({"actions": [{"action": "send_all", "prompt": ""}]})", "actions[0] (send_all): \"prompt\" is empty"},
            {R"({"actions": [{"action": "wait", "ms": 1.5}]})", "whole number"},
            {R"({"actions": [{"action": "benchmark", "dataset": "sharegtp"}]})", "sharegtp"},
            {R"({"actions": [42]})", "actions[0]"},
            {R"({"actions": [], "modle": "dummy:tiny"})", "modle"},
            // Times and sizes past what a timer or a picture takes: a negative wait and at_ms 10^15 hung the
            // script; a 40000-pixel screenshot took a minute.
            {R"({"actions": [{"action": "wait", "ms": -5}]})", "\"ms\" must be in [0, "},
            {R"({"actions": [{"action": "wait", "ms": 1, "at_ms": 1e15}]})", "\"at_ms\" must be in [0, "},
            {R"({"actions": [{"action": "screenshot", "width": 40000}]})", "\"width\" must be in [1, 8192]"},
            // Values that ran as something else: no prompt (an empty message), max_tokens 0 (1 token), no
            // prompts, a resize to nothing (the window's minimum).
            {R"({"actions": [{"action": "submit", "pane": 1}]})", "(submit): \"prompt\" is missing"},
            {R"({"actions": [{"action": "open_pane", "max_tokens": 0}]})", "max_tokens must be >= 1"},
            {R"({"actions": [{"action": "benchmark", "num_prompts": 0}]})", "(benchmark): --num-prompts must be >= 1"},
            {R"({"actions": [{"action": "resize"}]})", "give \"width\", \"height\" or both"},
            // Past what the tuning panel holds: the panel showed 4096 while the engine ran 100000, or a set
            // failed mid-run.
            {R"({"engine": {"max_num_seqs": 100000}, "actions": []})", "max_num_seqs 100000 is past what the tuning panel holds (1..4096)"},
            {R"({"actions": [{"action": "set", "max_num_batched_tokens": 1}]})", "max_num_batched_tokens 1 is past"},
            {R"({"actions": [{"action": "set", "kv_cache_memory_mib": 2000000000}]})", "kv_cache_memory_mib 2000000000 is past"},
            {R"({"engine": {"kv_cache_dtype": "fp16"}, "actions": []})", "kv_cache_dtype 'fp16': the tuning panel takes"},
            // A colour or keys Qt cannot read did nothing (a black dot; a lost key press).
            {R"({"actions": [{"action": "open_pane", "color": "notacolor"}]})", "'notacolor' is not a colour"},
            {R"({"actions": [{"action": "key", "keys": "hello world"}]})", "'hello world' is not a key sequence"},
        };
        for (const auto& [script, expected] : cases) {
            error.clear();
            QVERIFY2(!runner.loadJson(QJsonDocument::fromJson(script).object(), &error), script);
            QVERIFY2(error.contains(expected), qPrintable(QString("%1 -> %2").arg(script, error)));
        }
        // A whole script that uses every key of the example loads.
        QVERIFY2(runner.load(KVSCOPE_SCRIPTS_DIR "/example.json", &error), qPrintable(error));
    }
};

QTEST_MAIN(TestScriptSession)
#include "test_script_session.moc"
