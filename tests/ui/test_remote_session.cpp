// The GUI against a real remote engine: a `kvscope-cli serve` subprocess (with an API key) stands in for
// vLLM. The connect dialog lists its models and names refused, 401 and 404 plainly; the script
// resources/scripts/remote_session.json runs a local benchmark, connects, runs the same benchmark
// remotely, chats in two panes, and the export holds both runs labelled by target, the scraped
// /metrics series, both panes' replies, and nowhere the API key. Load model then switches back.
#include "bench_results_model.h"
#include "benchmark_panel.h"
#include "block_map_widget.h"
#include "charts_panel.h"
#include "chat_pane.h"
#include "connect_dialog.h"
#include "elided_label.h"
#include "engine_controller.h"
#include "engine_status.h"
#include "main_window.h"
#include "remote_server_view.h"
#include "script_runner.h"
#include "serve_process.h"

#include <QComboBox>
#include <QDirIterator>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLineEdit>
#include <QProgressBar>
#include <QSignalSpy>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QtTest>
#include <qcustomplot.h>

using namespace kvscope;
using namespace kvscope::ui;

namespace {

const QString kKey = "kvscope-test-key-5f3a9c";
const QString kModel = "tiny-remote";

QJsonObject readJsonFile(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

// A port that refuses connections: one that was listened on and closed.
int closedPort() {
    QTcpServer s;
    s.listen(QHostAddress::LocalHost);
    return s.serverPort();
}

}  // namespace

class TestRemoteSession : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QByteArray error;
        // Prefix caching with vLLM's --enable-prompt-tokens-details: usage reports the cached prompt tokens.
        QVERIFY2(m_serve.start({"--model", "dummy:tiny", "--max-model-len", "256", "--threads", "1", "--served-model-name",
                                kModel, "--api-key", kKey, "--enable-prefix-caching", "--enable-prompt-tokens-details"},
                               &error),
                 error.constData());
        m_url = QString("http://127.0.0.1:%1").arg(m_serve.port());
    }

    void cleanupTestCase() {
        QByteArray error;
        QVERIFY2(m_serve.stop(&error), error.constData());
    }

    // A series the engine's /metrics lacks is named so in the legend (llama-server reports no KV usage in
    // current versions), and the gauge says so; before the first scrape nothing is called missing.
    void unreportedSeriesAreNamedInTheLegend() {
        RemoteServerView view;
        view.setSamples({});
        QCOMPARE(view.chart()->graph(0)->name(), QString("KV usage %"));
        ServerSample a, b;
        a.time = 0;
        b.time = 1;
        a.num_requests_running = 2;
        b.num_requests_running = 3;
        a.num_requests_waiting = b.num_requests_waiting = 0;
        view.setSamples({a, b});
        QCOMPARE(view.chart()->graph(0)->name(), QString("KV usage % (not reported)"));
        QCOMPARE(view.chart()->graph(1)->name(), QString("running"));
        QCOMPARE(view.chart()->graph(2)->name(), QString("waiting"));
        QCOMPARE(view.gauge()->format(), QString("KV cache usage: not reported"));
        b.kv_cache_usage = 0.25;
        view.setSamples({a, b});
        QCOMPARE(view.chart()->graph(0)->name(), QString("KV usage %"));
        QVERIFY2(view.gauge()->format().startsWith("KV cache usage 25.0%"), qPrintable(view.gauge()->format()));
    }

    // While the server's /metrics fails, the note line says why (not the target), so a chart that stopped
    // is not read as an idle server; it shows the target again once a scrape succeeds.
    void failingScrapesAreShown() {
        RemoteServerView view;
        RemoteTarget t;
        t.baseUrl = "http://127.0.0.1:1";
        t.engine = "llama.cpp";
        t.model = "m";
        view.setTarget(t);
        auto* note = view.findChild<ElidedLabel*>("remoteNote");
        QVERIFY(note);
        QCOMPARE(note->fullText(), t.label());
        view.setScrapeHealth({3, 3, true, "HTTP 501: start it with --metrics"});
        QVERIFY2(note->fullText().startsWith("/metrics fails (3 of 3 scrapes): HTTP 501") && note->fullText().contains("--metrics"),
                 qPrintable(note->fullText()));
        QVERIFY(view.noteText().contains(t.label()));  // the tooltip keeps the target
        view.setScrapeHealth({4, 3, false, "HTTP 501"});
        QCOMPARE(note->fullText(), t.label());
    }

    void dialogListsModelsAndNamesFailures_data() {
        QTest::addColumn<QString>("url");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("expected");  // "" = the models are listed; else a part of the error
        QTest::newRow("listed") << QString() << kKey << QString();
        QTest::newRow("401 without the key") << QString() << QString() << "HTTP 401";
        QTest::newRow("401 with a wrong key") << QString() << "wrong" << "API key is missing or wrong";
        QTest::newRow("404 extra path") << "/v1" << kKey << "HTTP 404";
        QTest::newRow("refused") << "refused" << kKey << "/v1/models";
        QTest::newRow("not a URL") << "ftp" << kKey << "must start with http://";
    }

    void dialogListsModelsAndNamesFailures() {
        QFETCH(QString, url);
        QFETCH(QString, key);
        QFETCH(QString, expected);
        QString base = m_url + url;
        if (url == "refused") base = QString("http://127.0.0.1:%1").arg(closedPort());
        if (url == "ftp") base = "ftp://127.0.0.1/";
        ConnectDialog dialog{QString(), QString()};
        QSignalSpy fetched(&dialog, &ConnectDialog::modelsFetched);
        QSignalSpy failed(&dialog, &ConnectDialog::fetchFailed);
        dialog.urlEdit()->setText(base);
        dialog.keyEdit()->setText(key);
        dialog.fetchModels();
        QTRY_VERIFY_WITH_TIMEOUT(fetched.size() + failed.size() == 1, 20000);
        if (expected.isEmpty()) {
            QCOMPARE(fetched.size(), 1);
            QCOMPARE(dialog.modelBox()->currentText(), kModel);
            QCOMPARE(dialog.connection().model, kModel);
            QVERIFY2(dialog.statusText().contains("kvscope"), qPrintable(dialog.statusText()));
        } else {
            QCOMPARE(failed.size(), 1);
            const QString message = failed.at(0).at(0).toString();
            QVERIFY2(message.contains(expected), qPrintable(message));
            QVERIFY2(dialog.statusText().contains("Cannot connect"), qPrintable(dialog.statusText()));
            QCOMPARE(dialog.modelBox()->count(), 0);
        }
    }

    void scriptConnectsBenchmarksChatsAndExports() {
        MainWindow window;
        window.resize(1400, 900);
        window.show();
        ScriptRunner runner(&window);
        QTemporaryDir dir;
        // KVSCOPE_KEEP_EXPORT=1 keeps the export and the screenshots to look at.
        dir.setAutoRemove(qEnvironmentVariableIsEmpty("KVSCOPE_KEEP_EXPORT"));
        if (!dir.autoRemove()) qInfo("export kept in %s", qPrintable(dir.path()));
        runner.setOutputDir(dir.path());
        // The repository's script, pointed at this test's server and given its key.
        QJsonObject script = readJsonFile(KVSCOPE_SCRIPTS_DIR "/remote_session.json");
        QJsonArray actions = script.value("actions").toArray();
        int connects = 0;
        for (int i = 0; i < actions.size(); ++i) {
            QJsonObject a = actions[i].toObject();
            if (a.value("action").toString() != "connect") continue;
            a["base_url"] = m_url;
            a["api_key"] = kKey;
            actions[i] = a;
            ++connects;
        }
        QCOMPARE(connects, 1);
        script["actions"] = actions;
        QString error;
        QVERIFY2(runner.loadJson(script, &error), qPrintable(error));
        QSignalSpy ready(&window, &MainWindow::modelReady);
        window.loadModel(runner.model(), runner.engineConfig(EngineController::defaultConfig()));
        QVERIFY(ready.wait(60000));
        QSignalSpy finished(&runner, &ScriptRunner::finished);
        runner.start();
        QVERIFY(finished.wait(180000));
        QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));

        EngineController* c = window.controller();
        QVERIFY(c->isRemote());
        QCOMPARE(c->remoteTarget().engine, QString("kvscope"));
        QCOMPARE(c->remoteTarget().model, kModel);
        // The status bar names the target; the block map gives way to the server's KV gauge.
        const QString status = statusText(c->status());
        QVERIFY2(status.startsWith("remote: kvscope at " + m_url + ", model " + kModel), qPrintable(status));
        QVERIFY(!window.blockMap()->isVisible());
        QVERIFY(window.remoteServerView()->isVisible());
        QVERIFY(window.remoteServerView()->noteText().contains("exposes no block table"));
        QVERIFY(!c->serverSamples().empty());
        QVERIFY2(window.remoteServerView()->gauge()->format().startsWith("KV cache usage"),
                 qPrintable(window.remoteServerView()->gauge()->format()));
        // The server chart's legend sits under its title, clear of the lines (inside the plot it hid them).
        QCustomPlot* serverChart = window.remoteServerView()->chart();
        serverChart->replot();
        QVERIFY(serverChart->legend->visible());
        QVERIFY2(!serverChart->legend->outerRect().intersects(serverChart->axisRect()->rect()),
                 qPrintable(QString("legend at y %1, plot from y %2").arg(serverChart->legend->outerRect().y())
                                .arg(serverChart->axisRect()->rect().y())));
        // At 1024x700 the view keeps its chart's full height (axes and tick labels inside it).
        window.resize(1024, 700);
        QTest::qWait(50);
        QVERIFY2(serverChart->height() >= serverChart->minimumHeight(),
                 qPrintable(QString("server chart %1 px high").arg(serverChart->height())));
        // The step charts (occupancy, tokens, KV, memory, throughput) get no data from a remote engine and
        // say so in the plot; the request charts (latency, histogram, timeline) show the requests.
        int noted = 0;
        for (const auto& chart : window.chartsPanel()->charts()) {
            const bool note = window.chartsPanel()->stepChartsNote(chart.plot).startsWith("Not reported by a remote engine");
            QVERIFY2(note == chart.fromSteps, qPrintable(chart.name));
            noted += note;
        }
        QCOMPARE(noted, 5);

        // Both panes got replies from the server, streamed, with client-side TTFT.
        QCOMPARE(window.panes().size(), 2);
        for (ChatPane* pane : window.panes()) {
            const RequestRecord* r = nullptr;
            for (const RequestRecord& record : c->session()->requests())
                if (record.origin == pane->title()) r = &record;
            QVERIFY2(r, qPrintable(pane->title()));
            QVERIFY2(r->metrics, qPrintable(r->requestId));
            QVERIFY2(r->finishReason == FinishReason::STOP || r->finishReason == FinishReason::LENGTH,
                     qPrintable(r->requestId + " " + finishReasonName(r->finishReason) + " " + r->error));
            QVERIFY(r->metrics->num_output_tokens > 0);
            QVERIFY(r->metrics->ttft() > 0);
            QVERIFY(!r->text.isEmpty());
        }

        QVERIFY2(window.exportSession(dir.path(), &error), qPrintable(error));
        const QJsonObject session = readJsonFile(dir.filePath("session.json"));
        QCOMPARE(session.value("target").toObject().value("kind").toString(), QString("remote"));
        QCOMPARE(session.value("target").toObject().value("model").toString(), kModel);
        QVERIFY(!session.contains("config"));  // the local knobs are not the remote engine's
        const QJsonObject metrics = session.value("server_metrics").toObject();
        QCOMPARE(metrics.value("engine").toString(), QString("kvscope"));
        QVERIFY(!metrics.value("samples").toArray().isEmpty());

        // Two runs of one workload, one per target, side by side.
        const QJsonArray runs = session.value("benchmarks").toArray();
        QCOMPARE(runs.size(), 2);
        const QJsonObject local = runs[0].toObject(), remote = runs[1].toObject();
        QCOMPARE(local.value("target").toObject().value("kind").toString(), QString("local"));
        QCOMPARE(remote.value("target").toObject().value("kind").toString(), QString("remote"));
        QCOMPARE(remote.value("mode").toString(), QString("remote"));
        QCOMPARE(remote.value("completed").toInt(), 8);
        QCOMPARE(remote.value("total_input_tokens").toInt(), 8 * 16);  // exact input lengths: token ids sent
        QCOMPARE(local.value("completed").toInt(), 8);
        QVERIFY(remote.value("mean_ttft_ms").toDouble() > 0);
        QVERIFY(remote.value("server_metrics").toObject().contains("samples"));
        QCOMPARE(remote.value("requests").toArray().size(), 8);
        BenchResultsModel* results = window.benchmarkPanel()->resultsModel();
        QCOMPARE(results->rowCount(), 2);
        QCOMPARE(BenchResultsModel::targetLabel(results->results()[0]), QString("local"));
        QCOMPARE(BenchResultsModel::targetLabel(results->results()[1]), "remote kvscope " + kModel);
        QVERIFY(results->data(results->index(1, BenchResultsModel::Source)).toString().contains("remote kvscope"));

        // The key went to the server only: in no exported file, nor in the settings.
        int files = 0;
        for (QDirIterator it(dir.path(), QDir::Files, QDirIterator::Subdirectories); it.hasNext();) {
            QFile f(it.next());
            QVERIFY(f.open(QIODevice::ReadOnly));
            QVERIFY2(!f.readAll().contains(kKey.toUtf8()), qPrintable(f.fileName()));
            ++files;
        }
        QVERIFY(files >= 6);
        QVERIFY(QFileInfo::exists(dir.filePath("charts/server_metrics.png")));
        QVERIFY(QFileInfo::exists(dir.filePath("remote_1024x700.png")));
        QSettings settings;
        for (const QString& k : settings.allKeys()) QVERIFY2(!settings.value(k).toString().contains(kKey), qPrintable(k));

        // A request the server refuses (prompt + max_tokens beyond its max_model_len 256) ends with the
        // server's reason in the pane's request; the session goes on.
        {
            ChatPane* pane = window.panes().back();
            SamplingParams p = pane->samplingParams();
            p.max_tokens = 255;
            pane->setSamplingParams(p);
            QSignalSpy rejected(c, &EngineController::requestRejected);
            pane->sendText("Longer, please");
            QVERIFY(rejected.wait(20000));
            const QString message = rejected.at(0).at(1).toString();
            QVERIFY2(message.startsWith("HTTP 400"), qPrintable(message));
            QTRY_VERIFY_WITH_TIMEOUT(c->isIdle(), 20000);
            const RequestRecord* r = c->session()->request(rejected.at(0).at(0).toString());
            QVERIFY(r && r->finishReason == FinishReason::ERROR && r->error == message);
            // It had no first token: its TTFT is exported as null (it went out as -1000 ms).
            QVERIFY2(window.exportSession(dir.path(), &error), qPrintable(error));
            bool found = false;
            for (const QJsonValue& v : readJsonFile(dir.filePath("session.json")).value("requests").toArray())
                if (v.toObject().value("request_id").toString() == r->requestId) {
                    found = true;
                    QVERIFY2(v.toObject().value("ttft_ms").isNull(), qPrintable(QJsonDocument(v.toObject()).toJson()));
                }
            QVERIFY(found);
        }

        // The server's cached prompt tokens reach the request (table, export): the pane's second message
        // resends the first exchange, which the server's prefix cache holds.
        {
            ChatPane* pane = window.panes().front();
            SamplingParams p = pane->samplingParams();
            p.max_tokens = 8;
            pane->setSamplingParams(p);
            const QString text = "Tell me a long story about a dragon, a knight and a castle on a hill, please.";
            for (int i = 0; i < 2; ++i) {
                QSignalSpy done(pane, &ChatPane::replyFinished);
                pane->sendText(text);
                QVERIFY(done.wait(30000));
            }
            const RequestRecord* r = c->session()->request(pane->lastRequestId());
            QVERIFY(r && r->metrics);
            QVERIFY2(r->numCachedTokens > 0 && r->numCachedTokens == r->metrics->num_cached_tokens,
                     qPrintable(QString::number(r->numCachedTokens)));
        }

        // Load model switches back to the local engine, and a pane runs there.
        QSignalSpy back(&window, &MainWindow::modelReady);
        window.loadModel("dummy:tiny");
        QVERIFY(back.wait(60000));
        QVERIFY(!c->isRemote());
        QVERIFY(window.blockMap()->isVisible());
        QVERIFY(!window.remoteServerView()->isVisible());
        QVERIFY(!statusText(c->status()).startsWith("remote"));
        for (const auto& chart : window.chartsPanel()->charts())
            QVERIFY2(window.chartsPanel()->stepChartsNote(chart.plot).isEmpty(), qPrintable(chart.name));
        ChatPane* pane = window.panes().front();
        pane->sendText("Again");
        QTRY_VERIFY_WITH_TIMEOUT(c->isIdle() && !pane->isBusy(), 60000);
        QCOMPARE(int(c->session()->requests().size()), 1);
        const RequestRecord& r = c->session()->requests().front();
        QCOMPARE(r.origin, pane->title());
        QVERIFY(r.metrics && r.metrics->num_output_tokens > 0);
        QVERIFY(!c->session()->steps().empty());  // the local engine ran it
    }

private:
    kvscope::test::ServeProcess m_serve;
    QString m_url;
};

QTEST_MAIN(TestRemoteSession)
#include "test_remote_session.moc"
