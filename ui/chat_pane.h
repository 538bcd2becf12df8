// ChatPane: one conversation (GUI thread). Its own system prompt, sampling settings, priority and
// colour (the colour of its requests everywhere: block map, charts, tables). Streams the reply token
// by token from EngineController::requestUpdated, rendered with the model's chat template; stop and
// regenerate; shows the current request's TTFT, tokens/s, blocks held and state.
#pragma once

#include "engine_types.h"

#include <QColor>
#include <QFrame>

#include <vector>

class QCheckBox;
class QDialog;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTextEdit;
class QToolButton;
class QWidget;

namespace kvscope::ui {

class ElidedLabel;
class EngineController;

class ChatPane : public QFrame {
    Q_OBJECT
public:
    ChatPane(EngineController* controller, int number, const QColor& color, QWidget* parent = nullptr);

    QString title() const { return m_title; }
    QColor color() const { return m_color; }
    QString currentRequestId() const { return m_requestId; }
    // The pane's latest request, running or finished ("" before the first): what clicking the pane selects.
    QString lastRequestId() const { return m_lastRequestId; }
    bool isBusy() const { return !m_requestId.isEmpty(); }
    QString lastReply() const { return m_lastReply; }
    // The tooltip of the reply token under a point of the transcript's viewport: its probability and
    // alternatives (settings: Alternatives), or "" where there is none.
    QString tokenToolTipAt(const QPoint& viewportPos) const;
    QString inputText() const;
    SamplingParams samplingParams() const;
    int priority() const;

    void setSystemPrompt(const QString& text);
    void setSamplingParams(const SamplingParams& params);
    void setPriority(int priority);
    void setInputText(const QString& text);
    QString simulationText() const;  // the simulation label the pane shows, "" on a real backend
    void focusInput();

public slots:
    void send();                          // sends the input box
    void sendText(const QString& text);   // sends this text as the next user message
    void stop();
    void regenerate();
    void clearConversation();
    void setColor(const QColor& color);

signals:
    void requestSubmitted(const QString& requestId);
    void replyFinished(const QString& requestId, const QString& text);
    void requestSelected(const QString& requestId);
    void closeRequested(kvscope::ui::ChatPane* pane);
    void activated(kvscope::ui::ChatPane* pane);
    // The keyboard focus came into the pane by Tab or Backtab (a click or a returning window do not count).
    void tabbedInto(kvscope::ui::ChatPane* pane);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void buildSettings();
    void updateLimits();
    void submitConversation();
    void applyProgress(const RequestProgress& p);
    void appendRole(const QString& role);
    void appendText(const QString& text, const QString& toolTip = {});
    void updateButtons();
    void updateColorSwatch();

    EngineController* m_controller;
    QString m_title;
    QColor m_color;
    std::vector<ChatMessage> m_history;  // completed turns (user, assistant, ...)
    QString m_requestId;      // the request in flight, "" when none
    QString m_lastRequestId;  // the latest submitted, kept after it finishes
    bool m_historyTrimmed = false;  // the engine left out older messages of the current request
    bool m_followEnd = true;        // the transcript's view is at its end: new text keeps it there
    bool m_streamed = false;        // the current request produced a token (a reasoning model's may show no text)
    QString m_reply;
    QString m_heldToolTip;  // alternatives of tokens whose text has not arrived yet
    QString m_lastReply;

    QToolButton* m_colorButton;
    QLabel* m_titleLabel;
    QLabel* m_stateLabel;
    ElidedLabel* m_statsLabel;
    QLabel* m_simulationLabel;  // "simulated <GPU>, <model>, ..."; hidden on a real backend
    QToolButton* m_settingsButton;
    QDialog* m_settings;
    QLabel* m_maxTokensCheck;
    qint64 m_poolTokens = 0;  // tokens the KV pool held at the last check of max tokens
    QPlainTextEdit* m_systemPrompt;
    QDoubleSpinBox* m_temperature;
    QDoubleSpinBox* m_topP;
    QSpinBox* m_topK;
    QSpinBox* m_maxTokens;
    QSpinBox* m_seed;
    QSpinBox* m_alternatives;
    QSpinBox* m_priority;
    QCheckBox* m_useTemplate;
    QTextEdit* m_transcript;
    QPlainTextEdit* m_input;
    QPushButton* m_sendButton;
    QPushButton* m_stopButton;
    QPushButton* m_regenerateButton;
};

}  // namespace kvscope::ui
