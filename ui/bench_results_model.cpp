#include "bench_results_model.h"

#include "json_bridge.h"
#include "metrics/export.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

namespace kvscope::ui {

BenchResultsModel::BenchResultsModel(QObject* parent) : QAbstractTableModel(parent) {}

int BenchResultsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_results.size()); }
int BenchResultsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant BenchResultsModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    // Short headers keep the numeric columns as narrow as their numbers; the tooltip says it in full.
    struct Header {
        const char* name;
        const char* key;  // vLLM's key, "" for kvscope's own columns
        const char* meaning;
    };
    static const Header headers[ColumnCount] = {
        {"Run", "", "The run's name: number, dataset, prompts x input/output length, batching mode"},
        {"out tok/s", "output_throughput", "Output tokens per second"},
        {"TTFT ms", "mean_ttft_ms", "Mean time to first token"},
        {"TPOT ms", "mean_tpot_ms", "Mean time per output token after the first"},
        {"E2EL ms", "mean_e2el_ms", "Mean end-to-end latency"},
        {"p99 TTFT", "p99_ttft_ms", "99th percentile time to first token, ms"},
        {"p99 ITL", "p99_itl_ms", "99th percentile inter-token latency, ms"},
        {"req/s", "request_throughput", "Completed requests per second"},
        {"total tok/s", "total_token_throughput", "Prompt and output tokens per second"},
        {"done", "completed", "Requests completed"},
        {"prompts", "num_prompts", "Requests in the workload"},
        {"mode", "mode", "paged or naive batching"},
        {"source", "", "This session, or the file it was loaded from"},
    };
    const Header& h = headers[section];
    if (role == Qt::DisplayRole) return tr(h.name);
    if (role == Qt::ToolTipRole)
        return *h.key ? tr("%1 (vLLM key: %2)").arg(tr(h.meaning), QString::fromLatin1(h.key)) : tr(h.meaning);
    return {};
}

QVariant BenchResultsModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const BenchResult& r = m_results[size_t(index.row())];
    if (role == Qt::TextAlignmentRole && index.column() > Name && index.column() <= Prompts)
        return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && index.column() == Source) return r.source;
    if (role == Qt::ToolTipRole && index.column() == Name) return r.spec.name;  // the column may elide it
    if (role != Qt::DisplayRole) return {};
    auto num = [&](const char* key, int decimals) { return QString::number(r.summary.value(key).toDouble(), 'f', decimals); };
    switch (Column(index.column())) {
    case Name: return r.spec.name;
    case Source: {
        const QString where = r.source.isEmpty() ? tr("this session") : QFileInfo(r.source).fileName();
        const QString sim = simulationLabel(r);
        const QString target = targetLabel(r);
        return where + ", " + target + (sim.isEmpty() ? QString() : " (" + sim + ")");
    }
    case Mode: return r.config.value("mode").toString();
    case Prompts: return r.summary.value("num_prompts").toInt();
    case Completed: return r.summary.value("completed").toInt();
    case RequestTput: return num("request_throughput", 2);
    case OutputTput: return num("output_throughput", 1);
    case TotalTput: return num("total_token_throughput", 1);
    case MeanTtft: return num("mean_ttft_ms", 1);
    case P99Ttft: return num("p99_ttft_ms", 1);
    case MeanTpot: return num("mean_tpot_ms", 2);
    case P99Itl: return num("p99_itl_ms", 2);
    case MeanE2el: return num("mean_e2el_ms", 1);
    case ColumnCount: break;
    }
    return {};
}

void BenchResultsModel::addResult(const BenchResult& result) {
    beginInsertRows({}, int(m_results.size()), int(m_results.size()));
    m_results.push_back(result);
    endInsertRows();
}

void BenchResultsModel::clear() {
    beginResetModel();
    m_results.clear();
    endResetModel();
}

QJsonObject BenchResultsModel::resultToJson(const BenchResult& r) {
    QJsonObject o = r.summary;  // vLLM keys at the top level, as `vllm bench serve --save-result` writes them
    o["name"] = r.spec.name;
    o["spec"] = r.spec.toJson();
    o["config"] = r.config;
    o["mode"] = r.config.value("mode");
    // Per request, as `kvscope-cli bench --output-requests` writes them (the same records and keys).
    QJsonArray requests;
    for (size_t i = 0; i < r.requests.size(); ++i) {
        nlohmann::json j = request_to_json(r.requests[i], i < r.submitTimes.size() ? r.submitTimes[i] : -1.0,
                                           i < r.errors.size() ? r.errors[i] : "");
        j["index"] = i;
        requests.append(toQJsonObject(j));
    }
    if (!requests.isEmpty()) o["requests"] = requests;
    return o;
}

BenchResult BenchResultsModel::resultFromJson(const QJsonObject& o, const QString& source) {
    BenchResult r;
    r.source = source;
    r.spec = BenchSpec::fromJson(o.value("spec").toObject());
    r.spec.name = o.value("name").toString(QFileInfo(source).completeBaseName());
    r.config = o.value("config").toObject();
    if (!r.config.contains("mode") && o.contains("mode")) r.config["mode"] = o.value("mode");
    r.summary = o;
    for (const char* nested : {"name", "spec", "config", "requests"}) r.summary.remove(nested);
    return r;
}

QString BenchResultsModel::simulationLabel(const BenchResult& r) {
    const QJsonObject sim = r.summary.value("simulated").toObject();
    if (sim.isEmpty()) return {};
    const QString label = sim.value("label").toString();
    return label.isEmpty() ? tr("simulated %1").arg(sim.value("gpu_name").toString()) : label;
}

QString BenchResultsModel::targetLabel(const BenchResult& r) {
    const QJsonObject t = r.summary.value("target").toObject();
    if (t.value("kind").toString() != "remote") return tr("local");
    QStringList parts = {tr("remote"), t.value("engine").toString()};
    const QString model = t.value("model").toString(r.summary.value("model_id").toString());
    if (!model.isEmpty()) parts << model;
    return parts.join(' ');
}

bool BenchResultsModel::mixesSimulatedAndMeasured() const {
    bool simulated = false, measured = false;
    for (const BenchResult& r : m_results) (simulationLabel(r).isEmpty() ? measured : simulated) = true;
    return simulated && measured;
}

int BenchResultsModel::loadFile(const QString& path, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        if (error) *error = tr("%1: cannot open (%2)").arg(path, f.errorString());
        return 0;
    }
    QJsonParseError parseError;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &parseError);
    if (!doc.isObject()) {
        if (error) *error = tr("%1: not a JSON object (%2)").arg(path, parseError.errorString());
        return 0;
    }
    const QJsonObject o = doc.object();
    int loaded = 0;
    if (o.value("benchmarks").isArray()) {  // a kvscope session export
        for (const QJsonValue& v : o.value("benchmarks").toArray()) {
            addResult(resultFromJson(v.toObject(), path));
            ++loaded;
        }
    } else if (o.contains("paged") && o.contains("naive")) {  // kvscope-cli bench --compare naive
        for (const char* mode : {"paged", "naive"}) {
            BenchResult r = resultFromJson(o.value(mode).toObject(), path);
            r.spec.name = QFileInfo(path).completeBaseName() + " " + mode;
            r.config["mode"] = mode;
            addResult(r);
            ++loaded;
        }
    } else if (o.contains("output_throughput") || o.contains("completed")) {  // one run with vLLM keys
        addResult(resultFromJson(o, path));
        ++loaded;
    }
    if (!loaded && error) *error = tr("%1: no benchmark results in it (expected vLLM bench keys or a kvscope session)").arg(path);
    return loaded;
}

}  // namespace kvscope::ui
