// ModelPickerDialog: choose what to load (GUI thread): a dummy: preset, a model found on this machine
// (Hugging Face cache, LM Studio, llama.cpp), or a GGUF file / HF directory from disk; plus the
// settings fixed at load time (max_model_len, KV budget, CPU threads, the backend: this
// machine or a simulated GPU, and its tensor-parallel size).
#pragma once

#include "engine_config.h"

#include <QDialog>

class QComboBox;
class QLineEdit;
class QListWidget;
class QSpinBox;
class QTimer;

namespace kvscope::ui {

class ModelPickerDialog : public QDialog {
    Q_OBJECT
public:
    ModelPickerDialog(const QString& currentSpec, const EngineConfig& currentConfig, QWidget* parent = nullptr);
    QString spec() const;
    EngineConfig config() const;

private:
    void populate(const QString& currentSpec);
    void showModelContext();
    QListWidget* m_list;
    QLineEdit* m_spec;
    QSpinBox* m_maxModelLen;
    QSpinBox* m_kvMiB;
    QSpinBox* m_threads;
    QComboBox* m_backend;  // data: a --backend value ("auto", "sim:h100-sxm")
    QSpinBox* m_tensorParallel;
    QTimer* m_contextTimer;  // reads the typed model's context once typing pauses
    EngineConfig m_base;
};

}  // namespace kvscope::ui
