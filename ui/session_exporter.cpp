#include "session_exporter.h"

#include "bench_results_model.h"
#include "json_bridge.h"
#include "latency_summary.h"
#include "session_data.h"

#include "metrics/export.h"

#include <QDateTime>
#include <QDir>
#include <QLocale>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTextStream>
#include <QWidget>
#include <qcustomplot.h>

namespace kvscope::ui {

namespace {

// A number for the CSV files as session.json writes it (the shortest text that reads back the same double):
// QTextStream's default 6 digits made requests.csv's latencies differ from session.json's (12.5225 against
// 12.522468999999997), by whole milliseconds in long sessions.
QString real(double v) { return QString::number(v, 'g', QLocale::FloatingPointShortest); }

// A request's latency for requests.csv, as request_latencies_ms gives it: "" where it is null (a failed request
// has no first token, a one-token one no TPOT; -1000 had gone out as a TTFT).
QString msCsv(const nlohmann::json& latencies, const char* key) {
    const auto v = latencies.find(key);
    return v != latencies.end() && v->is_number() ? real(v->get<double>()) : QString();
}

QJsonObject stepJson(const StepRecord& r) {
    const StepStats& s = r.stats;
    QJsonObject o{{"step", double(s.step)},
                  {"start_time", s.start_time},
                  {"duration", s.duration},
                  {"mode", QString::fromStdString(s.mode)},
                  {"num_running", s.num_running},
                  {"num_waiting", s.num_waiting},
                  {"num_scheduled_seqs", s.num_scheduled_seqs},
                  {"num_prefill_tokens", s.num_prefill_tokens},
                  {"num_decode_tokens", s.num_decode_tokens},
                  {"num_padding_tokens", s.num_padding_tokens},
                  {"num_output_tokens", r.numOutputTokens},
                  {"max_num_seqs", s.max_num_seqs},
                  {"max_num_batched_tokens", s.max_num_batched_tokens},
                  {"block_size", s.block_size},
                  {"num_blocks", s.num_blocks},
                  {"num_used_blocks", s.num_used_blocks},
                  {"num_cached_free_blocks", s.num_cached_free_blocks},
                  {"num_free_blocks", s.num_free_blocks},
                  {"kv_usage", s.kv_usage},
                  {"kv_waste", s.kv_waste},
                  {"prefix_cache_queries", double(s.prefix_cache_queries)},
                  {"prefix_cache_hits", double(s.prefix_cache_hits)},
                  {"num_preemptions", s.num_preemptions},
                  {"weights_bytes", double(s.memory.weights_bytes)},
                  {"kv_pool_bytes", double(s.memory.kv_pool_bytes)},
                  {"activation_bytes", double(s.memory.activation_bytes)},
                  {"host_rss_bytes", double(s.memory.host_rss_bytes)},
                  {"device_used_bytes", double(s.memory.device_used_bytes)}};
    if (!s.event.empty()) o["event"] = QString::fromStdString(s.event);
    return o;
}

QJsonObject requestJson(const RequestRecord& r) {
    QJsonObject o{{"request_id", r.requestId},
                  {"origin", r.origin},
                  {"color", r.color.name()},
                  {"status", statusName(r.status)},
                  {"finish_reason", finishReasonName(r.finishReason)},
                  {"num_prompt_tokens", r.numPromptTokens},
                  {"num_output_tokens", r.numOutputTokens},
                  {"num_cached_tokens", r.numCachedTokens},
                  {"num_preemptions", r.numPreemptions},
                  {"text", r.text}};
    if (!r.error.isEmpty()) o["error"] = r.error;
    if (r.metrics) {
        const RequestMetrics& m = *r.metrics;
        o["arrival_time"] = m.arrival_time;
        o["first_scheduled_time"] = m.first_scheduled_time;
        QJsonArray chunks;  // with preemption_times and the tokens: the request timeline's phases
        for (double t : m.prefill_chunk_times) chunks.append(t);
        o["prefill_chunk_times"] = chunks;
        o["finish_time"] = m.finish_time;
        const QJsonObject latencies = toQJsonObject(request_latencies_ms(m));
        for (auto it = latencies.begin(); it != latencies.end(); ++it) o[it.key()] = it.value();
        QJsonArray preemptions;
        for (double t : m.preemption_times) preemptions.append(t);
        o["preemption_times"] = preemptions;
        QJsonArray itl;
        for (double g : m.itls()) itl.append(g * 1e3);
        o["itl_ms"] = itl;
    }
    return o;
}

bool writeFile(const QString& path, const QByteArray& bytes, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size()) {
        if (error) *error = QString("%1: cannot write (%2)").arg(path, f.errorString());
        return false;
    }
    return true;
}

QString csvField(const QString& s) { return QString::fromStdString(csv_quote(s.toStdString())); }

}  // namespace

