// The benchmark panel as a person uses it (issue 17, item 9), in the real main window at 1024x700 and
// 1920x1080: the progress bar counts the chosen workload before a run and its text is never cut (nor
// the status bar's); the results table shows a run's key figures without scrolling sideways, and no
// figure is cut; the comparison chart's legend is clear of its bars; export creates a missing folder
// and names the path when it cannot write. KVSCOPE_TEST_SCREENSHOTS=DIR keeps a PNG of each size.
#include "bench_results_model.h"
#include "benchmark_panel.h"
#include "engine_controller.h"
#include "main_window.h"

#include <QDir>
#include <QHeaderView>
#include <QJsonObject>
#include <QProgressBar>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>
#include <qcustomplot.h>

using namespace kvscope;
using namespace kvscope::ui;

namespace {

void screenshot(QWidget* w, const QString& name) {
    if (const QString dir = qEnvironmentVariable("KVSCOPE_TEST_SCREENSHOTS"); !dir.isEmpty()) {
        QDir().mkpath(dir);
        w->grab().save(QDir(dir).filePath(name + ".png"));
    }
}

// Its text, as drawn now, fits inside it (QProgressBar wraps or cuts a text wider than the bar).
QString textCut(const QProgressBar* bar) {
    const int needed = bar->fontMetrics().horizontalAdvance(bar->text()) + 8;
    return bar->width() >= needed ? QString()
                                  : QString("'%1' needs %2 px, the bar is %3").arg(bar->text()).arg(needed).arg(bar->width());
}

QProgressBar* statusBarProgress(MainWindow& window) {
    for (auto* bar : window.statusBar()->findChildren<QProgressBar*>())
        if (bar->format().startsWith("benchmark")) return bar;
    return nullptr;
}

BenchSpec smallSpec(int prompts) {
    BenchSpec spec;
    spec.numPrompts = prompts;
    spec.inputLen = 16;
    spec.outputLen = 8;
    return spec;
}

}  // namespace

