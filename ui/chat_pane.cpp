#include "chat_pane.h"

#include "elided_label.h"
#include "engine_controller.h"
#include "runner/logprobs.h"

#include <QAbstractTextDocumentLayout>
#include <QCheckBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QColorDialog>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QLabel>
#include <QPainter>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QTextEdit>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <utility>

namespace kvscope::ui {

namespace {
// The control that fixes a rejection, named as the window shows it (the engine's message knows flags).
QString fixHint(const QString& message) {
    if (message.contains("no model is loaded")) return ChatPane::tr("Load a model: Load model... (Ctrl+O).");
    if (message.contains("does not fit max_model_len"))
        return ChatPane::tr("Clear the conversation (Clear), or reload the model with a larger max_model_len (Load model...).");
    if (message.contains("KV blocks"))
        return ChatPane::tr("Lower Max tokens (Settings...), or raise KV cache memory in the Engine panel.");
    return {};
}
}  // namespace

ChatPane::ChatPane(EngineController* controller, int number, const QColor& color, QWidget* parent)
    : QFrame(parent), m_controller(controller), m_title(tr("Pane %1").arg(number)), m_color(color) {
    setFrameShape(QFrame::StyledPanel);
    setObjectName("ChatPane");

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
    m_settingsButton->setText(tr("Settings..."));
    m_settingsButton->setAutoRaise(true);
    m_settingsButton->setToolTip(tr("System prompt, sampling settings and priority of this pane"));
    auto* clearButton = new QToolButton(this);
    clearButton->setObjectName("clearButton");
    clearButton->setText(tr("Clear"));
    clearButton->setAutoRaise(true);
    clearButton->setToolTip(tr("Clear conversation: forget every turn, so the next message starts a new one"));
    connect(clearButton, &QToolButton::clicked, this, &ChatPane::clearConversation);
    auto* closeButton = new QToolButton(this);
    closeButton->setText(QString::fromUtf8("\u2715"));
    closeButton->setAutoRaise(true);
    closeButton->setToolTip(tr("Close this pane (aborts its request)"));
    connect(closeButton, &QToolButton::clicked, this, [this] { emit closeRequested(this); });
    auto* header = new QHBoxLayout;
    header->setContentsMargins(0, 0, 0, 0);
    header->setSpacing(2);  // the pane's narrowest width is this row's: it sets the pane column's at 1024x700
    header->addWidget(m_colorButton);
    header->addWidget(m_titleLabel);
    header->addWidget(m_stateLabel);
    header->addStretch(1);
    header->addWidget(clearButton);
    header->addWidget(m_settingsButton);
    header->addWidget(closeButton);
    setTabOrder(clearButton, m_settingsButton);  // as on screen: Clear, Settings..., close
    setTabOrder(m_settingsButton, closeButton);

    buildSettings();
    connect(m_settingsButton, &QToolButton::clicked, this, [this] {
        m_settings->show();
        m_settings->raise();
        m_settings->activateWindow();
    });

    m_transcript = new QTextEdit(this);
    m_transcript->setReadOnly(true);
    m_transcript->setTabChangesFocus(true);
    m_transcript->setPlaceholderText(tr("Type a message below and press Ctrl+Return"));
    // The transcript follows its end while the user has it there: a range that grows (the layout of new text
    // comes after the insert, so the maximum read right after it was stale, and a rejection's message was
    // left below the view) keeps the end in view; scrolling up stops following until the end is reached.
    QScrollBar* bar = m_transcript->verticalScrollBar();
    connect(bar, &QScrollBar::valueChanged, this, [this, bar](int value) { m_followEnd = value >= bar->maximum() - 4; });
    connect(bar, &QScrollBar::rangeChanged, this, [this, bar](int, int max) {
        if (m_followEnd) bar->setValue(max);
    });
    m_transcript->viewport()->installEventFilter(this);

    m_statsLabel = new ElidedLabel(Qt::ElideRight, this);
    m_statsLabel->setObjectName("paneStats");
    // The state and the figures change with every engine update (up to 60 a second): sized so that their
    // text never changes the pane's size hints. A changed hint relaid the pane splitter out, resized every
    // pane and laid each transcript out again: 10-40 ms a frame, the largest stall of a run.
    int stateWidth = 0;
    for (const QString& state : {tr("idle"), tr("waiting"), statusName(RequestStatus::RUNNING),
                                 statusName(RequestStatus::PREEMPTED), tr("finished"), tr("stopped"), tr("rejected"),
                                 tr("failed")})
        stateWidth = std::max(stateWidth, m_stateLabel->fontMetrics().horizontalAdvance(state));
    m_stateLabel->setFixedSize(stateWidth + 4, m_stateLabel->sizeHint().height());
    // One line, as wide as the pane gives: a narrow pane drops the last figures rather than growing for them.
    m_statsLabel->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
    m_statsLabel->setFixedHeight(m_statsLabel->fontMetrics().height() + 2);
    m_statsLabel->setToolTip(tr("TTFT: first token - arrival. tok/s: output tokens after the first / decode time. "
                                "blocks: KV blocks in this request's block table (click to show them in the block map)."));

    m_input = new QPlainTextEdit(this);
    m_input->setObjectName("messageInput");
    m_input->setPlaceholderText(tr("Message (Ctrl+Return to send)"));
    m_input->setMaximumHeight(64);
    m_input->setTabChangesFocus(true);  // Tab leaves for Send; a tab character is never what a prompt needs
    m_input->installEventFilter(this);
    m_sendButton = new QPushButton(tr("Send"), this);
    m_sendButton->setObjectName("sendButton");
    m_sendButton->setToolTip(tr("Send (Ctrl+Return)"));
    m_stopButton = new QPushButton(tr("Stop"), this);
    m_stopButton->setToolTip(tr("Abort this pane's request (Esc)"));
    m_regenerateButton = new QPushButton(tr("Regenerate"), this);
    m_regenerateButton->setObjectName("regenerateButton");
    m_regenerateButton->setToolTip(tr("Drop the last reply and generate it again"));
    connect(m_sendButton, &QPushButton::clicked, this, &ChatPane::send);
    connect(m_stopButton, &QPushButton::clicked, this, &ChatPane::stop);
    connect(m_regenerateButton, &QPushButton::clicked, this, &ChatPane::regenerate);
    // From the message box Tab reaches Send first, then the other buttons of the row.
    setTabOrder(m_input, m_sendButton);
    setTabOrder(m_sendButton, m_regenerateButton);
    setTabOrder(m_regenerateButton, m_stopButton);
    auto* buttons = new QHBoxLayout;
    buttons->addStretch();
    buttons->addWidget(m_regenerateButton);
    buttons->addWidget(m_stopButton);
    buttons->addWidget(m_sendButton);

    // The replies are real tokens, but their timing (TTFT, tok/s) is a simulated GPU's: said above them.
    m_simulationLabel = new QLabel(this);
    m_simulationLabel->setObjectName("paneSimulation");
    m_simulationLabel->setStyleSheet("color: #e0a040");
    m_simulationLabel->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    auto showSimulation = [this] {
        const QString label = m_controller->modelSummary().simulationLabel;
        m_simulationLabel->setText(label);
        m_simulationLabel->setToolTip(label);
        m_simulationLabel->setVisible(!label.isEmpty());
    };
    connect(m_controller, &EngineController::modelLoaded, this, showSimulation);
    showSimulation();

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    layout->setSpacing(4);
    layout->addLayout(header);
    layout->addWidget(m_simulationLabel);
    layout->addWidget(m_transcript, 1);
    layout->addWidget(m_statsLabel);
    layout->addWidget(m_input);
    layout->addLayout(buttons);
    // Focus coming into any field or button of the pane is seen (activated, tabbedInto), not only the message box.
    for (QWidget* w : findChildren<QWidget*>())
        if (w->focusPolicy() & Qt::TabFocus) w->installEventFilter(this);

    connect(m_controller, &EngineController::requestUpdated, this, [this](const RequestProgress& p) {
        if (p.requestId == m_requestId) applyProgress(p);
    });
    connect(m_controller, &EngineController::historyTrimmed, this, [this](const QString& id, int dropped) {
        if (id != m_requestId) return;
        // The engine left them out; later messages need not resend them either.
        const size_t n = std::min(m_history.size(), size_t(dropped));
        m_history.erase(m_history.begin(), m_history.begin() + std::ptrdiff_t(n));
        m_historyTrimmed = true;
        appendText(tr("[the conversation outgrew the context (max_model_len %1): its %2 oldest messages were "
                      "left out]\n").arg(m_controller->config().scheduler.max_model_len).arg(dropped));
    });
    connect(m_controller, &EngineController::requestRejected, this, [this](const QString& id, const QString& message) {
        if (id != m_requestId) return;
        // With the older messages already left out, what does not fit is this message itself: clearing
        // the conversation would not help.
        const QString hint = m_historyTrimmed && message.contains("does not fit max_model_len")
                                 ? tr("This message alone is too long: shorten it, or reload the model with a larger "
                                      "max_model_len (Load model...).")
                                 : fixHint(message);
        // A request that already streamed text was not refused: it broke off (a remote server that died
        // mid-stream, a timeout).
        const bool started = m_streamed || !m_reply.isEmpty();
        appendText((started ? tr("\n[failed: %1] %2") : tr("\n[rejected: %1] %2")).arg(message, hint));
        m_requestId.clear();
        m_stateLabel->setText(started ? tr("failed") : tr("rejected"));
        updateButtons();
    });
    updateColorSwatch();
    updateButtons();
}

void ChatPane::buildSettings() {
    // A form in a dialog of its own: every field at its full width, however narrow the pane. Changes
    // apply to the next message at once; Close (or Escape) only hides it.
    m_settings = new QDialog(this);
    m_settings->setWindowTitle(tr("%1 settings").arg(m_title));
    m_settings->setObjectName("paneSettings");
    m_systemPrompt = new QPlainTextEdit(m_settings);
    m_systemPrompt->setPlaceholderText(tr("optional: how the model should behave"));
    m_systemPrompt->setTabChangesFocus(true);  // a tab typed here would be sent to the model
    m_systemPrompt->setMinimumHeight(60);
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
    m_topK->setSpecialValueText(tr("off"));
    m_topK->setToolTip(tr("top_k (vLLM top_k, TensorRT-LLM top_k): 0 = off"));
    m_maxTokens = new QSpinBox(m_settings);
    m_maxTokens->setObjectName("maxTokens");
    m_maxTokens->setRange(1, 8192);
    m_maxTokens->setValue(128);
    m_maxTokens->setToolTip(tr("max_tokens (vLLM max_tokens, TensorRT-LLM max_new_tokens): output tokens at most"));
    m_maxTokensCheck = new QLabel(m_settings);
    m_maxTokensCheck->setObjectName("maxTokensCheck");
    m_maxTokensCheck->setWordWrap(true);
    connect(m_maxTokens, &QSpinBox::valueChanged, this, &ChatPane::updateLimits);
    connect(m_controller, &EngineController::configChanged, this, &ChatPane::updateLimits);
    // A rebuild or a reload changes the pool: checked again when a snapshot of another size arrives.
    connect(m_controller, &EngineController::snapshotUpdated, this, [this](const std::shared_ptr<const KvCacheSnapshot>& s) {
        if (s && qint64(s->num_blocks) * s->block_size != m_poolTokens) updateLimits();
    });
    m_seed = new QSpinBox(m_settings);
    m_seed->setRange(-1, 1000000);
    m_seed->setValue(-1);
    m_seed->setSpecialValueText(tr("random"));
    m_seed->setToolTip(tr("seed (vLLM SamplingParams.seed, TensorRT-LLM random_seed): same text alone or batched"));
    m_alternatives = new QSpinBox(m_settings);
    m_alternatives->setObjectName("alternatives");
    m_alternatives->setRange(-1, kMaxLogprobs);
    m_alternatives->setValue(5);
    m_alternatives->setSpecialValueText(tr("off"));
    m_alternatives->setToolTip(tr("logprobs (vLLM SamplingParams.logprobs, OpenAI top_logprobs): hover a token of a "
                                  "reply to see its probability and this many alternatives; 0 = its own only"));
    m_priority = new QSpinBox(m_settings);
    m_priority->setRange(-100, 100);
    m_priority->setToolTip(tr("priority (vLLM priority; used when the policy is 'priority'): lower is scheduled first, "
                              "higher is preempted first"));
    m_useTemplate = new QCheckBox(tr("render with the model's chat template"), m_settings);
    m_useTemplate->setChecked(true);
    m_useTemplate->setToolTip(tr("Render the conversation with the model's chat template; off = send the last message as raw text"));
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, m_settings);
    connect(buttons, &QDialogButtonBox::rejected, m_settings, &QDialog::hide);
    auto* form = new QFormLayout(m_settings);
    form->addRow(tr("System prompt"), m_systemPrompt);
    form->addRow(tr("Temperature"), m_temperature);
    form->addRow(tr("Top-p"), m_topP);
    form->addRow(tr("Top-k"), m_topK);
    form->addRow(tr("Max tokens"), m_maxTokens);
    form->addRow(QString(), m_maxTokensCheck);
    form->addRow(tr("Seed"), m_seed);
    form->addRow(tr("Alternatives"), m_alternatives);
    form->addRow(tr("Priority"), m_priority);
    form->addRow(tr("Chat template"), m_useTemplate);
    form->addRow(buttons);
    m_settings->setMinimumWidth(420);
    updateLimits();
}

