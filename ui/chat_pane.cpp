#include "chat_pane.h"

#include "engine_controller.h"

#include <QCheckBox>
#include <QColorDialog>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPainter>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QTextEdit>
#include <QToolButton>
#include <QVBoxLayout>

namespace kvscope::ui {

ChatPane::ChatPane(EngineController* controller, int number, const QColor& color, QWidget* parent)
    : QFrame(parent), m_controller(controller), m_title(tr("Pane %1").arg(number)), m_color(color) {
    setFrameShape(QFrame::StyledPanel);
    setObjectName("ChatPane");
    setMinimumWidth(240);

    // Header: colour, title, state, settings, close.
    m_colorButton = new QToolButton(this);
    m_colorButton->setToolTip(tr("Pane colour: this pane's requests have this colour in the block map, charts and tables"));
    m_colorButton->setAutoRaise(true);
    connect(m_colorButton, &QToolButton::clicked, this, [this] {
        const QColor c = QColorDialog::getColor(m_color, this, tr("Pane colour"));
        if (c.isValid()) setColor(c);
    });
    m_titleLabel = new QLabel(QString("<b>%1</b>").arg(m_title), this);
    m_stateLabel = new QLabel(tr("idle"), this);
    m_stateLabel->setToolTip(tr("State of this pane's request: waiting (queued), running, preempted (its KV blocks were "
                                "taken back; it will be recomputed), finished"));
    m_settingsButton = new QToolButton(this);
    m_settingsButton->setText(tr("Settings"));
    m_settingsButton->setCheckable(true);
    m_settingsButton->setAutoRaise(true);
    m_settingsButton->setToolTip(tr("System prompt, sampling settings and priority of this pane"));
    auto* closeButton = new QToolButton(this);
    closeButton->setText(QString::fromUtf8("\u2715"));
    closeButton->setAutoRaise(true);
    closeButton->setToolTip(tr("Close this pane (aborts its request)"));
    connect(closeButton, &QToolButton::clicked, this, [this] { emit closeRequested(this); });
    auto* header = new QHBoxLayout;
    header->setContentsMargins(0, 0, 0, 0);
    header->addWidget(m_colorButton);
    header->addWidget(m_titleLabel);
    header->addWidget(m_stateLabel);
    header->addStretch();
    header->addWidget(m_settingsButton);
    header->addWidget(closeButton);

    // Settings (hidden until asked for).
    m_settings = new QWidget(this);
    auto* form = new QFormLayout(m_settings);
    form->setContentsMargins(0, 0, 0, 0);
    m_systemPrompt = new QPlainTextEdit(m_settings);
    m_systemPrompt->setPlaceholderText(tr("System prompt (optional)"));
    m_systemPrompt->setMaximumHeight(52);
    m_temperature = new QDoubleSpinBox(m_settings);
    m_temperature->setRange(0, 2);
    m_temperature->setSingleStep(0.1);
    m_temperature->setValue(0.8);
    m_temperature->setToolTip(tr("temperature (vLLM SamplingParams.temperature, TensorRT-LLM temperature): 0 = greedy argmax"));
    m_topP = new QDoubleSpinBox(m_settings);
    m_topP->setRange(0.01, 1);
    m_topP->setSingleStep(0.05);
    m_topP->setValue(0.95);
    m_topP->setToolTip(tr("top_p (vLLM top_p, TensorRT-LLM top_p): nucleus sampling mass"));
    m_topK = new QSpinBox(m_settings);
    m_topK->setRange(0, 1000);
    m_topK->setToolTip(tr("top_k (vLLM top_k, TensorRT-LLM top_k): 0 = off"));
    m_maxTokens = new QSpinBox(m_settings);
    m_maxTokens->setRange(1, 8192);
    m_maxTokens->setValue(128);
    m_maxTokens->setToolTip(tr("max_tokens (vLLM max_tokens, TensorRT-LLM max_new_tokens): output tokens at most"));
    m_seed = new QSpinBox(m_settings);
    m_seed->setRange(-1, 1000000);
    m_seed->setValue(-1);
    m_seed->setSpecialValueText(tr("random"));
    m_seed->setToolTip(tr("seed (vLLM SamplingParams.seed, TensorRT-LLM random_seed): same text alone or batched"));
    m_priority = new QSpinBox(m_settings);
    m_priority->setRange(-100, 100);
    m_priority->setToolTip(tr("priority (vLLM priority; used when the policy is 'priority'): lower is scheduled first, "
                              "higher is preempted first"));
    m_useTemplate = new QCheckBox(tr("chat template"), m_settings);
    m_useTemplate->setChecked(true);
    m_useTemplate->setToolTip(tr("Render the conversation with the model's chat template; off = send the last message as raw text"));
    auto* row1 = new QHBoxLayout;
    row1->addWidget(new QLabel(tr("temp"), m_settings));
    row1->addWidget(m_temperature);
    row1->addWidget(new QLabel(tr("top-p"), m_settings));
    row1->addWidget(m_topP);
    row1->addWidget(new QLabel(tr("top-k"), m_settings));
    row1->addWidget(m_topK);
    auto* row2 = new QHBoxLayout;
    row2->addWidget(new QLabel(tr("max"), m_settings));
    row2->addWidget(m_maxTokens);
    row2->addWidget(new QLabel(tr("seed"), m_settings));
    row2->addWidget(m_seed);
    row2->addWidget(new QLabel(tr("prio"), m_settings));
    row2->addWidget(m_priority);
    form->addRow(m_systemPrompt);
    form->addRow(row1);
    form->addRow(row2);
    form->addRow(m_useTemplate);
    m_settings->setVisible(false);
    connect(m_settingsButton, &QToolButton::toggled, m_settings, &QWidget::setVisible);

    m_transcript = new QTextEdit(this);
    m_transcript->setReadOnly(true);
    m_transcript->setPlaceholderText(tr("Type a message below and press Ctrl+Return"));
    m_transcript->viewport()->installEventFilter(this);

    m_statsLabel = new QLabel(this);
    m_statsLabel->setTextFormat(Qt::RichText);
    m_statsLabel->setToolTip(tr("TTFT: first token - arrival. tok/s: output tokens after the first / decode time. "
                                "blocks: KV blocks in this request's block table (click to show them in the block map)."));

    m_input = new QPlainTextEdit(this);
    m_input->setPlaceholderText(tr("Message (Ctrl+Return to send)"));
    m_input->setMaximumHeight(64);
    m_input->installEventFilter(this);
    m_sendButton = new QPushButton(tr("Send"), this);
    m_sendButton->setToolTip(tr("Send (Ctrl+Return)"));
    m_stopButton = new QPushButton(tr("Stop"), this);
    m_stopButton->setToolTip(tr("Abort this pane's request (Esc)"));
    m_regenerateButton = new QPushButton(tr("Regenerate"), this);
    m_regenerateButton->setToolTip(tr("Drop the last reply and generate it again"));
    connect(m_sendButton, &QPushButton::clicked, this, &ChatPane::send);
    connect(m_stopButton, &QPushButton::clicked, this, &ChatPane::stop);
    connect(m_regenerateButton, &QPushButton::clicked, this, &ChatPane::regenerate);
    auto* buttons = new QHBoxLayout;
    buttons->addStretch();
    buttons->addWidget(m_regenerateButton);
    buttons->addWidget(m_stopButton);
    buttons->addWidget(m_sendButton);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->setSpacing(4);
    layout->addLayout(header);
    layout->addWidget(m_settings);
    layout->addWidget(m_transcript, 1);
    layout->addWidget(m_statsLabel);
    layout->addWidget(m_input);
    layout->addLayout(buttons);

    connect(m_controller, &EngineController::requestUpdated, this, [this](const RequestProgress& p) {
        if (p.requestId == m_requestId) applyProgress(p);
    });
    connect(m_controller, &EngineController::requestRejected, this, [this](const QString& id, const QString& message) {
        if (id != m_requestId) return;
        appendText(tr("\n[rejected: %1]").arg(message));
        m_requestId.clear();
        m_stateLabel->setText(tr("rejected"));
        updateButtons();
    });
    updateColorSwatch();
    updateButtons();
}

QString ChatPane::inputText() const { return m_input->toPlainText(); }

SamplingParams ChatPane::samplingParams() const {
    SamplingParams p;
    p.temperature = float(m_temperature->value());
    p.top_p = float(m_topP->value());
    p.top_k = m_topK->value();
    p.max_tokens = m_maxTokens->value();
    if (m_seed->value() >= 0) p.seed = uint64_t(m_seed->value());
    return p;
}

int ChatPane::priority() const { return m_priority->value(); }

void ChatPane::setSystemPrompt(const QString& text) { m_systemPrompt->setPlainText(text); }

void ChatPane::setSamplingParams(const SamplingParams& p) {
    m_temperature->setValue(p.temperature);
    m_topP->setValue(p.top_p);
    m_topK->setValue(p.top_k);
    m_maxTokens->setValue(p.max_tokens);
    m_seed->setValue(p.seed ? int(*p.seed) : -1);
}

void ChatPane::setPriority(int priority) { m_priority->setValue(priority); }
void ChatPane::setInputText(const QString& text) { m_input->setPlainText(text); }

void ChatPane::send() {
    const QString text = m_input->toPlainText().trimmed();
    if (text.isEmpty() || isBusy()) return;
    m_input->clear();
    sendText(text);
}

void ChatPane::sendText(const QString& text) {
    if (isBusy()) stop();
    m_history.push_back({"user", text.toStdString()});
    appendRole(tr("You"));
    appendText(text);
    submitConversation();
}

void ChatPane::submitConversation() {
    SubmitCommand c;
    const QString system = m_systemPrompt->toPlainText().trimmed();
    if (!system.isEmpty()) c.messages.push_back({"system", system.toStdString()});
    c.messages.insert(c.messages.end(), m_history.begin(), m_history.end());
    c.useChatTemplate = m_useTemplate->isChecked();
    if (!c.useChatTemplate && !m_history.empty()) c.promptText = QString::fromStdString(m_history.back().content);
    c.sampling = samplingParams();
    c.priority = priority();
    m_reply.clear();
    appendRole(m_title == QString() ? tr("Model") : tr("Model"));
    m_requestId = m_controller->submitRequest(c, m_title, m_color);
    m_stateLabel->setText(tr("waiting"));
    m_statsLabel->clear();
    updateButtons();
    emit requestSubmitted(m_requestId);
}

void ChatPane::stop() {
    if (!isBusy()) return;
    m_controller->abortRequest(m_requestId);
}

void ChatPane::regenerate() {
    if (isBusy()) return;
    if (!m_history.empty() && m_history.back().role == "assistant") m_history.pop_back();
    if (m_history.empty()) return;
    // Rewrite the transcript without the dropped reply.
    m_transcript->clear();
    for (const ChatMessage& m : m_history) {
        appendRole(m.role == "user" ? tr("You") : tr("Model"));
        appendText(QString::fromStdString(m.content));
    }
    submitConversation();
}

void ChatPane::clearConversation() {
    stop();
    m_history.clear();
    m_transcript->clear();
}

void ChatPane::setColor(const QColor& color) {
    m_color = color;
    updateColorSwatch();
}

void ChatPane::applyProgress(const RequestProgress& p) {
    if (!p.textDelta.isEmpty()) {
        m_reply += p.textDelta;
        appendText(p.textDelta);
    }
    const int blocks = int(p.blockTable.size());
    QString state = statusName(p.status);
    if (p.finished) state = p.finishReason == FinishReason::ABORT ? tr("stopped") : tr("finished");
    m_stateLabel->setText(p.status == RequestStatus::PREEMPTED ? QString("<span style='color:#e0a040'>%1</span>").arg(state)
                                                               : state);
    QStringList stats;
    if (p.ttft >= 0) stats << tr("TTFT <b>%1 ms</b>").arg(p.ttft * 1e3, 0, 'f', 1);
    if (p.ttft >= 0 && p.numOutputTokens > 1 && p.elapsed > p.ttft)
        stats << tr("<b>%1</b> tok/s").arg((p.numOutputTokens - 1) / (p.elapsed - p.ttft), 0, 'f', 1);
    stats << tr("%1 tok").arg(p.numOutputTokens);
    if (!p.finished) stats << tr("<b>%1</b> blocks").arg(blocks);
    if (p.numPreemptions) stats << tr("%1 preempted").arg(p.numPreemptions);
    if (p.numCachedTokens) stats << tr("%1 cached").arg(p.numCachedTokens);
    m_statsLabel->setText(stats.join(QString::fromUtf8(" \u00b7 ")));
    if (p.finished) {
        const QString id = m_requestId;
        m_lastReply = m_reply;
        if (p.finishReason != FinishReason::ABORT || !m_reply.isEmpty())
            m_history.push_back({"assistant", m_reply.toStdString()});
        if (p.finishReason == FinishReason::ABORT) appendText(tr(" [stopped]"));
        m_requestId.clear();
        updateButtons();
        emit replyFinished(id, m_lastReply);
    }
}

void ChatPane::appendRole(const QString& role) {
    QTextCursor c(m_transcript->document());
    c.movePosition(QTextCursor::End);
    if (!m_transcript->document()->isEmpty()) c.insertBlock();
    QTextCharFormat f;
    f.setFontWeight(QFont::Bold);
    f.setForeground(role == tr("You") ? palette().color(QPalette::Text) : m_color);
    c.insertText(role + "\n", f);
}

void ChatPane::appendText(const QString& text) {
    QScrollBar* bar = m_transcript->verticalScrollBar();
    const bool atEnd = bar->value() >= bar->maximum() - 4;
    QTextCursor c(m_transcript->document());
    c.movePosition(QTextCursor::End);
    c.insertText(text, QTextCharFormat());
    if (atEnd) bar->setValue(bar->maximum());
}

void ChatPane::updateButtons() {
    m_sendButton->setEnabled(!isBusy());
    m_stopButton->setEnabled(isBusy());
    m_regenerateButton->setEnabled(!isBusy() && !m_history.empty());
    if (!isBusy() && m_stateLabel->text() == tr("waiting")) m_stateLabel->setText(tr("idle"));
}

void ChatPane::updateColorSwatch() {
    QPixmap pm(14, 14);
    pm.fill(Qt::transparent);
    QPainter painter(&pm);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setBrush(m_color);
    painter.setPen(Qt::NoPen);
    painter.drawEllipse(1, 1, 12, 12);
    m_colorButton->setIcon(QIcon(pm));
    setStyleSheet(QString("QFrame#ChatPane { border: 1px solid palette(mid); border-top: 3px solid %1; border-radius: 4px; }")
                      .arg(m_color.name()));
}

bool ChatPane::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() == QEvent::FocusIn || event->type() == QEvent::MouseButtonPress) emit activated(this);
    if (watched == m_input && event->type() == QEvent::KeyPress) {
        auto* key = static_cast<QKeyEvent*>(event);
        if ((key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) && (key->modifiers() & Qt::ControlModifier)) {
            send();
            return true;
        }
    }
    if (watched == m_transcript->viewport() && event->type() == QEvent::MouseButtonPress && isBusy())
        emit requestSelected(m_requestId);
    return QFrame::eventFilter(watched, event);
}

}  // namespace kvscope::ui
