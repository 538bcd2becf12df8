#include "main_window.h"

#include "bench_results_model.h"
#include "benchmark_panel.h"
#include "block_map_widget.h"
#include "charts_panel.h"
#include "chat_pane.h"
#include "connect_dialog.h"
#include "elided_label.h"
#include "engine_controller.h"
#include "engine_status.h"
#include "hint_table_view.h"
#include "metrics_help_dialog.h"
#include "model_picker_dialog.h"
#include "remote_server_view.h"
#include "request_table_model.h"
#include "session_exporter.h"
#include "stall_monitor.h"
#include "theme.h"
#include "tuning_panel.h"

#include "json_bridge.h"
#include "remote/http_client.h"
#include "remote/server_metrics.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QHeaderView>
#include <QIcon>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QResizeEvent>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>

namespace kvscope::ui {

namespace {
QColor paneColor(int index) {
    static const QColor colors[] = {QColor(0x4e, 0x9a, 0xf0), QColor(0xf0, 0x8a, 0x3c), QColor(0x4c, 0xc2, 0x7a),
                                    QColor(0xe0, 0x5a, 0x9a), QColor(0xa9, 0x7b, 0xe8), QColor(0xd8, 0xc0, 0x40),
                                    QColor(0xe0, 0x5a, 0x5a), QColor(0x40, 0xc8, 0xe0)};
    return colors[index % 8];
}

// The pane nearest to the pane column's scroll position `value` (panes one scroll bar step apart).
int paneAt(const QScrollBar* bar, int value) {
    const int step = std::max(1, bar->singleStep());
    return (value + step / 2) / step;
}

constexpr int kChartsTab = 0;
constexpr int kBenchmarkTab = 1;

// A page that scrolls instead of squeezing its content below its minimum size in a small window. The field
// that takes the keyboard focus is scrolled into view however it got it: QScrollArea does so only for Tab from
// inside it, and Tab into the benchmark form from outside left its first field 5 px in view.
QScrollArea* scrolling(QWidget* content, Qt::ScrollBarPolicy horizontal, QWidget* parent, bool followFocus = true) {
    auto* area = new QScrollArea(parent);
    area->setWidgetResizable(true);
    area->setFrameShape(QFrame::NoFrame);
    area->setHorizontalScrollBarPolicy(horizontal);
    area->setWidget(content);
    if (followFocus)
        QObject::connect(qApp, &QApplication::focusChanged, area, [area](QWidget*, QWidget* now) {
            if (now && area->widget() && area->widget()->isAncestorOf(now)) area->ensureWidgetVisible(now, 8, 8);
        });
    return area;
}

QString bytesText(qint64 b) {
    if (b >= (qint64(1) << 30)) return QString("%1 GiB").arg(double(b) / double(1 << 30), 0, 'f', 2);
    if (b >= (1 << 20)) return QString("%1 MiB").arg(double(b) / double(1 << 20), 0, 'f', 1);
    return QString("%1 KiB").arg(double(b) / 1024.0, 0, 'f', 1);
}
}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), m_controller(new EngineController(this)), m_stall(new StallMonitor(this)) {
    setWindowTitle("kvscope");
    setWindowIcon(QIcon(":/icons/kvscope.svg"));
    setObjectName("MainWindow");
    m_loadConfig = EngineController::defaultConfig();
    buildLayout();
    buildActions();

    connect(m_controller, &EngineController::modelLoadStarted, this, [this](const QString& spec) {
        m_loadProgress->setRange(0, 0);  // busy: the load runs on the engine thread
        m_loadProgress->setVisible(true);
        m_modelLabel->setText(tr("Loading %1 ...").arg(spec));
        m_stall->setActive(true);  // a load must not stall the window either
    });
    connect(m_controller, &EngineController::modelLoaded, this, [this](const ModelSummary& s) {
        m_loadProgress->setVisible(false);
        m_remoteView->setVisible(false);  // back on the local engine
        m_blockMap->setVisible(true);
        m_tuning->setEnabled(true);
        m_modelLabel->setText(QString("<b>%1</b>").arg(s.name.toHtmlEscaped()));
        showModelInfo(s);
        m_lastModel = s.spec;  // saved by closeEvent
        setWindowTitle(s.simulationLabel.isEmpty() ? QString("kvscope - %1").arg(s.name)
                                                   : QString("kvscope - %1 (%2)").arg(s.name, s.simulationLabel));
        m_charts->setSimulationLabel(s.simulationLabel);
        m_charts->setStepChartsNote({});
        emit modelReady();
    });
    connect(m_controller, &EngineController::modelSummaryChanged, this, &MainWindow::showModelInfo);
    connect(m_controller, &EngineController::modelLoadFailed, this, [this](const QString& spec, const QString& message) {
        m_loadProgress->setVisible(false);
        // The model loaded before is still the one running: the toolbar keeps its name.
        const bool loaded = m_controller->isModelLoaded();
        m_modelLabel->setText(loaded ? QString("<b>%1</b>").arg(m_controller->modelSummary().name.toHtmlEscaped())
                                     : tr("no model"));
        // The loader's messages start with the path they could not use: said once, not twice.
        QString error = message.startsWith(spec) ? tr("Could not load %1").arg(message)
                                                 : tr("Could not load %1: %2").arg(spec, message);
        if (loaded) error += tr(" (%1 is still loaded)").arg(m_controller->modelSummary().name);
        statusBar()->showMessage(error, 15000);
        if (isVisible() && QApplication::platformName() != "offscreen") QMessageBox::warning(this, tr("Load model"), error);
    });
    connect(m_controller, &EngineController::remoteConnected, this, [this](const RemoteTarget& t) {
        m_modelLabel->setText(tr("<b>%1</b> (remote)").arg(t.model.toHtmlEscaped()));
        m_modelInfo->setText(tr("<b>Remote engine</b><br>%1 at %2<br>model %3<br>served models: %4<br>The engine knobs above "
                                "belong to the local engine; a remote engine's are its own.")
                                 .arg(t.engine.toHtmlEscaped(), t.baseUrl.toHtmlEscaped(), t.model.toHtmlEscaped(),
                                      t.models.join(", ").toHtmlEscaped()));
        setWindowTitle(QString("kvscope - %1").arg(t.label()));
        m_tuning->setEnabled(false);
        m_charts->setSimulationLabel({});
        m_charts->setStepChartsNote(tr("Not reported by a remote engine:\nit publishes no per-step figures\n(its /metrics: the chart above)"));
        m_remoteView->setTarget(t);
        m_blockMap->setVisible(false);
        m_remoteView->setVisible(true);
        // The URL and the model for the next dialog (saved by closeEvent); never the key.
        m_remoteUrl = t.baseUrl;
        m_remoteModel = t.model;
        updateStatus();
        emit modelReady();
    });
    connect(m_controller, &EngineController::remoteConnectFailed, this, [this](const QString& message) {
        statusBar()->showMessage(tr("Could not connect: %1").arg(message), 15000);
        if (isVisible() && QApplication::platformName() != "offscreen")
            QMessageBox::warning(this, tr("Connect to an endpoint"), message);
    });
    connect(m_controller, &EngineController::serverSampled, this,
            [this] {
                m_remoteView->setSamples(m_controller->serverSamples());
                m_remoteView->setScrapeHealth(m_controller->scrapeHealth());
            });
    connect(m_controller, &EngineController::configChanged, m_tuning, &TuningPanel::setConfig);
    connect(m_tuning, &TuningPanel::configEdited, m_controller, &EngineController::reconfigure);
    connect(m_controller, &EngineController::reconfigureRefused, m_tuning, &TuningPanel::showRefusal);
    connect(m_controller, &EngineController::errorOccurred, this,
            [this](const QString& message) { statusBar()->showMessage(message, 10000); });
    connect(m_controller, &EngineController::snapshotUpdated, m_blockMap, &BlockMapWidget::setSnapshot);
    connect(m_controller, &EngineController::updateApplied, this, &MainWindow::updateStatus);
    m_blockMap->setColorProvider([this](const QString& id) { return m_controller->colorFor(id); });
    m_charts->setColorProvider([this](const QString& id) { return m_controller->colorFor(id); });
    connect(m_blockMap, &BlockMapWidget::blockClicked, this, [this](int, const QStringList& owners) {
        if (owners.isEmpty()) {
            m_blockMap->clearHighlight();
            m_requestTable->clearSelection();
        } else {
            selectRequest(owners.front());
        }
    });
    restoreSettings();
    // The stall monitor starts with the first model load (see modelLoadStarted).
}