void ChatPane::updateLimits() {
    // Checked when entered, not when the engine rejects it in the transcript: max_tokens is held to
    // max_model_len - 1 (a prompt needs at least a token) and compared with the tokens the pool holds.
    const int maxLen = m_controller->isModelLoaded() ? m_controller->config().scheduler.max_model_len : 0;
    if (maxLen > 1) m_maxTokens->setMaximum(maxLen - 1);
    const auto kv = m_controller->latestSnapshot();
    const qint64 poolTokens = m_poolTokens = kv ? qint64(kv->num_blocks) * kv->block_size : 0;
    QStringList notes;
    if (maxLen > 1)
        notes << tr("At most %1: the model's context (max_model_len %2, set in Load model...) also holds the prompt.")
                     .arg(maxLen - 1).arg(maxLen);
    if (poolTokens > 0 && m_maxTokens->value() >= poolTokens)
        notes << tr("<b>The KV pool holds %1 tokens</b>: a reply this long is rejected. Lower Max tokens, or raise KV "
                    "cache memory in the Engine panel.").arg(poolTokens);
    m_maxTokensCheck->setText(notes.join(' '));
    m_maxTokensCheck->setVisible(!notes.isEmpty());
}

QString ChatPane::inputText() const { return m_input->toPlainText(); }

