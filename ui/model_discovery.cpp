#include "model_discovery.h"

#include <QDir>
#include <QDirIterator>
#include <QFileInfo>

namespace kvscope::ui {

QStringList defaultModelRoots() {
    const QString home = QDir::homePath();
    QString hfHome = qEnvironmentVariable("HF_HOME");
    if (hfHome.isEmpty()) hfHome = home + "/.cache/huggingface";
    return {hfHome + "/hub", home + "/.lmstudio/models", home + "/.cache/lm-studio/models", home + "/.cache/llama.cpp"};
}

QStringList dummyPresets() { return {"dummy:tiny", "dummy:smollm-135m", "dummy:qwen2-0.5b", "dummy:llama-1b"}; }

namespace {

QString sourceOf(const QString& root) {
    if (root.contains("huggingface")) return QStringLiteral("Hugging Face");
    if (root.contains("lmstudio") || root.contains("lm-studio")) return QStringLiteral("LM Studio");
    if (root.contains("llama.cpp")) return QStringLiteral("llama.cpp");
    return QStringLiteral("folder");
}

qint64 dirWeightBytes(const QString& dir) {
    qint64 total = 0;
    for (const QFileInfo& f : QDir(dir).entryInfoList({"*.safetensors"}, QDir::Files)) total += f.size();
    return total;
}

}  // namespace

QList<DiscoveredModel> discoverModels(const QStringList& roots) {
    QList<DiscoveredModel> out;
    constexpr int kMaxEntries = 20000;
    for (const QString& root : roots) {
        if (!QFileInfo(root).isDir()) continue;
        const QString source = sourceOf(root);
        int seen = 0;
        QDirIterator it(root, QDir::Files | QDir::NoDotAndDotDot, QDirIterator::Subdirectories | QDirIterator::FollowSymlinks);
        while (it.hasNext() && ++seen < kMaxEntries) {
            const QString path = it.next();
            const QFileInfo info = it.fileInfo();
            if (path.endsWith(".gguf", Qt::CaseInsensitive)) {
                out.push_back({path, info.completeBaseName(), source, "gguf", info.size()});
            } else if (info.fileName() == "config.json" && QFileInfo::exists(info.dir().filePath("tokenizer.json"))) {
                const QString dir = info.absolutePath();
                // HF hub layout: models--org--name/snapshots/<hash>/config.json
                QString name = info.dir().dirName();
                const QString repo = dir.section('/', -3, -3);
                if (repo.startsWith("models--")) name = repo.mid(8).replace("--", "/");
                out.push_back({dir, name, source, "hf", dirWeightBytes(dir)});
            }
        }
    }
    return out;
}

}  // namespace kvscope::ui
