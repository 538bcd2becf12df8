#include "benchmark_panel.h"

#include "chart_legend.h"

#include "bench_results_model.h"
#include "engine_controller.h"
#include "log_ticker.h"
#include "simulation_watermark.h"
#include "theme.h"

#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QResizeEvent>
#include <QSaveFile>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace kvscope::ui {

namespace {
// Side by side, the results get what the settings leave. Below this they show a run's name and one
// or two figures only, so the results go under the settings and the tab scrolls down instead.
constexpr int kResultsMinWidth = 480;
}  // namespace

BenchmarkPanel::BenchmarkPanel(EngineController* controller, QWidget* parent)
    : QWidget(parent), m_controller(controller), m_results(new BenchResultsModel(this)) {
    m_dataset = new QComboBox(this);
    m_dataset->addItems({"random", "shared-prefix", "sharegpt"});
    m_dataset->setToolTip(tr("Workload (vLLM bench --dataset-name): random token prompts, prompts sharing a prefix "
                             "(shows the prefix cache), or ShareGPT conversations from a JSON file"));
    m_datasetPath = new QLineEdit(this);
    m_datasetPath->setPlaceholderText(tr("ShareGPT JSON file"));
    m_numPrompts = new QSpinBox(this);
    m_numPrompts->setRange(1, 100000);
    m_numPrompts->setValue(64);
    m_numPrompts->setToolTip(tr("--num-prompts"));
    m_inputLen = new QSpinBox(this);
    m_inputLen->setRange(1, 1 << 20);
    m_inputLen->setValue(128);
    m_inputLen->setToolTip(tr("--input-len (shared-prefix: the suffix after the prefix)"));
    m_outputLen = new QSpinBox(this);
    m_outputLen->setRange(1, 1 << 20);
    m_outputLen->setValue(64);
    m_outputLen->setToolTip(tr("--output-len: forced (ignore_eos), as vLLM's random dataset"));
    m_rangeRatio = new QDoubleSpinBox(this);
    m_rangeRatio->setRange(0, 0.99);
    m_rangeRatio->setSingleStep(0.1);
    m_rangeRatio->setToolTip(tr("--range-ratio: lengths uniform in [L(1-r), L(1+r)]"));
    m_prefixLen = new QSpinBox(this);
    m_prefixLen->setRange(0, 1 << 20);
    m_prefixLen->setValue(64);
    m_prefixLen->setToolTip(tr("--prefix-len (shared-prefix)"));
    m_rate = new QDoubleSpinBox(this);
    m_rate->setRange(0, 100000);
    m_rate->setSpecialValueText(tr("inf (all at once)"));
    m_rate->setToolTip(tr("--request-rate in requests/s; inf = every request arrives at t = 0"));
    m_burstiness = new QDoubleSpinBox(this);
    m_burstiness->setRange(0.05, 100);
    m_burstiness->setValue(1);
    m_burstiness->setToolTip(tr("--burstiness: gamma shape of the gaps (1 = Poisson, < 1 burstier)"));
    m_maxConcurrency = new QSpinBox(this);
    m_maxConcurrency->setRange(0, 100000);
    m_maxConcurrency->setSpecialValueText(tr("unlimited"));
    m_maxConcurrency->setToolTip(tr("--max-concurrency: requests in flight at most"));
    m_seed = new QSpinBox(this);
    m_seed->setRange(0, 1 << 30);
    m_seed->setToolTip(tr("--seed: same seed, same workload"));

    auto* form = new QFormLayout;
    form->addRow(tr("dataset"), m_dataset);
    form->addRow(tr("dataset path"), m_datasetPath);
    form->addRow(tr("num prompts"), m_numPrompts);
    form->addRow(tr("input len"), m_inputLen);
    form->addRow(tr("output len"), m_outputLen);
    form->addRow(tr("range ratio"), m_rangeRatio);
    form->addRow(tr("prefix len"), m_prefixLen);
    form->addRow(tr("request rate"), m_rate);
    form->addRow(tr("burstiness"), m_burstiness);
    form->addRow(tr("max concurrency"), m_maxConcurrency);
    form->addRow(tr("seed"), m_seed);

    m_runButton = new QPushButton(tr("Run benchmark"), this);
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    m_cancelButton->setEnabled(false);
    m_progress = new QProgressBar(this);
    m_progress->setFormat(tr("%v / %m requests"));
    // As wide as its longest text: a narrower bar cuts the count.
    m_progress->setMinimumWidth(
        m_progress->fontMetrics().horizontalAdvance(tr("%v / %m requests").replace("%v", "100000").replace("%m", "100000")) + 24);
    connect(m_numPrompts, &QSpinBox::valueChanged, this, &BenchmarkPanel::showWorkloadTotal);
    connect(m_runButton, &QPushButton::clicked, this, &BenchmarkPanel::run);
    connect(m_cancelButton, &QPushButton::clicked, this, &BenchmarkPanel::cancel);
    auto* loadButton = new QPushButton(tr("Load results..."), this);
    loadButton->setToolTip(tr("Load earlier runs (kvscope session JSON or kvscope-cli bench --output-json) to compare"));
    connect(loadButton, &QPushButton::clicked, this, [this] {
        for (const QString& f : QFileDialog::getOpenFileNames(this, tr("Load benchmark results"), {}, tr("JSON (*.json)")))
            loadResults(f);
    });
    auto* exportButton = new QPushButton(tr("Export results..."), this);
    connect(exportButton, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getSaveFileName(this, tr("Export benchmark results"), "benchmarks.json", tr("JSON (*.json)"));
        QString error;
        if (!f.isEmpty() && !exportResults(f, &error)) QMessageBox::warning(this, tr("Export results"), error);
    });

    auto* left = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addLayout(form);
    auto* runRow = new QHBoxLayout;
    runRow->addWidget(m_runButton);
    runRow->addWidget(m_cancelButton);
    leftLayout->addLayout(runRow);
    leftLayout->addWidget(m_progress);
    leftLayout->addStretch();

    m_table = new QTableView(this);
    m_table->setModel(m_results);
    m_table->setAlternatingRowColors(true);
    m_table->setTabKeyNavigation(false);  // Tab leaves the table (arrows move in it): cell by cell it trapped the keyboard
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->verticalHeader()->hide();
    m_table->setWordWrap(false);
    m_table->setMinimumHeight(110);
    m_table->horizontalHeader()->setStretchLastSection(true);
    // Each figure as wide as its header or its widest number (ResizeToContents often kept the header's
    // width and cut the numbers); the name at most a share, cut with "..." (its tooltip has it all);
    // the source, the last column, takes what is left.
    auto fitColumns = [this] {
        m_table->resizeColumnsToContents();
        const int nameWidth = fontMetrics().horizontalAdvance("#12 random 64x128/64") + 12;
        if (m_table->columnWidth(BenchResultsModel::Name) > nameWidth) m_table->setColumnWidth(BenchResultsModel::Name, nameWidth);
    };
    fitColumns();
    connect(m_results, &QAbstractItemModel::rowsInserted, this, fitColumns);
    connect(m_results, &QAbstractItemModel::modelReset, this, fitColumns);
    m_chart = new QCustomPlot(this);
    m_chart->setMinimumHeight(150);
    m_chart->plotLayout()->insertRow(0);
    m_chart->plotLayout()->addElement(0, 0, new QCPTextElement(m_chart, tr("Runs compared"), QFont(font().family(), font().pointSize(), QFont::Bold)));
    m_chart->yAxis->setLabel(tr("output tok/s"));
    m_chart->yAxis2->setVisible(true);
    // Log: a TTFT of 12 ms and an E2EL of 1500 ms on one linear axis put the TTFT line flat on zero.
    m_chart->yAxis2->setLabel(tr("mean TTFT / E2EL ms (log)"));
    m_chart->yAxis2->setScaleType(QCPAxis::stLogarithmic);
    m_chart->yAxis2->setTicker(QSharedPointer<LogTicker>::create());
    placeLegendUnderTitle(m_chart, font());
    // The run labels and the legend's rows are fitted to the plot's width, which the layout learns only in a
    // replot (a resize's too): once more when it differs from the width they were fitted for.
    connect(m_chart, &QCustomPlot::afterLayout, this, [this] {
        if (m_chart->axisRect()->width() != m_labelsAxisWidth) QTimer::singleShot(0, this, &BenchmarkPanel::updateChart);
    });
    Theme::styleChart(m_chart);
    auto* buttons = new QHBoxLayout;
    buttons->addStretch();
    buttons->addWidget(loadButton);
    buttons->addWidget(exportButton);
    auto* right = new QWidget(this);
    auto* rightLayout = new QVBoxLayout(right);
    rightLayout->setContentsMargins(0, 0, 0, 0);
    m_mixNote = new QLabel(tr("<span style='color:#e0a040'><b>Simulated and measured runs side by side:</b> "
                              "simulated figures are a step-time model's predictions, not measurements "
                              "(the Source column says which is which).</span>"),
                           this);
    m_mixNote->setObjectName("simulatedMixNote");
    m_mixNote->setWordWrap(true);
    m_mixNote->setVisible(false);
    rightLayout->addWidget(m_mixNote);
    auto* split = new QSplitter(Qt::Vertical, right);
    split->addWidget(m_table);
    split->addWidget(m_chart);
    rightLayout->addWidget(split, 1);
    rightLayout->addLayout(buttons);
    // Tab in the order of the screen: the table, then the buttons below it (made first, they came before it).
    setTabOrder(m_table, loadButton);
    setTabOrder(loadButton, exportButton);

    m_columns = new QBoxLayout(QBoxLayout::LeftToRight, this);
    m_columns->addWidget(left);
    m_columns->addWidget(right, 1);
    showWorkloadTotal();

    connect(controller, &EngineController::benchmarkProgressed, this, [this](int done, int total) {
        m_progress->setMaximum(total);
        m_progress->setValue(done);
    });
    connect(controller, &EngineController::benchmarkFinished, this, [this](const BenchResult& r) {
        setRunning(false);
        if (r.summary.isEmpty()) return;
        // Done is not completed: the bar says how many of its requests failed (the table has why).
        const int failed = r.summary.value("failed").toInt();
        m_progress->setFormat(failed > 0 ? tr("%v / %m requests, %1 failed").arg(failed) : tr("%v / %m requests"));
        m_results->addResult(r);
        updateChart();
        // Once the table has its new row laid out.
        QTimer::singleShot(0, this, &BenchmarkPanel::revealLatestRun);
        emit runFinished(r);
    });
    connect(m_results, &QAbstractItemModel::rowsInserted, this, &BenchmarkPanel::updateChart);
    connect(m_results, &QAbstractItemModel::modelReset, this, &BenchmarkPanel::updateChart);
}

