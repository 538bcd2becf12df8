// ConnectDialog: "Connect to an endpoint..." (GUI thread): the base URL of an OpenAI-compatible engine
// (vLLM, SGLang, TGI, llama-server, kvscope serve), an API key, and the served model picked from the
// server's /v1/models, which is asked as soon as the URL is entered (probeEndpoint on a thread of its
// own, never on the GUI thread). Refused, 401 and 404 come back as plain error text under the fields.
// The key is held for this session only (no system secret store is used): never written to settings
// or exports; the dialog says so.
#pragma once

#include "remote_target.h"

#include <QDialog>
#include <QTimer>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace kvscope::ui {

class ConnectDialog : public QDialog {
    Q_OBJECT
public:
    // url and model prefill the fields (the last connection's; never a key).
    ConnectDialog(const QString& url, const QString& model, QWidget* parent = nullptr);
    RemoteConnection connection() const;
    QString statusText() const;
    QLineEdit* urlEdit() const { return m_url; }
    QLineEdit* keyEdit() const { return m_key; }
    QComboBox* modelBox() const { return m_model; }

public slots:
    // Asks the server for its models now (the fields' edits ask after a short pause).
    void fetchModels();

signals:
    void modelsFetched(const QStringList& models);
    void fetchFailed(const QString& message);

private:
    void showProbe(const RemoteTarget& target);
    void showError(const QString& message);

    QLineEdit* m_url;
    QLineEdit* m_key;
    QComboBox* m_model;
    QLabel* m_status;
    QPushButton* m_connect;
    QTimer m_debounce;
    QString m_wantedModel;
    int m_generation = 0;  // answers to an older URL or key are dropped
};

}  // namespace kvscope::ui