MainWindow::~MainWindow() = default;

void MainWindow::buildLayout() {
    // The panes share a splitter inside a horizontally scrolling area: each keeps its minimum width and
    // a pane more adds a scroll bar, never width to the window.
    m_paneSplitter = new QSplitter(Qt::Horizontal);
    m_paneSplitter->setObjectName("paneSplitter");
    m_paneSplitter->setChildrenCollapsible(false);
    m_noPaneHint = new QLabel(tr("No chat pane is open.\nNew pane (Ctrl+N) opens one; Send to all (toolbar) opens one "
                                 "when none is open."));
    m_noPaneHint->setAlignment(Qt::AlignCenter);
    m_noPaneHint->setWordWrap(true);
    m_noPaneHint->setEnabled(false);
    m_paneSplitter->addWidget(m_noPaneHint);
    // The panes scroll into view whole (showWholePane), not field by field; the column itself is no Tab stop
    // (it showed no focus, and Tab into a pane scrolls it).
    m_paneArea = scrolling(m_paneSplitter, Qt::ScrollBarAsNeeded, this, false);
    m_paneArea->setObjectName("paneArea");
    m_paneArea->setFocusPolicy(Qt::NoFocus);
    m_paneArea->viewport()->installEventFilter(this);  // its width decides how many panes are in view
    // A dragged scroll bar comes to rest on a pane's edge, as its arrows and fitPanesToColumn's steps do.
    QScrollBar* paneBar = m_paneArea->horizontalScrollBar();
    connect(paneBar, &QScrollBar::sliderReleased, this,
            [paneBar] { paneBar->setValue(paneAt(paneBar, paneBar->value()) * paneBar->singleStep()); });
    connect(paneBar, &QScrollBar::valueChanged, this, [this, paneBar](int value) {
        if (m_paneRefits == 0) m_firstPaneInView = paneAt(paneBar, value);
    });

    m_requestModel = new RequestTableModel(m_controller->session(), this);
    m_requestTable = new HintTableView(this);
    m_requestTable->setObjectName("requestTable");
    m_requestTable->setEmptyHint(tr("No requests yet. Type a message in a pane and press Ctrl+Return, or run a benchmark: "
                                    "every request appears here with its state, blocks and timings."));
    m_requestTable->setModel(m_requestModel);
    m_requestTable->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_requestTable->setSelectionMode(QAbstractItemView::SingleSelection);
    // Tab leaves the table (the arrows move in it): with a benchmark's hundreds of rows, Tab walking it cell by
    // cell trapped the keyboard there.
    m_requestTable->setTabKeyNavigation(false);
    m_requestTable->setAlternatingRowColors(true);
    m_requestTable->verticalHeader()->hide();
    m_requestTable->verticalHeader()->setDefaultSectionSize(20);
    m_requestTable->horizontalHeader()->setStretchLastSection(true);
    m_requestTable->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    m_requestTable->setColumnWidth(0, 110);
    for (int c = 1; c < RequestTableModel::ColumnCount; ++c) m_requestTable->setColumnWidth(c, c == 2 ? 110 : 62);
    // Room for the id, origin and state columns and a few rows whatever the panes ask for.
    m_requestTable->setMinimumSize(300, 100);
    m_requestTable->setToolTip(tr("Every request of the session. Select one to trace its block table in the block map."));
    connect(m_requestTable->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& i) {
        if (i.isValid()) selectRequest(i.data(RequestTableModel::RequestIdRole).toString());
    });
    connect(m_requestModel, &QAbstractItemModel::rowsInserted, m_requestTable, [this] {
        if (!m_requestTable->selectionModel()->hasSelection()) m_requestTable->scrollToBottom();
    });

    auto* left = new QSplitter(Qt::Vertical, this);
    left->setObjectName("leftSplitter");
    left->setChildrenCollapsible(false);
    left->addWidget(m_paneArea);
    left->addWidget(m_requestTable);
    left->setStretchFactor(0, 5);
    left->setStretchFactor(1, 2);

    m_blockMap = new BlockMapWidget(this);
    m_charts = new ChartsPanel(m_controller->session(), this);
    m_benchmark = new BenchmarkPanel(m_controller, this);
    m_tabs = new QTabWidget(this);
    m_tabs->setDocumentMode(true);
    m_tabs->addTab(scrolling(m_charts, Qt::ScrollBarAsNeeded, this), tr("Charts"));
    m_tabs->addTab(scrolling(m_benchmark, Qt::ScrollBarAsNeeded, this), tr("Benchmark"));
    auto* right = new QSplitter(Qt::Vertical, this);
    right->setObjectName("rightSplitter");
    right->setChildrenCollapsible(false);
    m_remoteView = new RemoteServerView(this);
    m_remoteView->setVisible(false);
    right->addWidget(m_blockMap);
    right->addWidget(m_remoteView);
    right->addWidget(m_tabs);
    right->setStretchFactor(0, 1);
    right->setStretchFactor(1, 1);
    right->setStretchFactor(2, 3);

    left->setSizes({620, 240});
    right->setSizes({230, 230, 640});  // the block map or (connected) the remote view, then the tabs
    auto* central = new QSplitter(Qt::Horizontal, this);
    central->setObjectName("centralSplitter");
    central->setChildrenCollapsible(false);
    central->addWidget(left);
    central->addWidget(right);
    central->setStretchFactor(0, 4);
    central->setStretchFactor(1, 5);
    central->setSizes({620, 760});
    setCentralWidget(central);

    m_tuning = new TuningPanel(this);
    m_modelInfo = new QLabel(tr("No model loaded"), this);
    m_modelInfo->setWordWrap(true);
    m_modelInfo->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* tuningBox = new QWidget(this);
    auto* tuningLayout = new QVBoxLayout(tuningBox);
    tuningLayout->addWidget(m_tuning);
    tuningLayout->addSpacing(8);
    tuningLayout->addWidget(m_modelInfo);
    tuningLayout->addStretch();
    auto* tuningDock = new QDockWidget(tr("Engine"), this);
    tuningDock->setObjectName("tuningDock");
    tuningDock->setWidget(scrolling(tuningBox, Qt::ScrollBarAlwaysOff, this));
    addDockWidget(Qt::RightDockWidgetArea, tuningDock);

    connect(m_controller, &EngineController::benchmarkProgressed, this, [this](int done, int total) {
        m_benchProgress->setVisible(done < total);
        m_benchProgress->setMaximum(total);
        m_benchProgress->setValue(done);
    });

    m_modelLabel = new QLabel(tr("no model"), this);
    m_modelLabel->setObjectName("modelName");
    // The whole line when there is room; a narrow window elides its end rather than growing for it.
    m_engineLabel = new ElidedLabel(Qt::ElideRight, this);
    m_engineLabel->setObjectName("engineStatus");
    m_engineLabel->setToolTip(tr("The engine as of its latest update: the same snapshot the block map and the panes show"));
    m_stallLabel = new QLabel(this);
    m_stallLabel->setToolTip(tr("Longest GUI event-loop stall since start (5 ms timer lateness)"));
    // As wide as its longest text from the start: a stall that adds a digit must not reflow the bar.
    m_stallLabel->setFixedWidth(m_stallLabel->fontMetrics().horizontalAdvance(tr("GUI stall max %1 ms").arg(9999.9, 0, 'f', 1)) + 8);
    m_loadProgress = new QProgressBar(this);
    m_loadProgress->setMaximumWidth(160);
    m_loadProgress->setVisible(false);
    m_benchProgress = new QProgressBar(this);
    m_benchProgress->setFormat(tr("benchmark %v/%m"));
    // As wide as its longest text: a narrow window squeezed it until the text broke onto two lines.
    m_benchProgress->setFixedWidth(m_benchProgress->fontMetrics().horizontalAdvance(
                                       tr("benchmark %v/%m").replace("%v", "100000").replace("%m", "100000")) + 24);
    m_benchProgress->setVisible(false);
    statusBar()->addWidget(m_engineLabel, 1);
    statusBar()->addPermanentWidget(m_benchProgress);
    statusBar()->addPermanentWidget(m_loadProgress);
    statusBar()->addPermanentWidget(m_stallLabel);
}

