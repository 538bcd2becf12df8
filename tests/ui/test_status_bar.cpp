// The status bar tells what the block map and the panes show (issue 17): after Stop all, a model
// reload, a block_size rebuild and a benchmark's end, its request counts are the requests' statuses in
// the session (what the panes and the request table read) and its KV figures are the snapshot the block
// map draws. Runs the real main window on dummy:tiny.
#include "benchmark_panel.h"
#include "chat_pane.h"
#include "engine_controller.h"
#include "main_window.h"
#include "session_data.h"
#include "tuning_panel.h"

#include <QDir>
#include <QLabel>
#include <QStatusBar>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>

#include <algorithm>

using namespace kvscope;
using namespace kvscope::ui;

namespace {

EngineConfig smallConfig(int kvMiB) {
    EngineConfig c = EngineController::defaultConfig();
    c.num_threads = 2;
    c.kv_cache_memory = qint64(kvMiB) << 20;
    c.scheduler.max_model_len = 256;
    return c;
}

struct StatusLine {
    int running = -1, waiting = -1, free = -1, blocks = -1;
    double usage = -1;
    bool idle = false;
};

StatusLine parse(const QString& text) {
    StatusLine s;
    static const QRegularExpression requests("(\\d+) running, (\\d+) waiting");
    static const QRegularExpression kv("KV ([0-9.]+)% used  \\|  (\\d+)/(\\d+) blocks free");
    if (auto m = requests.match(text); m.hasMatch()) {
        s.running = m.captured(1).toInt();
        s.waiting = m.captured(2).toInt();
    }
    if (auto m = kv.match(text); m.hasMatch()) {
        s.usage = m.captured(1).toDouble();
        s.free = m.captured(2).toInt();
        s.blocks = m.captured(3).toInt();
    }
    s.idle = text.startsWith("idle  |") || text.contains("  |  idle  |");  // first, or after the simulation label
    return s;
}

}  // namespace

class TestStatusBar : public QObject {
    Q_OBJECT

    MainWindow* m_window = nullptr;
    QLabel* m_label = nullptr;
    // The whole status line (the label elides it to its width).
    QString line() const { return m_label->property("fullText").toString(); }

    // The status line against the snapshot and the session, as they are now.
    QString mismatch() const {
        const StatusLine s = parse(line());
        const auto kv = m_window->controller()->latestSnapshot();
        if (!kv) return "no snapshot";
        int running = 0, waiting = 0;
        for (const RequestRecord& r : m_window->controller()->session()->requests()) {
            running += r.status == RequestStatus::RUNNING;
            waiting += r.status == RequestStatus::WAITING || r.status == RequestStatus::PREEMPTED;
        }
        const QString got = "'" + line() + "'";
        if (s.blocks != kv->num_blocks || s.free != kv->num_free_blocks)
            return got + QString(": the block map has %1 of %2 free").arg(kv->num_free_blocks).arg(kv->num_blocks);
        if (qAbs(s.usage - kv->usage * 100) > 0.051) return got + QString(": the block map is %1% used").arg(kv->usage * 100);
        if (s.running != running || s.waiting != waiting)
            return got + QString(": the session has %1 running, %2 waiting").arg(running).arg(waiting);
        if (s.idle != m_window->controller()->isIdle()) return got + ": idle differs from the controller";
        return {};
    }