QJsonObject sessionJson(const SessionExportInputs& in) {
    const SessionData& s = *in.session;
    QJsonObject o;
    o["kvscope_version"] = QString::fromStdString(kvscope_version());
    o["git_revision"] = QString::fromStdString(git_revision());
    o["date"] = QDateTime::currentDateTime().toString(Qt::ISODate);
    o["model"] = QJsonObject{{"spec", in.model.spec},
                             {"name", in.model.name},
                             {"format", in.model.format},
                             {"architecture", in.model.architecture},
                             {"num_params", double(in.model.numParams)},
                             {"weight_bytes", double(in.model.weightBytes)},
                             {"kv_bytes_per_token", double(in.model.kvBytesPerToken)},
                             {"kv_cache_dtype", in.model.kvCacheDtype},
                             {"chat_template", in.model.chatTemplate}};
    o["config"] = toQJsonObject(engine_config_to_json(in.config));
    // Which engine answered (kvscope-cli bench's "target"); a remote one has no local knobs to report.
    if (in.target.isEmpty()) {
        o["target"] = QJsonObject{{"kind", "local"}};
    } else {
        o["target"] = in.target;
        o.remove("config");
        o["server_metrics"] = in.serverMetrics;
    }
    // kvscope-cli bench's key: a simulated session says so, with the GPU and the step-time model version.
    if (!in.model.simulation.isEmpty()) o["simulated"] = in.model.simulation;
    // vLLM `bench serve` keys over every finished request of the session, at the top level.
    const QJsonObject summary = summarizeRequests(s.finishedMetrics());
    for (auto it = summary.begin(); it != summary.end(); ++it) o[it.key()] = it.value();
    o["num_requests"] = int(s.requests().size());
    o["num_steps"] = int(s.steps().size());
    o["metric_definitions"] = metricDefinitions();
    // A failed script's export looked like a finished one (only the exit code told them apart).
    if (!in.script.isEmpty()) o["script"] = in.script;
    o["gui"] = in.gui;
    if (in.gui.contains("gui_max_stall_ms")) o["gui_max_stall_ms"] = in.gui.value("gui_max_stall_ms");
    QJsonArray events;
    for (const SessionEvent& e : s.events())
        events.append(QJsonObject{{"time", e.time}, {"step", double(e.step)}, {"event", e.text}});
    o["events"] = events;
    QJsonArray timeline;
    for (const StepRecord& r : s.steps()) timeline.append(stepJson(r));
    o["timeline"] = timeline;
    QJsonArray requests;
    for (const RequestRecord& r : s.requests()) requests.append(requestJson(r));
    o["requests"] = requests;
    QJsonArray benchmarks;
    for (const BenchResult& b : in.benchmarks) benchmarks.append(BenchResultsModel::resultToJson(b));
    o["benchmarks"] = benchmarks;
    return o;
}