void BenchmarkPanel::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    if (m_revealPending) QTimer::singleShot(0, this, &BenchmarkPanel::revealLatestRun);
}

void BenchmarkPanel::revealLatestRun() {
    // The run's row in view: in a narrow window the table lies below the settings, past the tab's fold (at
    // 1024x700 only its header showed), and a run's figures are what the user waits for.
    const int row = m_results->rowCount() - 1;
    // A hidden tab has no layout to scroll by: the row is revealed when the tab is next shown (showEvent).
    const bool wasPending = m_revealPending;
    m_revealPending = !isVisible();
    if (row < 0 || m_revealPending) return;
    const QModelIndex index = m_results->index(row, 0);
    m_table->scrollTo(index);
    for (QWidget* w = parentWidget(); w; w = w->parentWidget())
        if (auto* area = qobject_cast<QScrollArea*>(w); area && area->widget()) {
            // Where the user watched the run (its progress bar in view), or did not see the tab at all; one who
            // scrolled up to the settings stays there.
            const QPoint bar = m_progress->mapTo(area->viewport(), QPoint(0, m_progress->height() / 2));
            if (!wasPending && !area->viewport()->rect().contains(bar)) return;
            const QPoint bottom = m_table->viewport()->mapTo(area->widget(), m_table->visualRect(index).bottomLeft());
            area->ensureVisible(bottom.x(), bottom.y(), 0, 8);
            return;
        }
}

