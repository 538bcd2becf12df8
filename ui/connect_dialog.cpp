#include "connect_dialog.h"

#include <QApplication>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPointer>
#include <QPushButton>
#include <QVBoxLayout>

#include <thread>

namespace kvscope::ui {

ConnectDialog::ConnectDialog(const QString& url, const QString& model, QWidget* parent)
    : QDialog(parent), m_debounce(this), m_wantedModel(model) {
    setWindowTitle(tr("Connect to an endpoint"));
    setObjectName("connectDialog");
    m_url = new QLineEdit(url, this);
    m_url->setObjectName("connectUrl");
    m_url->setPlaceholderText("http://127.0.0.1:8000");
    m_url->setToolTip(tr("Base URL of an OpenAI-compatible server: vLLM, SGLang, TGI, llama-server, kvscope-cli serve"));
    m_key = new QLineEdit(this);
    m_key->setObjectName("connectKey");
    m_key->setEchoMode(QLineEdit::Password);
    m_key->setPlaceholderText(tr("none"));
    m_key->setToolTip(tr("Sent as 'Authorization: Bearer KEY'"));
    m_model = new QComboBox(this);
    m_model->setObjectName("connectModel");
    m_model->setMinimumContentsLength(24);
    m_model->setToolTip(tr("The served model, as the server's /v1/models lists it"));
    m_status = new QLabel(tr("Enter the server's URL: its models are listed here."), this);
    m_status->setObjectName("connectStatus");
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* keyNote = new QLabel(tr("The API key is kept for this session only: no system secret store is used, and it is "
                                  "never written to settings or exports."),
                               this);
    keyNote->setWordWrap(true);
    keyNote->setEnabled(false);  // a note, drawn in the palette's muted text
    auto* refresh = new QPushButton(tr("Refresh"), this);
    refresh->setToolTip(tr("Ask /v1/models again"));
    connect(refresh, &QPushButton::clicked, this, &ConnectDialog::fetchModels);
    auto* modelRow = new QHBoxLayout;
    modelRow->addWidget(m_model, 1);
    modelRow->addWidget(refresh);

    auto* form = new QFormLayout;
    form->addRow(tr("URL"), m_url);
    form->addRow(tr("API key"), m_key);
    form->addRow(QString(), keyNote);
    form->addRow(tr("Model"), modelRow);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    m_connect = buttons->button(QDialogButtonBox::Ok);
    m_connect->setText(tr("Connect"));
    m_connect->setEnabled(false);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(m_status);
    layout->addStretch();
    layout->addWidget(buttons);
    setMinimumWidth(480);

    // Asked when the typing stops, not at every key.
    m_debounce.setSingleShot(true);
    m_debounce.setInterval(400);
    connect(&m_debounce, &QTimer::timeout, this, &ConnectDialog::fetchModels);
    connect(m_url, &QLineEdit::textEdited, &m_debounce, qOverload<>(&QTimer::start));
    connect(m_key, &QLineEdit::textEdited, &m_debounce, qOverload<>(&QTimer::start));
    if (!url.isEmpty()) m_debounce.start(0);
}

RemoteConnection ConnectDialog::connection() const {
    return RemoteConnection{m_url->text().trimmed(), m_key->text(), m_model->currentText()};
}

QString ConnectDialog::statusText() const { return m_status->text(); }

void ConnectDialog::fetchModels() {
    m_debounce.stop();
    m_model->clear();
    m_connect->setEnabled(false);
    if (m_url->text().trimmed().isEmpty()) return;
    m_status->setText(tr("Asking %1/v1/models ...").arg(m_url->text().trimmed().toHtmlEscaped()));
    const int generation = ++m_generation;
    RemoteConnection probe = connection();
    probe.model.clear();  // any served model: the list is what is asked for
    // The probe blocks (up to its timeouts), so it runs on a thread of its own; the answer comes back to
    // the GUI thread, where a dialog that has gone away or moved on to another URL drops it.
    QPointer<ConnectDialog> self(this);
    std::thread([probe, generation, self] {
        RemoteTarget target;
        QString error;
        try {
            target = probeEndpoint(probe);
        } catch (const std::exception& e) {
            error = QString::fromStdString(e.what());
        }
        QMetaObject::invokeMethod(qApp, [self, generation, target, error] {
            if (!self || self->m_generation != generation) return;
            if (error.isEmpty()) self->showProbe(target);
            else self->showError(error);
        }, Qt::QueuedConnection);
    }).detach();
}

void ConnectDialog::showProbe(const RemoteTarget& target) {
    m_model->addItems(target.models);
    if (target.models.contains(m_wantedModel)) m_model->setCurrentText(m_wantedModel);
    m_status->setText(tr("%1 at %2 serves %n model(s).", nullptr, int(target.models.size()))
                          .arg(target.engine.toHtmlEscaped(), target.baseUrl.toHtmlEscaped()));
    m_connect->setEnabled(true);
    emit modelsFetched(target.models);
}

void ConnectDialog::showError(const QString& message) {
    m_status->setText(tr("<span style='color:#e05a6a'>Cannot connect:</span> %1").arg(message.toHtmlEscaped()));
    emit fetchFailed(message);
}

}  // namespace kvscope::ui
