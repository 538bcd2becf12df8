// Finds models already on this machine in the usual places: the Hugging Face hub cache
// (~/.cache/huggingface/hub, or $HF_HOME/hub), LM Studio (~/.lmstudio/models, ~/.cache/lm-studio/models)
// and llama.cpp (~/.cache/llama.cpp). Pure file-system scan, bounded in depth and count.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>

namespace kvscope::ui {

struct DiscoveredModel {
    QString spec;     // what --model takes: a directory or a .gguf path
    QString name;     // display name
    QString source;   // "Hugging Face", "LM Studio", "llama.cpp"
    QString format;   // "hf" or "gguf"
    qint64 bytes = 0;
};

QStringList defaultModelRoots();
// roots: directories to scan (default: defaultModelRoots()).
QList<DiscoveredModel> discoverModels(const QStringList& roots = defaultModelRoots());
QStringList dummyPresets();

}  // namespace kvscope::ui
