// The window by keyboard alone (issue 17): Tab leaves every pane's message box without typing a tab
// and reaches Send; Ctrl+N opens a pane with the focus in its message box, Ctrl+W closes the active one;
// Help > Keyboard shortcuts lists these keys. No model is needed: nothing is sent.
#include "bench_results_model.h"
#include "benchmark_panel.h"
#include "chat_pane.h"
#include "engine_controller.h"
#include "main_window.h"
#include "script_runner.h"
#include "session_data.h"
#include "theme.h"

#include <QAction>
#include <QJsonDocument>
#include <QSignalSpy>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QStandardPaths>
#include <QScrollArea>
#include <QScrollBar>
#include <QTabWidget>
#include <QTableView>
#include <QtTest>

using namespace kvscope::ui;

namespace {

// The window shown at a size and active, as a user's: the keys below go to it.
bool showActive(MainWindow& window, int width, int height) {
    window.resize(width, height);
    window.show();
    window.activateWindow();
    return QTest::qWaitForWindowActive(&window);
}

}  // namespace

class TestKeyboard : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        Theme::apply(true);
    }

    void tabReachesSendInEveryPane() {
        MainWindow window;
        window.resize(1600, 1000);
        for (int i = 0; i < 3; ++i) window.addPane();
        window.show();
        window.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&window));
        for (ChatPane* pane : window.panes()) {
            auto* input = pane->findChild<QPlainTextEdit*>("messageInput");
            auto* send = pane->findChild<QPushButton*>("sendButton");
            QVERIFY(input && send);
            input->setFocus(Qt::TabFocusReason);
            QTRY_COMPARE(QApplication::focusWidget(), input);
            QTest::keyClicks(input, "hi");
            int presses = 0;
            while (QApplication::focusWidget() != send && presses < 10) {
                QTest::keyClick(QApplication::focusWidget(), Qt::Key_Tab);
                ++presses;
            }
            QCOMPARE(QApplication::focusWidget(), send);
            QCOMPARE(presses, 1);  // Send is next after the message box
            QCOMPARE(input->toPlainText(), QString("hi"));  // no tab character typed
            // And back: Shift+Tab returns to the message box.
            QTest::keyClick(send, Qt::Key_Backtab, Qt::ShiftModifier);
            QCOMPARE(QApplication::focusWidget(), input);
        }
    }

    void paneShortcuts() {
        MainWindow window;
        QVERIFY(showActive(window, 1600, 1000));
        QTest::keyClick(&window, Qt::Key_N, Qt::ControlModifier);
        QTest::keyClick(QApplication::focusWidget(), Qt::Key_N, Qt::ControlModifier);
        QCOMPARE(int(window.panes().size()), 2);
        // The new pane's message box has the focus: typing goes there.
        auto* input = window.panes().back()->findChild<QPlainTextEdit*>("messageInput");
        QCOMPARE(QApplication::focusWidget(), input);
        QTest::keyClick(QApplication::focusWidget(), Qt::Key_W, Qt::ControlModifier);
        QTRY_COMPARE(int(window.panes().size()), 1);
        QCOMPARE(QApplication::focusWidget(), window.panes().front()->findChild<QPlainTextEdit*>("messageInput"));

        const QString help = window.shortcutSummary();
        for (const QString& key : {QKeySequence(QKeySequence::New).toString(QKeySequence::NativeText),
                                   QString("Ctrl+W"),
                                   QString("Ctrl+Return"), QString("Esc")})
            QVERIFY2(help.contains(key), qPrintable(key + " missing from " + help));
        auto* action = window.findChild<QAction*>("shortcutsAction");
        QVERIFY(action);
        QVERIFY(!action->associatedObjects().isEmpty());  // in the Help menu
    }

    // View > Dark theme shows the theme in use: after a script's theme action, and after a start with --light
    // (main applies it before the window reads its settings); it had stayed checked either way.
    void themeActionFollowsTheTheme() {
        Theme::apply(false);  // as --light
        {
            MainWindow window;
            auto* action = window.findChild<QAction*>("darkThemeAction");
            QVERIFY(action);
            QVERIFY(!action->isChecked());
            window.setDarkTheme(true);
            QVERIFY(action->isChecked());
            window.setDarkTheme(false);
            QVERIFY(!action->isChecked());
        }
        Theme::apply(true);
    }

    // Tab leaves the request table (the arrows move in it): it walked every cell, a keyboard trap with a
    // benchmark's rows.
    void tabLeavesTheRequestTable() {
        MainWindow window;
        QVERIFY(showActive(window, 1600, 1000));
        for (const char* id : {"a", "b", "c"}) window.controller()->session()->addRequest(id, "test", Qt::red);
        auto tabLeaves = [](QTableView* table) {
            table->setFocus(Qt::TabFocusReason);
            table->setCurrentIndex(table->model()->index(0, 0));
            QTRY_COMPARE(QApplication::focusWidget(), static_cast<QWidget*>(table));
            QTest::keyClick(table, Qt::Key_Tab);
            QVERIFY(QApplication::focusWidget() != table);
        };
        auto* table = window.findChild<QTableView*>("requestTable");
        QVERIFY(table && table->model()->rowCount() == 3);
        tabLeaves(table);
        if (QTest::currentTestFailed()) return;

        // The benchmark results table the same way (found by a keyboard-only run: Tab cycled its cells).
        for (int i = 0; i < 2; ++i) {
            BenchResult r;
            r.spec.name = QString("run %1").arg(i + 1);
            r.summary = QJsonObject{{"completed", 8}, {"output_throughput", 12.5}};
            window.benchmarkPanel()->resultsModel()->addResult(r);
        }
        window.findChild<QTabWidget*>()->setCurrentIndex(1);
        auto* results = window.benchmarkPanel()->findChild<QTableView*>();
        QVERIFY(results && results->model()->rowCount() == 2);
        tabLeaves(results);
    }

    // At 1024x700 two panes do not fit side by side: the new one, which has the focus, is scrolled into
    // view (it opened off screen, and typing went where no one could see).
    void newPaneIsScrolledIntoView() {
        MainWindow window;
        QVERIFY(showActive(window, 1600, 1000));  // as a script starts, then resizes and adds panes at once
        window.resize(1024, 700);
        QTest::keyClick(&window, Qt::Key_N, Qt::ControlModifier);
        QTest::keyClick(QApplication::focusWidget(), Qt::Key_N, Qt::ControlModifier);
        QCOMPARE(int(window.panes().size()), 2);
        for (int round = 0; round < 8; ++round) QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
        ChatPane* added = window.panes().back();
        QCOMPARE(QApplication::focusWidget(), added->findChild<QPlainTextEdit*>("messageInput"));
        QScrollArea* area = nullptr;
        for (QWidget* w = added->parentWidget(); w && !area; w = w->parentWidget()) area = qobject_cast<QScrollArea*>(w);
        QVERIFY(area);
        const QRect inView(added->mapTo(area->viewport(), QPoint(0, 0)), added->size());
        QVERIFY2(area->viewport()->rect().adjusted(-2, -2, 2, 2).contains(inView),  // the splitter's frame pixel
                 qPrintable(QString("pane at x %1..%2, viewport %3 wide").arg(inView.left()).arg(inView.right()).arg(area->viewport()->width())));
    }

    // The pane column shows whole panes at any width: at 1024x700 three panes showed the end of one and the start
    // of the next, at 1920 the third was cut in half. A resize keeps the pane at the left edge; the scroll bar's
    // arrow moves one pane.
    void panesFillTheColumnWhole() {
        MainWindow window;
        QVERIFY(showActive(window, 1920, 1080));
        for (int i = 0; i < 3; ++i) QTest::keyClick(QApplication::focusWidget() ? QApplication::focusWidget() : &window, Qt::Key_N, Qt::ControlModifier);
        QCOMPARE(int(window.panes().size()), 3);
        auto settle = [] {
            for (int round = 0; round < 8; ++round) QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
            QTest::qWait(20);  // the refit's restored scroll position (a zero timer)
        };
        QScrollArea* area = window.findChild<QScrollArea*>("paneArea");
        QVERIFY(area);
        // The panes in view, by index; fails on a pane partly in view.
        auto inView = [&](QList<int>* shown) {
            shown->clear();
            const QRect column = area->viewport()->rect();
            for (int i = 0; i < window.panes().size(); ++i) {
                ChatPane* p = window.panes()[i];
                const QRect r(p->mapTo(area->viewport(), QPoint(0, 0)), p->size());
                const QString where = QString("pane %1 at x %2..%3, column %4 wide").arg(i + 1).arg(r.left()).arg(r.right()).arg(column.width());
                if (!r.intersects(column)) continue;
                QVERIFY2(column.adjusted(-2, 0, 2, 0).contains(QRect(r.left(), 0, r.width(), 1)), qPrintable(where));
                *shown << i;
            }
            QVERIFY(!shown->isEmpty());
        };
        settle();
        QList<int> wide;
        inView(&wide);
        if (QTest::currentTestFailed()) return;  // inView's QVERIFY left only the lambda
        QCOMPARE(wide.back(), 2);  // the pane just added
        QVERIFY2(wide.size() >= 2, "1920 px hold at least two panes");
        // Narrower: the pane with the keyboard in it stays in view (typing must not go where no one sees)...
        window.resize(1024, 700);
        settle();
        QList<int> focused;
        inView(&focused);
        if (QTest::currentTestFailed()) return;  // inView's QVERIFY left only the lambda
        QCOMPARE(focused, QList<int>{2});
        // ... and with the keyboard elsewhere, the pane at the left edge does.
        window.findChild<QTableView*>("requestTable")->setFocus();
        window.resize(1920, 1080);
        settle();
        inView(&wide);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(wide, (QList<int>{1, 2}));
        window.resize(1024, 700);
        settle();
        QList<int> narrow;
        inView(&narrow);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(narrow, QList<int>{wide.front()});
        area->horizontalScrollBar()->triggerAction(QAbstractSlider::SliderSingleStepAdd);
        QList<int> next;
        inView(&next);
        if (QTest::currentTestFailed()) return;  // inView's QVERIFY left only the lambda
        QCOMPARE(next, QList<int>{wide.front() + 1});
        // By keyboard: from the message box of the pane in view, Backtab until the focus reaches the pane before
        // it, which comes into view whole.
        ChatPane* shown = window.panes()[next.front()];
        ChatPane* before = window.panes()[next.front() - 1];
        shown->findChild<QPlainTextEdit*>("messageInput")->setFocus();
        for (int i = 0; i < 12 && !before->isAncestorOf(QApplication::focusWidget()); ++i)
            QTest::keyClick(QApplication::focusWidget(), Qt::Key_Backtab, Qt::ShiftModifier);
        QVERIFY(before->isAncestorOf(QApplication::focusWidget()));
        QList<int> tabbed;
        inView(&tabbed);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(tabbed, QList<int>{next.front() - 1});
        // Closing a pane left of the view keeps the pane in view in view: a fourth pane (scrolled to), Backtab to
        // the third, close the first.
        ChatPane* fourth = window.addPane();
        settle();
        fourth->findChild<QPlainTextEdit*>("messageInput")->setFocus();
        ChatPane* third = window.panes()[2];
        for (int i = 0; i < 12 && !third->isAncestorOf(QApplication::focusWidget()); ++i)
            QTest::keyClick(QApplication::focusWidget(), Qt::Key_Backtab, Qt::ShiftModifier);
        QVERIFY(third->isAncestorOf(QApplication::focusWidget()));
        window.closePane(window.panes()[0]);
        settle();
        QList<int> afterClose;
        inView(&afterClose);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(window.panes()[afterClose.front()], third);
        // Ctrl+W on the pane in view: the next pane takes the keyboard and comes into view with it.
        third->focusInput();
        ChatPane* after = window.panes()[window.panes().indexOf(third) + 1];
        QTest::keyClick(QApplication::focusWidget(), Qt::Key_W, Qt::ControlModifier);
        settle();
        QVERIFY(after->isAncestorOf(QApplication::focusWidget()));
        QList<int> afterCtrlW;
        inView(&afterCtrlW);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(window.panes()[afterCtrlW.front()], after);
        // A request picked in the table brings the pane that sent it into view, as the block map shows its blocks.
        ChatPane* sender = window.panes()[0];
        window.controller()->session()->addRequest("req-from-first", sender->title(), Qt::red);
        window.selectRequest("req-from-first");
        settle();
        QList<int> selected;
        inView(&selected);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(window.panes()[selected.front()], sender);
    }

    // Script mode replays a session at a size and by keys: resize, Ctrl+N twice, Ctrl+W, Tab.
    void scriptResizeAndKeys() {
        MainWindow window;
        window.show();
        window.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&window));
        ScriptRunner runner(&window);
        QString error;
        const QByteArray script = R"({"actions": [
            {"action": "resize", "width": 1024, "height": 700},
            {"action": "key", "keys": "Ctrl+N"},
            {"action": "key", "keys": "Ctrl+N"},
            {"action": "key", "keys": "Ctrl+W"},
            {"action": "key", "keys": "h"},
            {"action": "key", "keys": "Tab"}]})";
        QVERIFY2(runner.loadJson(QJsonDocument::fromJson(script).object(), &error), qPrintable(error));
        QSignalSpy finished(&runner, &ScriptRunner::finished);
        runner.start();
        QVERIFY(!finished.isEmpty() || finished.wait(10000));  // actions without waits finish within start()
        QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
        QCOMPARE(window.size(), QSize(1024, 700));
        QCOMPARE(int(window.panes().size()), 1);
        ChatPane* pane = window.panes().front();
        QCOMPARE(pane->inputText(), QString("h"));
        QCOMPARE(QApplication::focusWidget(), pane->findChild<QPushButton*>("sendButton"));
    }
};

QTEST_MAIN(TestKeyboard)
#include "test_keyboard.moc"