SamplingParams ChatPane::samplingParams() const {
    SamplingParams p;
    p.temperature = float(m_temperature->value());
    p.top_p = float(m_topP->value());
    p.top_k = m_topK->value();
    p.max_tokens = m_maxTokens->value();
    if (m_seed->value() >= 0) p.seed = uint64_t(m_seed->value());
    if (m_alternatives->value() >= 0) p.logprobs = m_alternatives->value();
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
    m_alternatives->setValue(p.logprobs.value_or(-1));
}

void ChatPane::setPriority(int priority) { m_priority->setValue(priority); }
void ChatPane::setInputText(const QString& text) { m_input->setPlainText(text); }
void ChatPane::focusInput() { m_input->setFocus(Qt::ShortcutFocusReason); }

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
    m_heldToolTip.clear();
    appendRole(m_title == QString() ? tr("Model") : tr("Model"));
    m_historyTrimmed = false;
    m_streamed = false;
    m_requestId = m_lastRequestId = m_controller->submitRequest(c, m_title, m_color);
    m_stateLabel->setText(tr("waiting"));
    m_statsLabel->setFullText({});
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
    m_reply += p.textDelta;
    m_streamed = m_streamed || p.numOutputTokens > 0;
    // One edit block for all of the update's tokens: the transcript is laid out once, not once per token.
    QTextCursor edit(m_transcript->document());
    edit.beginEditBlock();
    if (p.pieces.empty() && !p.textDelta.isEmpty()) appendText(p.textDelta);
    for (const RequestProgress::TextPiece& piece : p.pieces) {
        m_heldToolTip += (m_heldToolTip.isEmpty() ? "" : "<hr>") + piece.toolTip;
        if (piece.text.isEmpty()) continue;
        appendText(piece.text, std::exchange(m_heldToolTip, {}));
    }
    edit.endEditBlock();
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
    if (!p.finished && !m_controller->isRemote()) stats << tr("<b>%1</b> blocks").arg(blocks);  // a server shows no block table
    if (p.numPreemptions) stats << tr("%1 preempted").arg(p.numPreemptions);
    if (p.numCachedTokens) stats << tr("%1 cached").arg(p.numCachedTokens);
    m_statsLabel->setParts(stats, QString::fromUtf8(" \u00b7 "));
    if (p.finished) {
        const QString id = m_requestId;
        m_lastReply = m_reply;
        if (p.finishReason != FinishReason::ABORT || !m_reply.isEmpty())
            m_history.push_back({"assistant", m_reply.toStdString()});
        if (p.finishReason == FinishReason::ABORT) appendText(tr(" [stopped]"));
        // Tokens that decode to no visible text (random dummy weights pick control and partial UTF-8
        // tokens as readily as words) would leave an empty turn that looks like a failure.
        else if (p.numOutputTokens > 0 && m_reply.trimmed().isEmpty())
            appendText(tr("[%n token(s), no printable text]", nullptr, p.numOutputTokens));
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
    // "You" keeps the document's own text colour, which follows a theme change; the model's turns have
    // the pane's colour.
    if (role != tr("You")) f.setForeground(m_color);
    c.insertText(role + "\n", f);
}