void MainWindow::buildActions() {
    auto* fileMenu = menuBar()->addMenu(tr("&File"));
    auto* viewMenu = menuBar()->addMenu(tr("&View"));
    auto* helpMenu = menuBar()->addMenu(tr("&Help"));
    auto* toolbar = addToolBar(tr("Main"));
    toolbar->setObjectName("mainToolbar");
    toolbar->setMovable(false);
    toolbar->setToolButtonStyle(Qt::ToolButtonTextOnly);

    auto* load = new QAction(tr("Load model..."), this);
    load->setShortcut(QKeySequence::Open);
    load->setToolTip(tr("Open a GGUF file, a Hugging Face directory, a dummy preset, or a model found on this machine (Ctrl+O)"));
    connect(load, &QAction::triggered, this, &MainWindow::openModelPicker);
    auto* connectAction = new QAction(tr("Connect to an endpoint..."), this);
    connectAction->setObjectName("connectAction");
    connectAction->setIconText(tr("Connect..."));  // the toolbar's short name
    connectAction->setShortcut(QKeySequence("Ctrl+Shift+O"));
    connectAction->setToolTip(tr("Chat with, benchmark and watch a remote OpenAI-compatible engine (vLLM, SGLang, TGI, "
                                 "llama-server, kvscope serve) instead of the local one (Ctrl+Shift+O)"));
    connect(connectAction, &QAction::triggered, this, &MainWindow::openConnectDialog);
    auto* exportAction = new QAction(tr("Export session..."), this);
    exportAction->setShortcut(QKeySequence::Save);
    exportAction->setToolTip(tr("Write session.json (vLLM keys, config, timeline, requests), CSV, and every chart as PNG and PDF"));
    connect(exportAction, &QAction::triggered, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Export session to"));
        if (dir.isEmpty()) return;
        QString error;
        if (exportSession(dir, &error)) statusBar()->showMessage(tr("Session exported to %1").arg(dir), 8000);
        else QMessageBox::warning(this, tr("Export session"), error);
    });
    auto* quit = new QAction(tr("Quit"), this);
    quit->setShortcut(QKeySequence::Quit);
    connect(quit, &QAction::triggered, this, &QWidget::close);
    fileMenu->addAction(load);
    fileMenu->addAction(connectAction);
    fileMenu->addAction(exportAction);
    fileMenu->addSeparator();
    fileMenu->addAction(quit);

    auto* newPane = new QAction(tr("New pane"), this);
    newPane->setObjectName("newPaneAction");
    newPane->setShortcuts({QKeySequence::New, QKeySequence("Ctrl+T")});
    newPane->setToolTip(tr("Open a chat pane (Ctrl+N)"));
    connect(newPane, &QAction::triggered, this, [this] { addPane()->focusInput(); });
    auto* closePaneAction = new QAction(tr("Close pane"), this);
    closePaneAction->setObjectName("closePaneAction");
    // The platform's Close keys (Ctrl+F4 on some) and Ctrl+W, which every browser and editor closes a tab with.
    QList<QKeySequence> closeKeys = QKeySequence::keyBindings(QKeySequence::Close);
    if (!closeKeys.contains(QKeySequence("Ctrl+W"))) closeKeys << QKeySequence("Ctrl+W");
    closePaneAction->setShortcuts(closeKeys);
    closePaneAction->setToolTip(tr("Close the active chat pane, aborting its request (Ctrl+W)"));
    connect(closePaneAction, &QAction::triggered, this, [this] {
        if (ChatPane* p = activePane()) closePane(p);
        if (ChatPane* p = activePane()) p->focusInput();
    });
    auto* send = new QAction(tr("Send"), this);
    send->setToolTip(tr("Send the message of the active pane, or the shared prompt when it has the focus (Ctrl+Return)"));
    send->setShortcut(QKeySequence("Ctrl+Return"));
    connect(send, &QAction::triggered, this, [this] {
        if (m_broadcast->hasFocus()) sendToAll(m_broadcast->text());
        else if (ChatPane* p = activePane()) p->send();
    });
    addAction(send);
    auto* stop = new QAction(tr("Stop"), this);
    stop->setShortcut(QKeySequence(Qt::Key_Escape));
    stop->setToolTip(tr("Stop the active pane's request (Esc)"));
    connect(stop, &QAction::triggered, this, [this] {
        if (ChatPane* p = activePane()) p->stop();
    });
    addAction(stop);
    auto* stopAllAction = new QAction(tr("Stop all"), this);
    stopAllAction->setShortcut(QKeySequence("Shift+Esc"));
    stopAllAction->setToolTip(tr("Abort every pane's request (Shift+Esc)"));
    connect(stopAllAction, &QAction::triggered, this, &MainWindow::stopAll);

    m_broadcast = new QLineEdit(this);
    m_broadcast->setPlaceholderText(tr("Send the same prompt to every pane at once"));
    m_broadcast->setMinimumWidth(260);
    m_broadcast->setMaximumWidth(420);
    connect(m_broadcast, &QLineEdit::returnPressed, this, [this] { sendToAll(m_broadcast->text()); });
    auto* sendAll = new QAction(tr("Send to all"), this);
    sendAll->setToolTip(tr("Send the prompt to every pane at once: watch them share the batch and the KV pool"));
    connect(sendAll, &QAction::triggered, this, [this] { sendToAll(m_broadcast->text()); });

    auto* benchmark = new QAction(tr("Benchmark"), this);
    benchmark->setShortcut(QKeySequence("Ctrl+B"));
    benchmark->setToolTip(tr("Switch between the charts and the benchmark panel (Ctrl+B)"));
    connect(benchmark, &QAction::triggered, this, [this] {
        m_tabs->setCurrentIndex(m_tabs->currentIndex() == kBenchmarkTab ? kChartsTab : kBenchmarkTab);
    });

    auto* metrics = new QAction(tr("Metric definitions"), this);
    metrics->setShortcut(QKeySequence::HelpContents);
    metrics->setToolTip(tr("TTFT, TPOT, ITL, E2EL, throughput, KV usage and waste: how each is computed (F1)"));
    connect(metrics, &QAction::triggered, this, &MainWindow::showMetricDefinitions);
    auto* dark = new QAction(tr("Dark theme"), this);
    dark->setCheckable(true);
    dark->setChecked(m_darkTheme);
    dark->setObjectName("darkThemeAction");
    connect(dark, &QAction::toggled, this, &MainWindow::setDarkTheme);

    toolbar->addAction(load);
    toolbar->addAction(connectAction);
    toolbar->addWidget(m_modelLabel);
    toolbar->addSeparator();
    toolbar->addAction(newPane);
    toolbar->addWidget(m_broadcast);
    toolbar->addAction(sendAll);
    toolbar->addAction(stopAllAction);
    toolbar->addSeparator();
    toolbar->addAction(benchmark);
    toolbar->addAction(exportAction);
    toolbar->addAction(metrics);

    viewMenu->addAction(newPane);
    viewMenu->addAction(closePaneAction);
    viewMenu->addAction(stopAllAction);
    viewMenu->addAction(benchmark);
    viewMenu->addSeparator();
    for (QDockWidget* dock : findChildren<QDockWidget*>()) viewMenu->addAction(dock->toggleViewAction());
    viewMenu->addAction(dark);
    helpMenu->addAction(metrics);
    auto* keys = new QAction(tr("Keyboard shortcuts"), this);
    keys->setObjectName("shortcutsAction");
    connect(keys, &QAction::triggered, this, [this] {
        QMessageBox::information(this, tr("Keyboard shortcuts"), shortcutSummary());
    });
    helpMenu->addAction(keys);
    auto* about = new QAction(tr("About kvscope"), this);
    connect(about, &QAction::triggered, this, [this] {
        QMessageBox::about(this, tr("About kvscope"),
                           tr("<b>kvscope %1</b><br>A workbench for paged-KV, continuous-batching LLM inference: the "
                              "ideas of vLLM, shown live.").arg(QApplication::applicationVersion()));
    });
    helpMenu->addAction(about);
}

