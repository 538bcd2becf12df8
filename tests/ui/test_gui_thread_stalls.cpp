// The GUI thread while the engine loads models and rebuilds (issue 17: "model loads and rebuilds keep the
// GUI thread under 16 ms per frame"). The real window loads dummy:smollm-135m, runs requests, rebuilds
// block_size, max_num_seqs and the cache dtype mid-run, then loads the real tiny model. Every event the
// GUI thread delivers is timed (the application's notify), so a stall is printed with its receiver.
// Speed is not asserted (no timed assertions): the checks are structural. Each chart replots at most once
// per engine update, and not at all while out of view (the benchmark tab in front); no pane, transcript or
// chart is resized by the engine's updates (a label whose text changed its size hint relaid them all out);
// no QSettings file is written during the session. The StallMonitor's maximum per phase and the slowest
// events are printed.
#include "block_map_widget.h"
#include "charts_panel.h"
#include "chat_pane.h"
#include "engine_controller.h"
#include "main_window.h"
#include "stall_monitor.h"
#include "test_support.h"
#include "theme.h"

#include <QApplication>
#include <QDateTime>
#include <QFileInfo>
#include <QSettings>
#include <QTabWidget>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QSignalSpy>
#include <QTimer>
#include <QtTest>
#include <qcustomplot.h>

#include <algorithm>
#include <map>

using namespace kvscope;
using namespace kvscope::ui;

namespace {

// Times every top-level event delivery of the GUI thread: the receiver's class and the event type of
// the slowest ones are what a profile of a stall needs.
class TimingApplication : public QApplication {
public:
    using QApplication::QApplication;
    struct Slow {
        double ms;
        QString what;
    };
    bool notify(QObject* receiver, QEvent* event) override {
        if (m_depth > 0 || QThread::currentThread() != thread()) return QApplication::notify(receiver, event);
        QElapsedTimer t;
        t.start();
        const QString what = QString("%1 (%2) event %3")
                                 .arg(receiver->metaObject()->className(), receiver->objectName())
                                 .arg(int(event->type()));
        ++m_depth;
        const bool r = QApplication::notify(receiver, event);
        --m_depth;
        const double ms = double(t.nsecsElapsed()) / 1e6;
        if (m_recording && ms > 4) m_slow.push_back({ms, what});

        return r;
    }
    void record(bool on) { m_recording = on; }
    std::vector<Slow> takeSlowest(size_t n) {
        std::sort(m_slow.begin(), m_slow.end(), [](const Slow& a, const Slow& b) { return a.ms > b.ms; });
        if (m_slow.size() > n) m_slow.resize(n);
        return std::exchange(m_slow, {});
    }

private:
    int m_depth = 0;
    bool m_recording = false;
    std::vector<Slow> m_slow;
};

TimingApplication* app() { return static_cast<TimingApplication*>(qApp); }

void spin(int ms) {
    // The application's own event loop: QTest::qWait sleeps between its polls.
    QEventLoop loop;
    QTimer::singleShot(ms, &loop, &QEventLoop::quit);
    loop.exec();
}

}  // namespace