BenchSpec BenchmarkPanel::spec() const {
    BenchSpec s;
    s.dataset = m_dataset->currentText();
    s.datasetPath = m_datasetPath->text();
    s.numPrompts = m_numPrompts->value();
    s.inputLen = m_inputLen->value();
    s.outputLen = m_outputLen->value();
    s.rangeRatio = m_rangeRatio->value();
    s.prefixLen = m_prefixLen->value();
    s.requestRate = m_rate->value();
    s.burstiness = m_burstiness->value();
    s.maxConcurrency = m_maxConcurrency->value();
    s.seed = quint64(m_seed->value());
    return s;
}

void BenchmarkPanel::setSpec(const BenchSpec& s) {
    m_dataset->setCurrentText(s.dataset);
    m_datasetPath->setText(s.datasetPath);
    m_numPrompts->setValue(s.numPrompts);
    m_inputLen->setValue(s.inputLen);
    m_outputLen->setValue(s.outputLen);
    m_rangeRatio->setValue(s.rangeRatio);
    m_prefixLen->setValue(s.prefixLen);
    m_rate->setValue(s.requestRate);
    m_burstiness->setValue(s.burstiness);
    m_maxConcurrency->setValue(s.maxConcurrency);
    m_seed->setValue(int(s.seed));
}

