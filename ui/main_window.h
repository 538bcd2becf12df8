// The main window of the workbench (GUI thread): chat panes, the KV block map, the live charts, the
// request table, the tuning and benchmark panels; model loading, session export, settings, shortcuts
// and themes. Owns the EngineController (and through it the engine thread).
#pragma once

#include "engine_config.h"
#include "engine_types.h"
#include "remote_target.h"

#include <QJsonObject>
#include <QList>
#include <QMainWindow>
#include <QPointer>

class QLabel;
class QLineEdit;
class QProgressBar;
class QScrollArea;
class QSplitter;
class QTabWidget;

namespace kvscope::ui {

class BenchmarkPanel;
class BlockMapWidget;
class ChartsPanel;
class ChatPane;
class ElidedLabel;
class EngineController;
class HintTableView;
class RemoteServerView;
class RequestTableModel;
class StallMonitor;
class TuningPanel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    EngineController* controller() const { return m_controller; }
    QList<ChatPane*> panes() const { return m_panes; }
    TuningPanel* tuningPanel() const { return m_tuning; }
    BenchmarkPanel* benchmarkPanel() const { return m_benchmark; }
    ChartsPanel* chartsPanel() const { return m_charts; }
    BlockMapWidget* blockMap() const { return m_blockMap; }
    RequestTableModel* requestModel() const { return m_requestModel; }
    StallMonitor* stallMonitor() const { return m_stall; }
    RemoteServerView* remoteServerView() const { return m_remoteView; }

    // Writes the session export (see session_exporter.h) into dir.
    // script: how a replayed script ended ({"file", "ok", "message"}), written into session.json.
    bool exportSession(const QString& dir, QString* error = nullptr, const QJsonObject& script = {});
    // Every shortcut of the window's actions with what it does (HTML table; Help > Keyboard shortcuts).
    QString shortcutSummary() const;

public slots:
    void loadModel(const QString& spec, const kvscope::EngineConfig& config);
    void loadModel(const QString& spec);
    void openModelPicker();
    // "Connect to an endpoint...": the dialog, then connectToEndpoint.
    void openConnectDialog();
    // Connects to a remote engine (panes, benchmarks and charts then use it); Load model switches back.
    void connectToEndpoint(const kvscope::ui::RemoteConnection& connection);
    ChatPane* addPane();
    void closePane(kvscope::ui::ChatPane* pane);
    void sendToAll(const QString& text);
    void stopAll();
    void selectRequest(const QString& requestId);
    void setDarkTheme(bool dark);
    void showMetricDefinitions();

signals:
    void modelReady();

protected:
    void closeEvent(QCloseEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void buildActions();
    void buildLayout();
    void restoreSettings();
    void updateStatus();
    void showModelInfo(const ModelSummary& summary);  // the engine panel's model text
    ChatPane* activePane() const;
    void fitPanesToColumn();
    void showWholePane(kvscope::ui::ChatPane* pane);  // scrolled sideways until its edges are in the column

    EngineController* m_controller;
    StallMonitor* m_stall;
    QList<ChatPane*> m_panes;
    ChatPane* m_activePane = nullptr;
    QPointer<ChatPane> m_scrollToPane;  // added, to be scrolled into view once the splitter has laid it out
    int m_paneCounter = 0;
    QSplitter* m_paneSplitter = nullptr;
    QScrollArea* m_paneArea = nullptr;
    int m_firstPaneInView = 0;  // the pane at the column's left edge, kept there when the panes are refitted
    int m_paneRefits = 0;       // refits whose scroll position is still to be restored
    QLabel* m_noPaneHint = nullptr;
    BlockMapWidget* m_blockMap = nullptr;
    RemoteServerView* m_remoteView = nullptr;  // shown instead of the block map while connected
    ChartsPanel* m_charts = nullptr;
    TuningPanel* m_tuning = nullptr;
    BenchmarkPanel* m_benchmark = nullptr;
    RequestTableModel* m_requestModel = nullptr;
    HintTableView* m_requestTable = nullptr;
    QLineEdit* m_broadcast = nullptr;
    QLabel* m_modelLabel = nullptr;
    ElidedLabel* m_engineLabel = nullptr;
    QLabel* m_stallLabel = nullptr;
    QLabel* m_modelInfo = nullptr;
    QProgressBar* m_loadProgress = nullptr;
    QProgressBar* m_benchProgress = nullptr;
    QTabWidget* m_tabs = nullptr;
    EngineConfig m_loadConfig;
    bool m_darkTheme = true;
    // Remembered for the next start and written when the window closes: a QSettings write syncs the
    // file on the GUI thread (10-40 ms measured on a model load), so none happens during a session.
    QString m_lastModel;
    QString m_remoteUrl;
    QString m_remoteModel;
};

}  // namespace kvscope::ui