QString MainWindow::shortcutSummary() const {
    // Read from the actions themselves, so the list cannot drift from what the keys do.
    QString rows;
    for (const QAction* a : findChildren<QAction*>()) {
        if (a->shortcuts().isEmpty()) continue;
        QStringList keys;
        for (const QKeySequence& k : a->shortcuts()) keys << k.toString(QKeySequence::NativeText).toHtmlEscaped();
        rows += QString("<tr><td><b>%1</b></td><td>%2</td></tr>").arg(keys.join(", "), a->text().remove('&').toHtmlEscaped());
    }
    rows += tr("<tr><td><b>Tab, Shift+Tab</b></td><td>Next, previous control (also out of text boxes)</td></tr>");
    return QString("<table cellspacing=6>%1</table>").arg(rows);
}

void MainWindow::restoreSettings() {
    QSettings s;
    const QRect screen = (this->screen() ? this->screen() : QApplication::primaryScreen())->availableGeometry();
    if (!restoreGeometry(s.value("geometry").toByteArray())) resize(1600, 1000);
    // A window saved on a larger screen (or grown by an older version) still fits this one.
    resize(size().boundedTo(screen.size()));
    restoreState(s.value("windowState").toByteArray());
    m_darkTheme = s.value("darkTheme", true).toBool();  // the saved choice (--light does not change it)
    m_lastModel = s.value("lastModel").toString();
    m_remoteUrl = s.value("remote/url").toString();
    m_remoteModel = s.value("remote/model").toString();
    // The menu's check shows the theme main() applied (the saved one, or --light's), not the setting.
    if (auto* a = findChild<QAction*>("darkThemeAction")) {
        const QSignalBlocker quiet(a);
        a->setChecked(Theme::isDark());
    }
}