void BenchmarkPanel::runNamed(const QString& name) {
    if (m_controller->isBenchmarkRunning()) return;
    BenchSpec s = spec();
    const EngineConfig& c = m_controller->config();
    // Prompts x input/output tokens as each dataset makes them: shared-prefix prompts are the prefix plus
    // their own part; sharegpt's lengths come from the conversations.
    const QString shape = s.dataset == "sharegpt"        ? tr("%1 conversations").arg(s.numPrompts)
                          : s.dataset == "shared-prefix" ? QString("%1x(%2+%3)/%4").arg(s.numPrompts).arg(s.prefixLen)
                                                               .arg(s.inputLen).arg(s.outputLen)
                                                         : QString("%1x%2/%3").arg(s.numPrompts).arg(s.inputLen).arg(s.outputLen);
    const QString engine = m_controller->isRemote() ? QStringLiteral("remote") : QString::fromUtf8(to_string(c.mode).data());
    s.name = name.isEmpty() ? QString("#%1 %2 %3 %4").arg(++m_runNumber).arg(s.dataset, shape, engine)
                            : QString("#%1 %2").arg(++m_runNumber).arg(name);
    m_progress->setFormat(tr("%v / %m requests"));
    m_progress->setMaximum(s.numPrompts);
    m_progress->setValue(0);
    setRunning(true);
    m_controller->runBenchmark(s);
}

void BenchmarkPanel::cancel() { m_controller->cancelBenchmark(); }

void BenchmarkPanel::setRunning(bool running) {
    m_runButton->setEnabled(!running);
    m_cancelButton->setEnabled(running);
}

// Before a run the bar counts the workload that Run would send, not QProgressBar's default of 100.
void BenchmarkPanel::showWorkloadTotal() {
    if (m_controller->isBenchmarkRunning()) return;
    m_progress->setFormat(tr("%v / %m requests"));
    m_progress->setRange(0, m_numPrompts->value());
    m_progress->setValue(0);
}

void BenchmarkPanel::resizeEvent(QResizeEvent* event) {
    const int settingsWidth = m_columns->itemAt(0)->widget()->sizeHint().width();
    const bool narrow = event->size().width() < settingsWidth + kResultsMinWidth;
    m_columns->setDirection(narrow ? QBoxLayout::TopToBottom : QBoxLayout::LeftToRight);
    // Under the settings the tab scrolls down: the chart may be as tall as its axis titles need.
    m_chart->setMinimumHeight(narrow ? 260 : 150);
    QWidget::resizeEvent(event);
}

bool BenchmarkPanel::loadResults(const QString& path) {
    QString error;
    if (m_results->loadFile(path, &error) == 0) {
        QMessageBox::warning(this, tr("Load results"), error);
        return false;
    }
    return true;
}

bool BenchmarkPanel::exportResults(const QString& path, QString* error) const {
    QJsonArray runs;
    for (const BenchResult& r : m_results->results()) runs.append(BenchResultsModel::resultToJson(r));
    auto fail = [&](const QString& why) {
        if (error) *error = why;
        return false;
    };
    const QString folder = QFileInfo(path).absolutePath();
    if (!QDir().mkpath(folder)) return fail(tr("Cannot export the results to %1: the folder %2 cannot be created").arg(path, folder));
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return fail(tr("Cannot export the results to %1: %2").arg(path, f.errorString()));
    f.write(QJsonDocument(QJsonObject{{"benchmarks", runs}}).toJson());
    if (!f.commit()) return fail(tr("Cannot export the results to %1: %2").arg(path, f.errorString()));
    return true;
}

