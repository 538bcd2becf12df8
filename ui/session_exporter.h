// Writes a session to a directory (GUI thread): session.json (vLLM `bench serve` keys for the whole
// session + model + engine config + metric definitions + per-step timeline + every request + events +
// benchmark runs + the GUI's longest event-loop stall), requests.csv, timeline.csv, every chart as
// PNG and PDF under charts/, and a PNG of the main window.
#pragma once

#include "bench_spec.h"
#include "engine_types.h"

#include <QJsonObject>
#include <QString>

#include <utility>
#include <vector>

class QCustomPlot;
class QWidget;

namespace kvscope::ui {

class SessionData;

struct SessionExportInputs {
    const SessionData* session = nullptr;
    ModelSummary model;
    EngineConfig config;
    std::vector<std::pair<QString, QCustomPlot*>> charts;  // (file stem, chart)
    QWidget* window = nullptr;                             // grabbed as main_window.png
    std::vector<BenchResult> benchmarks;
    QJsonObject gui;  // gui_max_stall_ms and friends
    QJsonObject target;         // remote: RemoteTarget::toJson(); empty = the local engine
    QJsonObject serverMetrics;  // remote: the scraped /metrics series (server_series_to_json)
    QJsonObject script;         // script mode: {"file", "ok", "message"}; empty = an interactive session
};

QJsonObject sessionJson(const SessionExportInputs& in);
// Returns false with *error naming the file that could not be written.
bool exportSession(const QString& dir, const SessionExportInputs& in, QString* error);

}  // namespace kvscope::ui