bool exportSession(const QString& dir, const SessionExportInputs& in, QString* error) {
    QDir d(dir);
    if (!d.mkpath("charts")) {
        if (error) *error = QString("%1: cannot create the directory").arg(dir);
        return false;
    }
    if (!writeFile(d.filePath("session.json"), QJsonDocument(sessionJson(in)).toJson(QJsonDocument::Indented), error))
        return false;

    QString csv;
    QTextStream req(&csv);
    req << "request_id,origin,status,finish_reason,num_prompt_tokens,num_output_tokens,num_cached_tokens,"
           "num_preemptions,arrival_time,ttft_ms,tpot_ms,e2el_ms\n";
    for (const RequestRecord& r : in.session->requests()) {
        const auto& m = r.metrics;
        const nlohmann::json latencies = m ? request_latencies_ms(*m) : nlohmann::json::object();
        req << csvField(r.requestId) << ',' << csvField(r.origin) << ',' << statusName(r.status) << ','
            << finishReasonName(r.finishReason) << ',' << r.numPromptTokens << ',' << r.numOutputTokens << ','
            << r.numCachedTokens << ',' << r.numPreemptions << ',' << real(m ? m->arrival_time : r.arrivalTime) << ','
            << msCsv(latencies, "ttft_ms") << ',' << msCsv(latencies, "tpot_ms") << ',' << msCsv(latencies, "e2el_ms") << '\n';
    }
    req.flush();
    if (!writeFile(d.filePath("requests.csv"), csv.toUtf8(), error)) return false;

    QString steps;
    QTextStream st(&steps);
    st << "step,start_time,duration,mode,num_running,num_waiting,num_scheduled_seqs,num_prefill_tokens,"
          "num_decode_tokens,num_output_tokens,max_num_seqs,max_num_batched_tokens,block_size,num_blocks,"
          "num_used_blocks,num_cached_free_blocks,num_free_blocks,kv_usage,kv_waste,num_preemptions,host_rss_bytes,event\n";
    for (const StepRecord& r : in.session->steps()) {
        const StepStats& s = r.stats;
        st << s.step << ',' << real(s.start_time) << ',' << real(s.duration) << ',' << QString::fromStdString(s.mode) << ','
           << s.num_running << ',' << s.num_waiting << ',' << s.num_scheduled_seqs << ',' << s.num_prefill_tokens << ','
           << s.num_decode_tokens << ',' << r.numOutputTokens << ',' << s.max_num_seqs << ',' << s.max_num_batched_tokens
           << ',' << s.block_size << ',' << s.num_blocks << ',' << s.num_used_blocks << ',' << s.num_cached_free_blocks
           << ',' << s.num_free_blocks << ',' << real(s.kv_usage) << ',' << real(s.kv_waste) << ',' << s.num_preemptions << ','
           << s.memory.host_rss_bytes << ',' << csvField(QString::fromStdString(s.event)) << '\n';
    }
    st.flush();
    if (!writeFile(d.filePath("timeline.csv"), steps.toUtf8(), error)) return false;

    // charts/ is the export's own: a chart an earlier export wrote and this one does not (a remote session's
    // server_metrics, into the folder of a local one) is removed, so that the folder shows one session.
    QStringList written;
    for (const auto& chart : in.charts) written << chart.first + ".png" << chart.first + ".pdf";
    for (const QString& old : QDir(d.filePath("charts")).entryList({"*.png", "*.pdf"}, QDir::Files))
        if (!written.contains(old)) QFile::remove(d.filePath("charts/" + old));
    for (const auto& [name, plot] : in.charts) {
        const int w = std::max(640, plot->width()), h = std::max(360, plot->height());
        const QString png = d.filePath("charts/" + name + ".png"), pdf = d.filePath("charts/" + name + ".pdf");
        if (!plot->savePng(png, w, h)) {
            if (error) *error = png + ": cannot write the chart";
            return false;
        }
        if (!plot->savePdf(pdf, w, h)) {
            if (error) *error = pdf + ": cannot write the chart";
            return false;
        }
    }
    if (in.window) {
        const QString png = d.filePath("main_window.png");
        if (!in.window->grab().save(png)) {
            if (error) *error = png + ": cannot write the window image";
            return false;
        }
    }
    return true;
}

}  // namespace kvscope::ui