void MainWindow::closeEvent(QCloseEvent* event) {
    QSettings s;
    s.setValue("geometry", saveGeometry());
    s.setValue("windowState", saveState());
    s.setValue("darkTheme", m_darkTheme);
    if (!m_lastModel.isEmpty()) s.setValue("lastModel", m_lastModel);
    if (!m_remoteUrl.isEmpty()) {
        s.setValue("remote/url", m_remoteUrl);
        s.setValue("remote/model", m_remoteModel);
    }
    event->accept();
}

void MainWindow::loadModel(const QString& spec, const EngineConfig& config) {
    m_loadConfig = config;
    m_controller->loadModel(spec, config);
}

void MainWindow::loadModel(const QString& spec) { loadModel(spec, m_loadConfig); }

void MainWindow::openModelPicker() {
    ModelPickerDialog dialog(m_controller->modelSummary().spec.isEmpty() ? QString("dummy:tiny") : m_controller->modelSummary().spec,
                             m_loadConfig, this);
    if (dialog.exec() == QDialog::Accepted && !dialog.spec().isEmpty()) loadModel(dialog.spec(), dialog.config());
}

void MainWindow::openConnectDialog() {
    ConnectDialog dialog(m_remoteUrl, m_remoteModel, this);
    if (dialog.exec() == QDialog::Accepted) connectToEndpoint(dialog.connection());
}

