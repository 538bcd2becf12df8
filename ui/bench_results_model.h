// BenchResultsModel: benchmark runs side by side (GUI thread): runs of this session and runs loaded
// from earlier JSON files (a kvscope session export, or any file with vLLM `bench serve` keys).
#pragma once

#include "bench_spec.h"

#include <QAbstractTableModel>

#include <vector>

namespace kvscope::ui {

class BenchResultsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    // The figures a comparison is read by come first, after the run's name; where the run came from last,
    // so that a narrow table shows metrics before it scrolls.
    enum Column { Name, OutputTput, MeanTtft, MeanTpot, MeanE2el, P99Ttft, P99Itl, RequestTput, TotalTput, Completed,
                  Prompts, Mode, Source, ColumnCount };
    explicit BenchResultsModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    const std::vector<BenchResult>& results() const { return m_results; }
    void addResult(const BenchResult& result);
    // Returns the number of runs loaded; throws nothing: errors come back in *error.
    int loadFile(const QString& path, QString* error);
    void clear();

    static QJsonObject resultToJson(const BenchResult& result);
    static BenchResult resultFromJson(const QJsonObject& o, const QString& source);
    // The run's simulation label ("simulated NVIDIA H100 SXM, llama-3-8b, step-time model v1"), from the
    // "simulated" object kvscope writes (GUI and CLI); empty for a measured run.
    static QString simulationLabel(const BenchResult& result);
    // Where the run ran, from its "target" (kvscope-cli bench's key): "remote vllm llama-3-8b" for a remote
    // engine, "local" for this workbench's engine (also for files from before the key existed).
    static QString targetLabel(const BenchResult& result);
    // Some runs simulated and some measured: their figures are not comparable as if both were measured.
    bool mixesSimulatedAndMeasured() const;

private:
    std::vector<BenchResult> m_results;
};

}  // namespace kvscope::ui