class TestGuiThreadStalls : public QObject {
    Q_OBJECT
private slots:
    void loadsAndRebuildsDuringARun() {
        Theme::apply(true);
        MainWindow window;
        window.resize(1600, 1000);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        for (int i = 0; i < 3; ++i) window.addPane();
        spin(300);
        // Replots counted per chart, updates per controller: a chart that replots more than once per
        // update replots for nothing (the 33 ms timer must coalesce them).
        int updates = 0;
        connect(window.controller(), &EngineController::updateApplied, this, [&updates] { ++updates; });
        std::map<QString, int> replots;
        // Widgets resized while the engine runs: a pane, its transcript or a chart resized by a changed
        // label is laid out again whole (a transcript's document, a chart's paint buffers).
        struct ResizeCounter : QObject {
            std::map<QString, int> resizes;
            bool eventFilter(QObject* o, QEvent* e) override {
                if (e->type() == QEvent::Resize) ++resizes[o->metaObject()->className() + QString(":") + o->objectName()];
                return false;
            }
        } resizeCounter;
        for (QWidget* w : window.findChildren<QWidget*>()) w->installEventFilter(&resizeCounter);
        for (const auto& c : window.chartsPanel()->charts())
            connect(c.plot, &QCustomPlot::afterReplot, this, [&replots, name = c.name] { ++replots[name]; });

        struct Phase {
            QString name;
            double stallMs;
            std::vector<TimingApplication::Slow> slowest;
        };
        std::vector<Phase> phases;
        // A QSettings write syncs its file on the GUI thread: none happens during a session.
        const QFileInfo settingsFile(QSettings().fileName());
        const QDateTime settingsWritten = settingsFile.exists() ? settingsFile.lastModified() : QDateTime();
        auto measure = [&](const QString& name, const std::function<void()>& action, const std::function<bool()>& done) {
            window.stallMonitor()->reset();
            app()->takeSlowest(0);
            app()->record(true);
            action();
            for (int i = 0; i < 600 && !done(); ++i) spin(50);
            spin(300);  // the frames after it
            app()->record(false);
            phases.push_back({name, window.stallMonitor()->maxStallMs(), app()->takeSlowest(4)});
        };

        EngineConfig c = EngineController::defaultConfig();
        c.num_threads = 1;
        c.scheduler.max_model_len = 512;
        QSignalSpy ready(&window, &MainWindow::modelReady);
        measure("load dummy:smollm-135m", [&] { window.loadModel("dummy:smollm-135m", c); },
                [&] { return ready.count() == 1; });
        QCOMPARE(ready.count(), 1);

        window.sendToAll("Once upon a time");
        QTRY_VERIFY_WITH_TIMEOUT(window.controller()->status().numRunning > 0, 60000);
        auto rebuild = [&](const QString& name, const std::function<void(EngineConfig&)>& edit) {
            EngineConfig next = window.controller()->config();
            edit(next);
            QSignalSpy applied(window.controller(), &EngineController::configChanged);
            measure(name, [&] { window.controller()->reconfigure(next); }, [&] { return applied.count() > 0; });
            QVERIFY(applied.count() > 0);
        };
        rebuild("rebuild block_size 32", [](EngineConfig& e) { e.block_size = 32; });
        // With the benchmark tab in front the charts are out of view: none replots, and each replots once
        // it is shown again.
        auto* tabs = window.findChild<QTabWidget*>();
        QVERIFY(tabs);
        tabs->setCurrentIndex(1);
        spin(100);
        const auto replotsBefore = replots;
        const int updatesBefore = updates;
        rebuild("max_num_seqs 2 (charts out of view)", [](EngineConfig& e) { e.scheduler.max_num_seqs = 2; });
        QVERIFY(updates > updatesBefore);
        const bool quietOutOfView = replots == replotsBefore;  // checked below, after the figures
        tabs->setCurrentIndex(0);
        spin(200);
        QStringList notReplotted;
        for (const auto& c : window.chartsPanel()->charts())
            if (!c.plot->visibleRegion().isEmpty() && replots[c.name] <= replotsBefore.at(c.name)) notReplotted << c.name;
        resizeCounter.resizes.clear();  // the tab switch laid the charts out; the engine's updates must not
        rebuild("rebuild kv dtype f16", [](EngineConfig& e) { e.kv_cache_dtype = "f16"; });
        QCOMPARE(window.controller()->config().block_size, 32);

        const QString tiny = QString::fromStdString(kvscope::test::models_dir() + "/stories260K-hf");
        measure("load stories260K during the run", [&] { window.loadModel(tiny, c); },
                [&] { return ready.count() == 2; });
        QCOMPARE(ready.count(), 2);
        window.sendToAll("One day");
        rebuild("rebuild block_size 8 (stories260K)", [](EngineConfig& e) { e.block_size = 8; });

        for (const Phase& p : phases) {
            qInfo("%-40s GUI max stall %6.1f ms", qPrintable(p.name), p.stallMs);
            for (const auto& s : p.slowest) qInfo("    %6.1f ms  %s", s.ms, qPrintable(s.what));
        }
        for (auto& [k, n] : resizeCounter.resizes) qInfo("resized %4d times: %s", n, qPrintable(k));
        QVERIFY(updates > 0);
        QVERIFY2(quietOutOfView, "a chart out of view replotted");
        QVERIFY2(notReplotted.isEmpty(), qPrintable(notReplotted.join(", ") + " did not replot when shown"));
        for (const QString& stable : QStringList{"kvscope::ui::ChatPane:ChatPane", "QTextEdit:", "QSplitter:paneSplitter", "QCustomPlot:"})
            QVERIFY2(!resizeCounter.resizes.count(stable), qPrintable(stable + " was resized while the engine ran"));
        const QFileInfo settingsAfter(QSettings().fileName());
        QCOMPARE(settingsAfter.exists() ? settingsAfter.lastModified() : QDateTime(), settingsWritten);
        for (const auto& [name, n] : replots) {
            qInfo("chart %-18s %d replots for %d engine updates", qPrintable(name), n, updates);
            QVERIFY2(n <= updates + 2, qPrintable(QString("%1 replotted %2 times for %3 updates").arg(name).arg(n).arg(updates)));
        }
    }
};

int main(int argc, char** argv) {
    TimingApplication application(argc, argv);
    QTEST_SET_MAIN_SOURCE_PATH
    TestGuiThreadStalls tc;
    return QTest::qExec(&tc, argc, argv);
}

#include "test_gui_thread_stalls.moc"