void MainWindow::connectToEndpoint(const RemoteConnection& connection) {
    m_modelLabel->setText(tr("Connecting to %1 ...").arg(QString::fromStdString(redacted_url(connection.baseUrl.toStdString()))));
    m_controller->connectToEndpoint(connection);
}

ChatPane* MainWindow::addPane() {
    const int number = ++m_paneCounter;
    auto* pane = new ChatPane(m_controller, number, paneColor(number - 1), m_paneSplitter);
    m_paneSplitter->addWidget(pane);
    m_panes.push_back(pane);
    connect(pane, &ChatPane::closeRequested, this, &MainWindow::closePane);
    connect(pane, &ChatPane::activated, this, [this](ChatPane* p) { m_activePane = p; });
    connect(pane, &ChatPane::requestSelected, this, &MainWindow::selectRequest);
    // Tab into a pane out of view brings the whole pane in (the scroll area alone brings the focused field and
    // 50 px around it: half a pane).
    connect(pane, &ChatPane::tabbedInto, this, &MainWindow::showWholePane);
    m_activePane = pane;
    m_noPaneHint->setVisible(false);
    // The column is never narrower than one whole pane: more panes scroll sideways, one is never cut
    // (at 1024x700 the header's last button was).
    // (Room for a vertical scroll bar too: with one showing, a pane of the column's minimum width was cut.)
    m_paneArea->setMinimumWidth(std::max(m_paneArea->minimumWidth(),
                                         pane->minimumSizeHint().width() + m_paneArea->verticalScrollBar()->sizeHint().width()));
    // Scrolled into view once the splitter has laid it out (now it has no place yet): at 1024x700 a second pane
    // opened off screen with the keyboard focus in it, and typing went where no one could see.
    if (m_scrollToPane) m_scrollToPane->removeEventFilter(this);
    m_scrollToPane = pane;
    pane->installEventFilter(this);
    fitPanesToColumn();
    return pane;
}

