// BenchmarkPanel: runs the workloads of `kvscope-cli bench` through the live engine (GUI thread):
// dataset, arrivals and concurrency; a progress bar; a results table of this session's runs and runs
// loaded from earlier JSON files, with a chart overlaying their throughput and latency.
#pragma once

#include "bench_spec.h"

#include <QWidget>

class QBoxLayout;
class QComboBox;
class QCustomPlot;
class QLabel;
class QDoubleSpinBox;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;

namespace kvscope::ui {

class BenchResultsModel;
class EngineController;

class BenchmarkPanel : public QWidget {
    Q_OBJECT
public:
    explicit BenchmarkPanel(EngineController* controller, QWidget* parent = nullptr);
    BenchSpec spec() const;
    BenchResultsModel* resultsModel() const { return m_results; }
    QCustomPlot* comparisonChart() const { return m_chart; }

public slots:
    void setSpec(const kvscope::ui::BenchSpec& spec);
    void run() { runNamed({}); }
    // A run labelled "#N name" (a script's name for it); without a name the label says what ran.
    void runNamed(const QString& name);
    void cancel();
    bool loadResults(const QString& path);
    // Writes every run to path (a JSON file), creating its folder; false with *error naming the path when
    // it cannot.
    bool exportResults(const QString& path, QString* error = nullptr) const;

signals:
    void runFinished(const kvscope::ui::BenchResult& result);

protected:
    void resizeEvent(QResizeEvent* event) override;
    void showEvent(QShowEvent* event) override;

private:
    void updateChart();
    void showWorkloadTotal();
    void setRunning(bool running);
    void revealLatestRun();

    EngineController* m_controller;
    BenchResultsModel* m_results;
    QComboBox* m_dataset;
    QLineEdit* m_datasetPath;
    QSpinBox* m_numPrompts;
    QSpinBox* m_inputLen;
    QSpinBox* m_outputLen;
    QDoubleSpinBox* m_rangeRatio;
    QSpinBox* m_prefixLen;
    QDoubleSpinBox* m_rate;
    QDoubleSpinBox* m_burstiness;
    QSpinBox* m_maxConcurrency;
    QSpinBox* m_seed;
    QPushButton* m_runButton;
    QPushButton* m_cancelButton;
    QProgressBar* m_progress;
    QTableView* m_table;
    QCustomPlot* m_chart;
    QBoxLayout* m_columns;  // settings beside the results, or above them in a narrow window
    QLabel* m_mixNote;  // shown while the table mixes simulated and measured runs
    int m_runNumber = 0;
    int m_labelsAxisWidth = -1;  // the plot width the run labels were last fitted to
    bool m_revealPending = false;  // a run finished while the tab was hidden: its row is shown with the tab
};

}  // namespace kvscope::ui