void BenchmarkPanel::updateChart() {
    m_chart->clearPlottables();
    const auto& runs = m_results->results();
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    QVector<double> keys, tput, ttft, e2el;
    QString simulated;  // a simulated run's label
    bool measured = false;
    // A bar's label is its run's name and target while 12 characters of each name fit under the bars side by
    // side, else the run's number ("#2", the name's first word) alone: overlapping names read as neither.
    // Each line is elided to its bar's width ("…" says where: 18 characters were cut without one).
    m_labelsAxisWidth = m_chart->axisRect()->width();  // before the first layout, an estimate
    const int plotWidth = m_labelsAxisWidth > 0 ? m_labelsAxisWidth : m_chart->width() - 110;
    const int perBar = std::max(1, int(plotWidth / (double(runs.size()) + 0.2)));
    const QFontMetrics tickFont(m_chart->xAxis->tickLabelFont());
    bool full = true;
    for (const BenchResult& r : runs)
        full = full && tickFont.horizontalAdvance("[sim] " + r.spec.name.left(12)) + 8 <= perBar;
    const auto fit = [&](const QString& line, Qt::TextElideMode mode) { return tickFont.elidedText(line, mode, perBar - 8); };
    for (size_t i = 0; i < runs.size(); ++i) {
        keys << double(i + 1);
        tput << runs[i].summary.value("output_throughput").toDouble();
        // A run with no completed request has no mean: a gap on the log axis, not a line off its bottom.
        const auto positive = [](double v) { return v > 0 ? v : qQNaN(); };
        ttft << positive(runs[i].summary.value("mean_ttft_ms").toDouble());
        e2el << positive(runs[i].summary.value("mean_e2el_ms").toDouble());
        // Labelled by target, so that a local and a remote run overlaid cannot be mistaken for each other.
        const QString target = BenchResultsModel::targetLabel(runs[i]);
        const QString sim = BenchResultsModel::simulationLabel(runs[i]).isEmpty() ? "" : "[sim] ";
        ticker->addTick(double(i + 1), full ? fit(sim + runs[i].spec.name, Qt::ElideRight) + "\n" + fit(target, Qt::ElideMiddle)
                                            : fit(sim + runs[i].spec.name.section(' ', 0, 0), Qt::ElideRight));
        if (!BenchResultsModel::simulationLabel(runs[i]).isEmpty()) simulated = BenchResultsModel::simulationLabel(runs[i]);
        else measured = true;
    }
    m_mixNote->setVisible(simulated.size() && measured);
    setSimulationWatermark(m_chart, simulated.isEmpty() ? QString()
                                    : measured       ? tr("[sim] runs simulated, the others measured")
                                                     : simulated);
    auto* bars = new QCPBars(m_chart->xAxis, m_chart->yAxis);
    bars->setName(tr("output tok/s"));
    bars->setWidth(0.5);
    QColor c = Theme::series(0);
    bars->setPen(QPen(c));
    c.setAlpha(150);
    bars->setBrush(c);
    bars->setData(keys, tput);
    auto addLine = [&](const QString& name, const QVector<double>& v, int color) {
        QCPGraph* g = m_chart->addGraph(m_chart->xAxis, m_chart->yAxis2);
        g->setName(name);
        g->setPen(QPen(Theme::series(color), 2));
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 6));
        g->setData(keys, v);
    };
    addLine(tr("mean TTFT ms"), ttft, 1);
    addLine(tr("mean E2EL ms"), e2el, 3);
    // As many legend entries to a row as the chart's width holds.
    int legendWidth = 0, perRow = 0;
    for (int i = 0; i < m_chart->legend->itemCount(); ++i) {
        const QCPAbstractLegendItem* item = m_chart->legend->item(i);
        if (!item) continue;  // an empty cell of the grid
        legendWidth += item->minimumOuterSizeHint().width() + m_chart->legend->columnSpacing();
        if (legendWidth <= m_chart->width() - 20) ++perRow;
    }
    m_chart->legend->setWrap(std::max(1, perRow));
    m_chart->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);  // rearranged to the wrap
    m_chart->xAxis->setTicker(ticker);
    m_chart->xAxis->setRange(0.4, double(runs.size()) + 0.6);
    m_chart->yAxis->rescale();
    m_chart->yAxis->setRangeLower(0);
    m_chart->yAxis->setRangeUpper(std::max(1.0, m_chart->yAxis->range().upper * 1.15));
    double lo = 0, hi = 0;  // the positive latencies' span, a little wider
    for (const QVector<double>* v : {&ttft, &e2el})
        for (double x : *v)
            if (x > 0) {  // false for NaN too
                lo = lo > 0 ? std::min(lo, x) : x;
                hi = std::max(hi, x);
            }
    m_chart->yAxis2->setRange(lo > 0 ? QCPRange(lo / 1.5, hi * 1.5) : QCPRange(1, 1000));
    m_chart->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace kvscope::ui