// The panes that fit the column at their minimum width share its width, the others lie beside them, one
// scroll bar step (a pane) apart: the column shows whole panes. At 1024x700, three panes showed the end of
// one and the start of the next, both cut; at 1920 the third was cut in half.
void MainWindow::fitPanesToColumn() {
    if (m_panes.isEmpty()) {
        m_paneSplitter->setMinimumWidth(0);
        return;
    }
    int minWidth = 0;
    for (ChatPane* p : m_panes) minWidth = std::max(minWidth, p->minimumSizeHint().width());
    const int handle = m_paneSplitter->handleWidth(), column = m_paneArea->viewport()->width();
    const int count = static_cast<int>(m_panes.size());
    const int inView = std::clamp((column + handle) / (minWidth + handle), 1, count);
    const int width = std::max(minWidth, (column - (inView - 1) * handle) / inView);
    QScrollBar* bar = m_paneArea->horizontalScrollBar();
    m_firstPaneInView = std::clamp(m_firstPaneInView, 0, count - inView);  // no empty space at the right end
    m_paneSplitter->setMinimumWidth(count * width + (count - 1) * handle);
    QList<int> sizes;
    for (int i = 0; i < m_paneSplitter->count(); ++i) sizes << (m_paneSplitter->widget(i)->isHidden() ? 0 : width);
    m_paneSplitter->setSizes(sizes);
    bar->setSingleStep(width + handle);
    // The pane at the left edge stays there once the scroll area has its new range (posted layout requests,
    // ahead of this call; the value they clamp on the way is not the user's). A pane just added is scrolled
    // to by the event filter instead.
    if (m_scrollToPane) return;
    ++m_paneRefits;
    QTimer::singleShot(0, this, [this, bar] {
        if (--m_paneRefits != 0) return;
        bar->setValue(m_firstPaneInView * bar->singleStep());
        // Unless the keyboard is in a pane now out of view: typing went where no one could see.
        for (QWidget* w = QApplication::focusWidget(); w; w = w->parentWidget())
            if (auto* pane = qobject_cast<ChatPane*>(w); pane && m_panes.contains(pane)) {
                showWholePane(pane);
                break;
            }
    });
}

void MainWindow::showWholePane(ChatPane* pane) {
    // Sideways only: a pane taller than a short column keeps the user's vertical place.
    const int left = pane->mapTo(m_paneArea->viewport(), QPoint(0, 0)).x(), column = m_paneArea->viewport()->width();
    QScrollBar* bar = m_paneArea->horizontalScrollBar();
    if (left < 0 || pane->width() > column) bar->setValue(bar->value() + left);
    else if (left + pane->width() > column) bar->setValue(bar->value() + left + pane->width() - column);
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
    // Widths only: a height change (the request table's splitter, a scroll bar) keeps the user's pane widths.
    if (watched == m_paneArea->viewport() && event->type() == QEvent::Resize &&
        static_cast<QResizeEvent*>(event)->size().width() != static_cast<QResizeEvent*>(event)->oldSize().width())
        fitPanesToColumn();
    // The added pane, at its first full-width place (a squeezed interim geometry is not yet its place):
    // scrolled to once, then left where the user scrolls.
    if (m_scrollToPane && watched == m_scrollToPane.data() && (event->type() == QEvent::Resize || event->type() == QEvent::Move) &&
        m_scrollToPane->width() >= m_scrollToPane->minimumSizeHint().width()) {
        showWholePane(m_scrollToPane);
        const QScrollBar* bar = m_paneArea->horizontalScrollBar();
        m_firstPaneInView = paneAt(bar, bar->value());  // what the refits pending keep
        m_scrollToPane->removeEventFilter(this);
        m_scrollToPane = nullptr;
    }
    return QMainWindow::eventFilter(watched, event);
}

void MainWindow::closePane(ChatPane* pane) {
    if (pane == m_scrollToPane) {
        pane->removeEventFilter(this);
        m_scrollToPane = nullptr;
    }
    pane->stop();
    const int index = static_cast<int>(m_panes.indexOf(pane));
    if (index < m_firstPaneInView) --m_firstPaneInView;  // the panes in view stay in view
    const bool hadFocus = pane->isAncestorOf(QApplication::focusWidget());
    m_panes.removeAll(pane);
    // The next pane takes over, or the one before the last (a browser's tabs close so); with the keyboard in
    // the closed pane, its message box takes the focus and comes into view (the fitting below keeps it there).
    if (m_activePane == pane) m_activePane = m_panes.isEmpty() ? nullptr : m_panes[std::min(index, int(m_panes.size()) - 1)];
    if (hadFocus && m_activePane) m_activePane->focusInput();
    pane->hide();  // leaves the splitter's layout now; deleted once its queued signals are through
    pane->deleteLater();
    m_noPaneHint->setVisible(m_panes.isEmpty());
    fitPanesToColumn();
}

ChatPane* MainWindow::activePane() const { return m_activePane ? m_activePane : (m_panes.isEmpty() ? nullptr : m_panes.front()); }

void MainWindow::sendToAll(const QString& text) {
    const QString t = text.trimmed();
    if (t.isEmpty()) return;
    if (m_panes.isEmpty()) addPane();
    for (ChatPane* p : m_panes) p->sendText(t);
}

void MainWindow::stopAll() {
    for (ChatPane* p : m_panes) p->stop();
    if (m_controller->isBenchmarkRunning()) m_controller->cancelBenchmark();
}

void MainWindow::selectRequest(const QString& requestId) {
    const RequestRecord* r = m_controller->session()->request(requestId);
    if (!r) return;
    m_blockMap->highlightRequest(requestId, r->blockTable);
    const int row = m_controller->session()->indexOf(requestId);
    if (row >= 0 && row < m_requestModel->rowCount() && m_requestTable->currentIndex().row() != row)
        m_requestTable->setCurrentIndex(m_requestModel->index(row, 0));
    // The pane that sent it comes into view too (at 1024 px the column shows one pane): a request picked
    // in the table or the block map showed its blocks beside another pane's conversation.
    for (ChatPane* pane : std::as_const(m_panes))
        if (pane->title() == r->origin) {
            showWholePane(pane);
            break;
        }
}