class TestBenchmarkPanel : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void progressCountsTheChosenWorkload() {
        EngineController controller;
        BenchmarkPanel panel(&controller);
        auto* progress = panel.findChild<QProgressBar*>();
        QVERIFY(progress);
        QCOMPARE(progress->text(), QString("0 / %1 requests").arg(panel.spec().numPrompts));
        panel.setSpec(smallSpec(12));
        QCOMPARE(progress->text(), QString("0 / 12 requests"));
        panel.setSpec(smallSpec(100000));
        QCOMPARE(progress->text(), QString("0 / 100000 requests"));
        QVERIFY(progress->minimumWidth() >= progress->fontMetrics().horizontalAdvance(progress->text()) + 8);
    }

    // A run that ended with failures says so on its bar: "8 / 8 requests" read as all done well.
    void progressNamesFailedRequests() {
        EngineController controller;
        BenchmarkPanel panel(&controller);
        auto* progress = panel.findChild<QProgressBar*>();
        panel.setSpec(smallSpec(8));
        emit controller.benchmarkProgressed(8, 8);
        BenchResult r;
        r.spec = smallSpec(8);
        r.summary = QJsonObject{{"completed", 6}, {"failed", 2}};
        emit controller.benchmarkFinished(r);
        QCOMPARE(progress->text(), QString("8 / 8 requests, 2 failed"));
        panel.setSpec(smallSpec(4));  // the next workload: its count alone
        QCOMPARE(progress->text(), QString("0 / 4 requests"));
    }

    // Runs compared: TTFT (tens of ms) and E2EL (seconds) share a log axis, so that both lines read (on a
    // linear one the TTFT line lay flat on zero).
    void comparisonLatencyAxisIsLog() {
        EngineController controller;
        BenchmarkPanel panel(&controller);
        for (const auto& [ttft, e2el] : {std::pair{12.0, 1500.0}, std::pair{34.0, 1700.0}}) {
            BenchResult r;
            r.spec = smallSpec(8);
            r.summary = QJsonObject{{"completed", 8}, {"output_throughput", 900.0}, {"mean_ttft_ms", ttft}, {"mean_e2el_ms", e2el}};
            emit controller.benchmarkFinished(r);
        }
        QCPAxis* latency = panel.comparisonChart()->yAxis2;
        QCOMPARE(latency->scaleType(), QCPAxis::stLogarithmic);
        QVERIFY2(latency->range().lower > 0 && latency->range().lower < 12 && latency->range().upper > 1700,
                 qPrintable(QString("%1..%2").arg(latency->range().lower).arg(latency->range().upper)));
    }

    void readableAtSize_data() {
        QTest::addColumn<QSize>("size");
        QTest::addRow("1024x700") << QSize(1024, 700);
        QTest::addRow("1920x1080") << QSize(1920, 1080);
    }
    void readableAtSize() {
        QFETCH(QSize, size);
        MainWindow window;
        QSignalSpy ready(&window, &MainWindow::modelReady);
        EngineConfig config = EngineController::defaultConfig();
        config.num_threads = 2;
        window.loadModel("dummy:tiny", config);
        QVERIFY(ready.wait(60000));
        window.resize(size);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        BenchmarkPanel* panel = window.benchmarkPanel();
        auto* tabs = window.findChild<QTabWidget*>();
        QVERIFY(tabs);
        tabs->setCurrentIndex(tabs->indexOf(panel->parentWidget()->parentWidget()));  // the page is its scroll area
        QVERIFY(panel->isVisible());
        auto* progress = panel->findChild<QProgressBar*>();
        panel->setSpec(smallSpec(64));
        QApplication::processEvents();
        QCOMPARE(progress->text(), QString("0 / 64 requests"));
        QVERIFY2(textCut(progress).isEmpty(), qPrintable(textCut(progress)));

        // Three runs, the last paced so that the status bar's progress shows.
        for (int i = 0; i < 2; ++i) {
            panel->setSpec(smallSpec(6 + i));
            QSignalSpy finished(window.controller(), &EngineController::benchmarkFinished);
            if (i == 0)
                panel->run();
            else
                panel->runNamed("seqs16");  // a script's name for its run
            QVERIFY(finished.wait(120000));
        }
        BenchSpec paced = smallSpec(24);
        paced.requestRate = 20;
        panel->setSpec(paced);
        QSignalSpy finished(window.controller(), &EngineController::benchmarkFinished);
        panel->run();
        QProgressBar* statusProgress = statusBarProgress(window);
        QVERIFY(statusProgress);
        QTRY_VERIFY_WITH_TIMEOUT(statusProgress->isVisible() && statusProgress->value() > 0, 60000);
        QVERIFY2(textCut(statusProgress).isEmpty(), qPrintable(textCut(statusProgress)));
        QVERIFY2(textCut(progress).isEmpty(), qPrintable(textCut(progress)));
        QVERIFY(finished.wait(120000));
        QCOMPARE(progress->text(), QString("24 / 24 requests"));
        QTRY_COMPARE(panel->resultsModel()->rowCount(), 3);
        // Labels say what ran, or carry the name the run was given.
        const auto name = [&](int row) { return panel->resultsModel()->index(row, BenchResultsModel::Name).data().toString(); };
        QVERIFY2(name(0).startsWith(QString("#1 %1 6x").arg(smallSpec(6).dataset)), qPrintable(name(0)));
        QVERIFY2(name(1).startsWith("#2 seqs16"), qPrintable(name(1)));
        QTest::qWait(100);  // the chart's queued replot
        screenshot(&window, QString("benchmark_%1x%2").arg(size.width()).arg(size.height()));
        screenshot(panel, QString("benchmark_panel_%1x%2").arg(size.width()).arg(size.height()));

        // The tab scrolls down if it must, never sideways.
        auto* area = qobject_cast<QScrollArea*>(panel->parentWidget()->parentWidget());
        QVERIFY(area);
        // The last run's row is in view without scrolling: at 1024x700 the table lay below the fold.
        auto lastRowInView = [&] {
            auto* results = panel->findChild<QTableView*>();
            QVERIFY(results);
            const QRect last = results->visualRect(results->model()->index(results->model()->rowCount() - 1, 0));
            const QPoint top = results->viewport()->mapTo(area->viewport(), last.topLeft());
            const QPoint bottom = results->viewport()->mapTo(area->viewport(), last.bottomLeft());
            QVERIFY2(last.isValid() && area->viewport()->rect().contains(top) && area->viewport()->rect().contains(bottom),
                     qPrintable(QString("last run's row at y %1..%2 of a %3 px tab").arg(top.y()).arg(bottom.y()).arg(area->viewport()->height())));
        };
        lastRowInView();
        if (QTest::currentTestFailed()) return;
        QVERIFY2(panel->width() <= area->viewport()->width(),
                 qPrintable(QString("panel %1 px in a %2 px tab").arg(panel->width()).arg(area->viewport()->width())));

        // The name and the first figures show without scrolling the table; no figure is cut.
        auto* table = panel->findChild<QTableView*>();
        QVERIFY(table);
        QCOMPARE(table->horizontalScrollBar()->value(), 0);
        for (int c : {int(BenchResultsModel::Name), int(BenchResultsModel::OutputTput), int(BenchResultsModel::MeanTtft)}) {
            const int right = table->columnViewportPosition(c) + table->columnWidth(c);
            QVERIFY2(right <= table->viewport()->width(),
                     qPrintable(QString("column %1 ends at %2 of %3 px")
                                    .arg(table->model()->headerData(c, Qt::Horizontal).toString())
                                    .arg(right).arg(table->viewport()->width())));
        }
        QVERIFY(table->columnWidth(BenchResultsModel::Name) <= table->viewport()->width() / 2);
        for (int c = BenchResultsModel::Name + 1; c < BenchResultsModel::Source; ++c)
            for (int r = 0; r < table->model()->rowCount(); ++r) {
                const QString text = table->model()->index(r, c).data().toString();
                QVERIFY2(table->columnWidth(c) >= table->fontMetrics().horizontalAdvance(text) + 6,
                         qPrintable(QString("'%1' in a column of %2 px").arg(text).arg(table->columnWidth(c))));
            }
        QVERIFY(!table->model()->index(0, BenchResultsModel::Name).data(Qt::ToolTipRole).toString().isEmpty());

        // The legend stays out of the plot, where the bars are.
        QCustomPlot* chart = panel->comparisonChart();
        chart->replot();
        // Each bar's label fits between its neighbours', cut with "…" where it must be.
        const double perBar = chart->xAxis->coordToPixel(2) - chart->xAxis->coordToPixel(1);
        const QFontMetrics tickFont(chart->xAxis->tickLabelFont());
        for (const QString& label : chart->xAxis->tickVectorLabels())
            for (const QString& line : label.split('\n'))
                QVERIFY2(tickFont.horizontalAdvance(line) <= perBar,
                         qPrintable(QString("'%1' is %2 px under bars %3 px apart").arg(line).arg(tickFont.horizontalAdvance(line)).arg(perBar)));
        // Wide, the runs are named (three runs at 1920 px showed only "#1", "#2", "#3").
        if (size.width() >= 1920)
            QVERIFY2(chart->xAxis->tickVectorLabels().value(0).startsWith("#1 random"), qPrintable(chart->xAxis->tickVectorLabels().value(0)));
        QVERIFY(chart->legend->visible());
        QVERIFY2(!chart->legend->outerRect().intersects(chart->axisRect()->rect()),
                 qPrintable(QString("legend %1,%2 %3x%4 over the plot")
                                .arg(chart->legend->outerRect().x()).arg(chart->legend->outerRect().y())
                                .arg(chart->legend->outerRect().width()).arg(chart->legend->outerRect().height())));
        QVERIFY(chart->rect().contains(chart->legend->outerRect()));

        // A run that ends while the Charts tab shows: its row is in view when the Benchmark tab is shown again,
        // from wherever the tab was left.
        area->verticalScrollBar()->setValue(0);
        tabs->setCurrentIndex(0);
        panel->setSpec(smallSpec(5));
        QSignalSpy hiddenRun(window.controller(), &EngineController::benchmarkFinished);
        panel->run();
        QVERIFY(hiddenRun.wait(120000));
        QTest::qWait(20);
        tabs->setCurrentIndex(tabs->indexOf(area));
        QTest::qWait(20);
        lastRowInView();
    }

    void exportCreatesItsFolder() {
        EngineController controller;
        BenchmarkPanel panel(&controller);
        BenchResult r;
        r.spec.name = "run 1";
        r.summary = QJsonObject{{"completed", 8}, {"output_throughput", 12.5}};
        panel.resultsModel()->addResult(r);
        QTemporaryDir dir;
        const QString path = dir.filePath("not/there/yet/results.json");
        QString error;
        QVERIFY2(panel.exportResults(path, &error), qPrintable(error));
        BenchResultsModel loaded;
        QCOMPARE(loaded.loadFile(path, &error), 1);
        QCOMPARE(loaded.index(0, BenchResultsModel::Name).data().toString(), QString("run 1"));

        // A folder that cannot be made (a file is in the way): false, and the error names the path.
        QFile blocker(dir.filePath("a-file"));
        QVERIFY(blocker.open(QIODevice::WriteOnly));
        blocker.close();
        const QString blocked = dir.filePath("a-file/results.json");
        QVERIFY(!panel.exportResults(blocked, &error));
        QVERIFY2(error.contains(blocked), qPrintable(error));
    }
};

QTEST_MAIN(TestBenchmarkPanel)
#include "test_benchmark_panel.moc"
