// TuningPanel: the engine's knobs, live (GUI thread). Every change is sent to the engine 200 ms after
// the last edit and applies at its next step: scheduler knobs at once, block_size / KV budget / KV type /
// mode / prefix caching by drain-and-rebuild (requests are preempted and recomputed, none is lost). Tooltips
// give each knob's meaning and its vLLM and TensorRT-LLM names.
#pragma once

#include <array>
#include <utility>

#include "engine_config.h"

#include <QTimer>
#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
class QSlider;
class QSpinBox;

namespace kvscope::ui {

class TuningPanel : public QWidget {
    Q_OBJECT
public:
    // What the panel's fields hold; a script's engine settings are checked against them at load, so that
    // the panel and the engine never show different values.
    static constexpr std::pair<int, int> kMaxNumSeqsRange{1, 4096};
    static constexpr std::pair<int, int> kMaxNumBatchedTokensRange{16, 65536};
    static constexpr std::pair<int, int> kKvCacheMiBRange{0, 1 << 20};
    static constexpr std::array<const char*, 4> kKvCacheDtypes{"auto", "float32", "float16", "bfloat16"};  // no aliases

    explicit TuningPanel(QWidget* parent = nullptr);
    EngineConfig config() const;

public slots:
    // The configuration the engine runs with (does not emit configEdited).
    void setConfig(const kvscope::EngineConfig& config);
    void setBlockSize(int blockSize);
    void setMaxNumSeqs(int value);
    void setMaxNumBatchedTokens(int value);
    void setPolicy(const QString& policy);
    void setPrefixCaching(bool on);
    void setMode(const QString& mode);
    void setKvCacheMiB(int mib);
    void setKvCacheDtype(const QString& dtype);
    void setSimSpeed(double pace);  // simulated seconds per wall second, 0 = as fast as possible
    // The engine refused the last change (and runs on as before): shown under the knobs until the next one.
    void showRefusal(const QString& message);

signals:
    void configEdited(const kvscope::EngineConfig& config);

private:
    void edited();

    EngineConfig m_base;
    QTimer m_debounce;
    QSlider* m_blockSize;
    QLabel* m_blockSizeLabel;
    QSlider* m_maxSeqsSlider;
    QSpinBox* m_maxSeqs;
    QSpinBox* m_maxTokens;
    QComboBox* m_policy;
    QCheckBox* m_prefixCaching;
    QComboBox* m_mode;
    QSpinBox* m_kvMiB;
    QComboBox* m_kvDtype;
    QLabel* m_simSpeedLabel;
    QComboBox* m_simSpeed;  // data: sim_pace
    QLabel* m_status;
};

}  // namespace kvscope::ui
