// The real main window at the sizes people use (1024x700 up to 2560x1440) with 0, 1, 3 and 6 chat panes
// (issue 17): the window keeps the size it was given (its content never forces it wider), no two visible
// sibling widgets overlap, none lies outside its parent (unless it scrolls there) and none is squeezed
// below its minimum size hint; with the chart tab shown, and with the benchmark tab. ctest runs it at a
// scale factor of 1 and of 2. Set KVSCOPE_TEST_SCREENSHOTS=DIR to keep a PNG of every case.
#include "block_map_widget.h"
#include "chat_pane.h"
#include "elided_label.h"
#include "engine_controller.h"
#include "main_window.h"
#include "theme.h"

#include <QAbstractScrollArea>
#include <QDir>
#include <QLayout>
#include <QSignalSpy>
#include <QSplitter>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTextDocument>
#include <QTextDocumentFragment>
#include <QtTest>

using namespace kvscope;
using namespace kvscope::ui;

namespace {

QString nameOf(const QWidget* w) {
    QString path;
    for (const QWidget* p = w; p; p = p->parentWidget()) {
        const QString n = p->objectName().isEmpty() ? QString(p->metaObject()->className()) : p->objectName();
        path = path.isEmpty() ? n : n + "/" + path;
    }
    return path;
}

// The smallest size a layout may give w (as qSmartMinSize): what it asked for with setMinimumSize,
// else its hint, never above its maximum; a policy of Ignored asks for nothing.
QSize effectiveMinimum(const QWidget* w) {
    const QSize hint = w->minimumSizeHint();
    const QSizePolicy policy = w->sizePolicy();
    int width = w->minimumWidth() > 0 ? w->minimumWidth() : hint.width();
    int height = w->minimumHeight() > 0 ? w->minimumHeight() : hint.height();
    if (policy.horizontalPolicy() == QSizePolicy::Ignored) width = w->minimumWidth();
    if (policy.verticalPolicy() == QSizePolicy::Ignored) height = w->minimumHeight();
    return QSize(std::max(0, width), std::max(0, height)).boundedTo(w->maximumSize());
}

bool inLayout(const QLayout* layout, const QWidget* w) {
    for (int i = 0; layout && i < layout->count(); ++i) {
        QLayoutItem* item = layout->itemAt(i);
        if (item->widget() == w || inLayout(item->layout(), w)) return true;
    }
    return false;
}

bool scrolls(const QWidget* w);

// Sized by a layout, a splitter or a scroll area, that is by the window's own arrangement. Qt's own
// parts (qt_spinbox_lineedit, a dock's title buttons, a view's header) are sized by their widget.
bool laidOut(const QWidget* w) {
    if (w->objectName().startsWith("qt_")) return false;
    const QWidget* parent = w->parentWidget();
    return qobject_cast<const QSplitter*>(parent) || scrolls(w) || inLayout(parent->layout(), w);
}

bool scrolls(const QWidget* w) {
    // The content of a scroll area's viewport may be larger than the viewport: that is what scrolling is.
    const QWidget* parent = w->parentWidget();
    auto* area = parent ? qobject_cast<const QAbstractScrollArea*>(parent->parentWidget()) : nullptr;
    return area && area->viewport() == parent;
}

void checkTree(const QWidget* w, QStringList* problems) {
    QList<const QWidget*> visible;
    for (const QObject* o : w->children()) {
        auto* c = qobject_cast<const QWidget*>(o);
        if (c && c->isVisible() && !c->isWindow()) visible << c;
    }
    for (int i = 0; i < visible.size(); ++i) {
        const QWidget* c = visible[i];
        const QSize min = effectiveMinimum(c);
        if (laidOut(c) && (c->width() < min.width() || c->height() < min.height()))
            *problems << QString("%1 is %2x%3, below its minimum %4x%5")
                             .arg(nameOf(c)).arg(c->width()).arg(c->height()).arg(min.width()).arg(min.height());
        if (!scrolls(c) && !w->rect().contains(c->geometry()))
            *problems << QString("%1 (%2,%3 %4x%5) is clipped by its parent (%6x%7)")
                             .arg(nameOf(c)).arg(c->x()).arg(c->y()).arg(c->width()).arg(c->height())
                             .arg(w->width()).arg(w->height());
        for (int j = i + 1; j < visible.size(); ++j)
            if (c->geometry().intersects(visible[j]->geometry()))
                *problems << QString("%1 overlaps %2").arg(nameOf(c), nameOf(visible[j]));
        checkTree(c, problems);
    }
}

}  // namespace