void ChatPane::appendText(const QString& text, const QString& toolTip) {
    QTextCursor c(m_transcript->document());
    c.movePosition(QTextCursor::End);
    QTextCharFormat f;
    f.setToolTip(toolTip);
    c.insertText(text, f);  // the end stays in view if it was (m_followEnd)
}

QString ChatPane::tokenToolTipAt(const QPoint& viewportPos) const {
    const QPointF at = QPointF(viewportPos) + QPointF(m_transcript->horizontalScrollBar()->value(),
                                                      m_transcript->verticalScrollBar()->value());
    const int position = m_transcript->document()->documentLayout()->hitTest(at, Qt::ExactHit);
    if (position < 0) return {};
    // A cursor's format is that of the character before it.
    QTextCursor c(m_transcript->document());
    c.setPosition(position);
    if (!c.movePosition(QTextCursor::NextCharacter)) return {};
    return c.charFormat().toolTip();
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
    if (event->type() == QEvent::FocusIn) {
        const Qt::FocusReason reason = static_cast<QFocusEvent*>(event)->reason();
        if ((reason == Qt::TabFocusReason || reason == Qt::BacktabFocusReason) && static_cast<QWidget*>(watched)->window() == window())
            emit tabbedInto(this);
    }
    if (watched == m_input && event->type() == QEvent::KeyPress) {
        auto* key = static_cast<QKeyEvent*>(event);
        if ((key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) && (key->modifiers() & Qt::ControlModifier)) {
            send();
            return true;
        }
    }
    if (watched == m_transcript->viewport() && event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QString tip = tokenToolTipAt(help->pos());
        if (tip.isEmpty()) QToolTip::hideText();
        else QToolTip::showText(help->globalPos(), tip, m_transcript->viewport());
        return true;
    }
    // A finished request stays selectable: its row in the table, its numbers.
    if (watched == m_transcript->viewport() && event->type() == QEvent::MouseButtonPress && !m_lastRequestId.isEmpty())
        emit requestSelected(m_lastRequestId);
    return QFrame::eventFilter(watched, event);
}

}  // namespace kvscope::ui

namespace kvscope::ui {
QString ChatPane::simulationText() const { return m_simulationLabel->isHidden() ? QString() : m_simulationLabel->text(); }
}  // namespace kvscope::ui
