// ScriptRunner: replays a session script against the main window (GUI thread), so a session can be
// reproduced: open panes, submit prompts, move knobs, run benchmarks, wait. Format: see
// resources/scripts/example.json. Actions run in order; "at_ms" delays one until that many ms after
// the script started. Never blocks: waits are timers and polls.
#pragma once

#include "engine_config.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonObject>
#include <QObject>
#include <QTimer>

namespace kvscope::ui {

class MainWindow;

class ScriptRunner : public QObject {
    Q_OBJECT
public:
    explicit ScriptRunner(MainWindow* window, QObject* parent = nullptr);

    // Reads and checks the script; false with *error naming the file and the problem.
    bool load(const QString& path, QString* error);
    bool loadJson(const QJsonObject& script, QString* error);
    QString model() const { return m_script.value("model").toString(); }
    // The load-time configuration: defaults overridden by the script's "engine" object.
    EngineConfig engineConfig(const EngineConfig& defaults) const;
    int actionCount() const { return int(m_actions.size()); }
    // Where "screenshot" actions write (relative file names); default: the current directory.
    void setOutputDir(const QString& dir) { m_outputDir = dir; }

public slots:
    void start();

signals:
    void actionStarted(int index, const QString& action);
    void finished(bool ok, const QString& message);

private:
    void next();
    void fail(const QString& message);
    void waitUntil(std::function<bool()> done, int timeoutMs, const QString& what);
    bool runAction(const QJsonObject& a);  // false when it continues asynchronously
    void settleLayout();                   // runs the window's pending layout passes (after a resize)

    MainWindow* m_window;
    QJsonObject m_script;
    QJsonArray m_actions;
    int m_index = 0;
    int m_lastSet = -1;  // the index of the last `set`, whose refusal by the engine fails the script
    QElapsedTimer m_clock;
    QTimer m_poll;
    bool m_done = false;
    QString m_outputDir;
};

}  // namespace kvscope::ui