void MainWindow::showModelInfo(const ModelSummary& s) {
    m_modelInfo->setText(tr("<b>%1</b><br>%2, %3 layers, vocab %4<br>%5 M params, weights %6<br>KV %7 / token "
                            "(%11), chat template %8<br>tokenizer %9, loaded in %10 s")
                             .arg(s.spec.toHtmlEscaped(), s.architecture)
                             .arg(s.numLayers)
                             .arg(s.vocabSize)
                             .arg(double(s.numParams) / 1e6, 0, 'f', 2)
                             .arg(bytesText(s.weightBytes))
                             .arg(bytesText(s.kvBytesPerToken),
                                  s.chatTemplateUnrecognized
                                      ? tr("<span style='color:#e0a040'>plain: the model's template is not one "
                                           "kvscope knows, so chats are sent as a plain transcript</span>")
                                      : s.chatTemplate,
                                  s.tokenizer)
                             .arg(s.loadSeconds, 0, 'f', 2)
                             .arg(s.kvCacheDtype));
}

void MainWindow::updateStatus() {
    m_engineLabel->setParts(statusParts(m_controller->status()), kStatusSeparator, Qt::PlainText);
    m_stall->setActive(!m_controller->isIdle() || m_controller->isLoading());
    m_stallLabel->setText(tr("GUI stall max %1 ms").arg(m_stall->maxStallMs(), 0, 'f', 1));
    // Keep the selected request's block table current as it grows.
    const QString id = m_blockMap->highlightedRequest();
    if (!id.isEmpty())
        if (const RequestRecord* r = m_controller->session()->request(id)) m_blockMap->highlightRequest(id, r->blockTable);
}

void MainWindow::setDarkTheme(bool dark) {
    m_darkTheme = dark;
    Theme::apply(dark);
    m_charts->restyle();
    for (ChatPane* p : m_panes) p->setColor(p->color());
    if (auto* a = findChild<QAction*>("darkThemeAction"); a && a->isChecked() != dark) {  // a script's theme action
        const QSignalBlocker quiet(a);
        a->setChecked(dark);
    }
}

void MainWindow::showMetricDefinitions() {
    auto* dialog = new MetricsHelpDialog(this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->show();
}

bool MainWindow::exportSession(const QString& dir, QString* error, const QJsonObject& script) {
    m_charts->replotNow();
    SessionExportInputs in;
    in.session = m_controller->session();
    in.model = m_controller->modelSummary();
    in.config = m_controller->config();
    // As it ran, as a benchmark's config (LlmEngine::resolved_config) reports it: the pool's block count and the
    // cache type auto resolved to, both as the engine published them (its latest snapshot, the model summary
    // that kvCacheResolved keeps). It said num_blocks 0 and "auto".
    if (const auto kv = m_controller->latestSnapshot()) in.config.num_blocks = kv->num_blocks;
    if (!in.model.kvCacheDtype.isEmpty()) in.config.kv_cache_dtype = in.model.kvCacheDtype.toStdString();
    for (const auto& c : m_charts->charts()) in.charts.emplace_back(c.name, c.plot);
    if (m_controller->isRemote()) {
        // What answered was the remote engine: its name and series, not the local model and knobs.
        const RemoteTarget& t = m_controller->remoteTarget();
        in.model = ModelSummary{};
        in.model.name = t.model;
        in.model.format = "remote";
        in.target = t.toJson();
        ServerSeries series;
        series.engine = ServerEngine::UNKNOWN;
        series.samples = m_controller->serverSamples();
        const ScrapeHealth& health = m_controller->scrapeHealth();
        series.num_scrapes = health.scrapes;
        series.num_failed_scrapes = health.failed;
        series.last_error = health.lastError.toStdString();
        QJsonObject metrics = toQJsonObject(server_series_to_json(series, 0));
        metrics["engine"] = t.engine;
        in.serverMetrics = metrics;
        in.charts.emplace_back("server_metrics", m_remoteView->chart());
    }
    in.charts.emplace_back("benchmark_comparison", m_benchmark->comparisonChart());
    in.window = this;
    in.script = script;
    // Every run of this window, whatever engine ran it (a connect or a model load starts a new session
    // but keeps the runs to compare); runs loaded from files are not this session's.
    for (const BenchResult& r : m_benchmark->resultsModel()->results())
        if (r.source.isEmpty()) in.benchmarks.push_back(r);
    in.gui = QJsonObject{{"gui_max_stall_ms", m_stall->maxStallMs()},
                         {"gui_mean_timer_lateness_ms", m_stall->meanLatenessMs()},
                         {"gui_stalls_over_16ms", m_stall->stallsOver(16)},
                         {"gui_stalls_over_50ms", m_stall->stallsOver(50)},
                         {"gui_timer_ticks", double(m_stall->ticks())},
                         {"platform", QApplication::platformName()}};
    return kvscope::ui::exportSession(dir, in, error);
}

}  // namespace kvscope::ui