    void sendLongPrompts(int panes) {
        while (int(m_window->panes().size()) < panes) m_window->addPane();
        for (ChatPane* p : m_window->panes()) {
            SamplingParams s = p->samplingParams();
            s.max_tokens = 200;
            s.ignore_eos = true;
            p->setSamplingParams(s);
        }
        m_window->sendToAll("Tell me a long story about the sea and the ships on it");
        // At least one step has run them (whether they are still running is a race the checks need not win).
        const auto& steps = m_window->controller()->session()->steps();
        QTRY_VERIFY_WITH_TIMEOUT(std::any_of(steps.begin(), steps.end(), [](const StepRecord& r) {
            return r.stats.num_running > 0;
        }), 30000);
    }


private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        m_window = new MainWindow;
        m_window->resize(1400, 900);
        m_window->show();
        m_label = m_window->findChild<QLabel*>("engineStatus");
        QVERIFY(m_label);
        QSignalSpy ready(m_window, &MainWindow::modelReady);
        m_window->loadModel("dummy:tiny", smallConfig(2));
        QVERIFY(ready.wait(60000));
        QTRY_VERIFY_WITH_TIMEOUT(line().contains("blocks free"), 10000);
        QVERIFY2(mismatch().isEmpty(), qPrintable(mismatch()));
    }
    void cleanupTestCase() { delete m_window; }

    void afterStopAll() {
        sendLongPrompts(3);
        m_window->stopAll();
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->isIdle(), 120000);
        QVERIFY2(mismatch().isEmpty(), qPrintable(mismatch()));
        const StatusLine s = parse(line());
        QCOMPARE(s.running, 0);
        QCOMPARE(s.waiting, 0);
        QCOMPARE(s.usage, 0.0);  // nothing holds a block once every request is stopped
        QVERIFY(s.idle);
    }

    void afterRebuild() {
        sendLongPrompts(3);
        QSignalSpy applied(m_window->controller(), &EngineController::updateApplied);
        QSignalSpy config(m_window->controller(), &EngineController::configChanged);
        EngineConfig c = m_window->controller()->config();
        c.block_size = c.block_size == 32 ? 16 : 32;
        m_window->controller()->reconfigure(c);
        QVERIFY(config.wait(30000));
        // The update the rebuild publishes: whatever state the requests are in, the line agrees.
        QVERIFY(applied.wait(30000));
        QVERIFY2(mismatch().isEmpty(), qPrintable(mismatch()));
        m_window->stopAll();
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->isIdle(), 120000);
        QVERIFY2(mismatch().isEmpty(), qPrintable(mismatch()));
    }

    void afterReload() {
        const int before = m_window->controller()->latestSnapshot()->num_blocks;
        QSignalSpy ready(m_window, &MainWindow::modelReady);
        EngineConfig c = smallConfig(1);  // half the pool at the block size running now: half the blocks
        c.block_size = m_window->controller()->config().block_size;
        m_window->loadModel("dummy:tiny", c);
        QVERIFY(ready.wait(60000));
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->latestSnapshot()->num_blocks != before, 10000);
        QTRY_VERIFY_WITH_TIMEOUT(mismatch().isEmpty(), 10000);
        QVERIFY(parse(line()).blocks < before);
    }

    // A load that fails leaves the model before it running: the toolbar keeps its name, and the status
    // bar says what failed once (the loader's message already names the path) and what still runs.
    void afterFailedLoad() {
        auto* name = m_window->findChild<QLabel*>("modelName");
        QVERIFY(name);
        const QString before = name->text();
        QVERIFY(before.contains("dummy:tiny"));
        const QString missing = QDir::temp().filePath("kvscope-no-such-dir/model.gguf");
        QSignalSpy failed(m_window->controller(), &EngineController::modelLoadFailed);
        m_window->loadModel(missing);
        QVERIFY(failed.wait(60000));
        QApplication::processEvents();
        QCOMPARE(name->text(), before);
        const QString message = m_window->statusBar()->currentMessage();
        QCOMPARE(message.count(missing), 1);
        QVERIFY2(message.contains("no such file") && message.contains("dummy:tiny is still loaded"), qPrintable(message));
        QVERIFY2(mismatch().isEmpty(), qPrintable(mismatch()));
    }

    void afterBenchmark() {
        BenchSpec spec;
        spec.numPrompts = 6;
        spec.inputLen = 16;
        spec.outputLen = 8;
        spec.requestRate = 0;
        m_window->benchmarkPanel()->setSpec(spec);
        QSignalSpy finished(m_window->controller(), &EngineController::benchmarkFinished);
        m_window->benchmarkPanel()->run();
        QVERIFY(finished.wait(120000));
        QTRY_VERIFY_WITH_TIMEOUT(m_window->controller()->isIdle(), 120000);
        QVERIFY2(mismatch().isEmpty(), qPrintable(mismatch()));
        QVERIFY2(parse(line()).idle, qPrintable(line()));
        QVERIFY2(line().startsWith("idle  |  step "), qPrintable(line()));  // the state where a narrow window keeps it
        m_window->statusBar()->clearMessage();  // a message (afterFailedLoad's) hides the line
        QVERIFY(m_label->isVisible());
        // At 1024 px the line may lose the KV figures' end (the block map's caption has them), not the
        // preemption count, which only it shows.
        m_window->resize(1024, 700);
        QTRY_VERIFY_WITH_TIMEOUT(m_window->width() == 1024, 5000);
        QApplication::processEvents();
        QVERIFY2(m_label->text().contains(QRegularExpression("\\d+ preemptions?  \\|")), qPrintable(m_label->text()));
        // Whole figures, then "…" for those dropped: it was cut inside one ("145/204 blocks f…"). The label
        // itself narrowed (the window stops at its minimum width, where this short line still fits).
        bool cut = false;
        for (int width : {m_label->width(), 300, 200}) {
            m_label->resize(width, m_label->height());
            const QString shown = m_label->text();
            QVERIFY2(shown == line() || (shown.endsWith("  |  \u2026") && line().startsWith(shown.chopped(1))),
                     qPrintable(shown + " / " + line()));
            cut |= shown != line();
        }
        QVERIFY(cut);
    }
};

QTEST_MAIN(TestStatusBar)
#include "test_status_bar.moc"