class TestMainWindowLayout : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);  // no saved geometry or theme of a real session
        Theme::apply(true);
    }

    void layoutFits_data() {
        QTest::addColumn<int>("panes");
        QTest::addColumn<QSize>("size");
        QTest::addColumn<QString>("tab");  // the right side's tab shown
        for (const QSize size : {QSize(1024, 700), QSize(1600, 1000), QSize(2560, 1440)}) {
            for (int panes : {0, 1, 3, 6})
                QTest::addRow("%d panes at %dx%d", panes, size.width(), size.height()) << panes << size << "Charts";
            QTest::addRow("benchmark tab at %dx%d", size.width(), size.height()) << 1 << size << "Benchmark";
        }
    }
    void layoutFits() {
        QFETCH(int, panes);
        QFETCH(QSize, size);
        QFETCH(QString, tab);
        MainWindow window;
        QSignalSpy ready(&window, &MainWindow::modelReady);
        EngineConfig config = EngineController::defaultConfig();
        config.kv_cache_memory = 2ll << 20;
        window.loadModel("dummy:tiny", config);
        QVERIFY(ready.wait(60000));
        window.resize(size);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        for (int i = 0; i < panes; ++i) window.addPane();
        // One pane more and one closed again: neither may leave the window wider than it was.
        window.closePane(window.addPane());
        QTRY_COMPARE(int(window.panes().size()), panes);
        auto* tabs = window.findChild<QTabWidget*>();
        QVERIFY(tabs);
        for (int i = 0; i < tabs->count(); ++i)
            if (tabs->tabText(i) == tab) tabs->setCurrentIndex(i);
        QCOMPARE(tabs->tabText(tabs->currentIndex()), tab);
        QApplication::processEvents();
        QCOMPARE(window.size(), size);
        // Run by ctest once more with QT_SCALE_FACTOR=2 (test_main_window_layout_scale2): check it took.
        const double scale = qEnvironmentVariableIsSet("QT_SCALE_FACTOR") ? qEnvironmentVariable("QT_SCALE_FACTOR").toDouble() : 1.0;
        QCOMPARE(window.devicePixelRatio(), scale);

        if (const QString dir = qEnvironmentVariable("KVSCOPE_TEST_SCREENSHOTS"); !dir.isEmpty()) {
            QDir().mkpath(dir);
            window.grab().save(QDir(dir).filePath(QString("layout_%1x%2_%3panes_%4_scale%5.png")
                                                      .arg(size.width()).arg(size.height()).arg(panes).arg(tab).arg(scale)));
        }
        QStringList problems;
        checkTree(&window, &problems);
        QVERIFY2(problems.isEmpty(), qPrintable("\n" + problems.join("\n")));

        // The request table and the block map keep a usable size whatever the panes take.
        auto* table = window.findChild<QWidget*>("requestTable");
        QVERIFY(table);
        QVERIFY2(table->width() >= 300 && table->height() >= 100, qPrintable(nameOf(table)));
        // A whole pane fits the pane column: more panes scroll sideways, but one is never cut (at 1024x700
        // the header's close button and the stats line were, by about 25 px).
        auto* paneArea = window.findChild<QAbstractScrollArea*>("paneArea");
        QVERIFY(paneArea);
        for (ChatPane* pane : window.panes()) {
            QVERIFY(pane->isVisible());
            QVERIFY2(pane->width() <= paneArea->viewport()->width(),
                     qPrintable(QString("a pane is %1 px wide, its column shows %2").arg(pane->width()).arg(paneArea->viewport()->width())));
        }
        // The block map's cells get a usable height, not a strip under the legend (50 px at 1024x700 once).
        const QRect map = window.blockMap()->mapArea();
        qInfo("block map %dx%d, its cells %dx%d", window.blockMap()->width(), window.blockMap()->height(), map.width(), map.height());
        QVERIFY2(map.height() >= 120, qPrintable(QString("the block map's cells are %1 px tall").arg(map.height())));
    }

    // A pane's figures line (ElidedLabel::setParts) drops whole figures where the pane is narrow, with "…"
    // after the last shown: cut at the edge, "16 cached" read "16 c".
    void figuresDropWhole() {
        ElidedLabel label(Qt::ElideRight);
        const QString separator = QString::fromUtf8(" \u00b7 ");
        const QStringList parts = {"TTFT <b>15.7 ms</b>", "<b>683.5</b> tok/s", "152 tok", "<b>14</b> blocks",
                                   "2 preempted", "16 cached"};
        label.setParts(parts, separator);
        label.show();  // resize events reach a shown widget at once
        auto plain = [](const QString& html) { return QTextDocumentFragment::fromHtml(html).toPlainText(); };
        auto width = [&label](const QString& html) {
            QTextDocument d;
            d.setDefaultFont(label.font());
            d.setDocumentMargin(0);
            d.setHtml(html);
            return d.idealWidth();
        };
        label.resize(int(width(parts.join(separator))) + 10, 20);
        QCOMPARE(label.text(), parts.join(separator));
        // Room for the first three figures, two, one (each with " · …" after it), a few px to spare.
        for (const int kept : {3, 2, 1}) {
            const int w = int(width(QStringList(parts.mid(0, kept)).join(separator) + separator + QString::fromUtf8("\u2026"))) + 6;
            label.resize(w, 20);
            const QString shown = label.text();
            QVERIFY2(shown.endsWith(separator + QString::fromUtf8("\u2026")), qPrintable(plain(shown)));
            QVERIFY2(width(shown) <= w, qPrintable(QString("%1 px of text in %2 px").arg(width(shown)).arg(w)));
            QCOMPARE(shown, QStringList(parts.mid(0, kept)).join(separator) + separator + QString::fromUtf8("\u2026"));
        }
        label.setFullText("plain again");  // back to plain text, elided by character
        QCOMPARE(label.textFormat(), Qt::PlainText);
        QCOMPARE(label.text(), QString("plain again"));
    }
};

QTEST_MAIN(TestMainWindowLayout)
#include "test_main_window_layout.moc"
