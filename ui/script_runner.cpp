#include "script_runner.h"

#include "bench_spec.h"
#include "bench_workload.h"
#include "charts_panel.h"
#include "benchmark_panel.h"
#include "chat_pane.h"
#include "engine_controller.h"
#include "main_window.h"
#include "stall_monitor.h"
#include "tuning_panel.h"
#include "util/errors.h"

#include <algorithm>

#include <QAction>
#include <QApplication>
#include <QDir>
#include <QKeyEvent>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonDocument>
#include <QMap>

#include <cmath>

namespace kvscope::ui {

namespace {
// The keys each part of a script takes and what each holds: 'i' a whole number, 'n' a number, 's' a string,
// 'b' true or false, 'a' an array, 'o' an object. A key not listed is a mistake (a typo would otherwise be ignored without a word).
using Keys = QMap<QString, char>;
const Keys kEngineKeys = {{"max_model_len", 'i'}, {"max_num_seqs", 'i'},       {"max_num_batched_tokens", 'i'},
                          {"policy", 's'},        {"enable_prefix_caching", 'b'}, {"block_size", 'i'},
                          {"mode", 's'},          {"kv_cache_dtype", 's'},     {"threads", 'i'},
                          {"backend", 's'},       {"tensor_parallel_size", 'i'}, {"sim_speed", 'n'},
                          {"kv_cache_memory_mib", 'i'}};
// The knobs `set` moves (the tuning panel's).
const Keys kSetKeys = {{"block_size", 'i'}, {"max_num_seqs", 'i'}, {"max_num_batched_tokens", 'i'},
                       {"policy", 's'},     {"enable_prefix_caching", 'b'}, {"mode", 's'},
                       {"kv_cache_memory_mib", 'i'}, {"kv_cache_dtype", 's'}, {"sim_speed", 'n'}};
const QMap<QString, Keys> kActionKeys = {
    {"open_pane", {{"temperature", 'n'}, {"top_p", 'n'}, {"top_k", 'i'}, {"max_tokens", 'i'}, {"seed", 'i'},
                   {"priority", 'i'}, {"system", 's'}, {"color", 's'}}},
    {"submit", {{"pane", 'i'}, {"prompt", 's'}}},
    {"send_all", {{"prompt", 's'}}},
    {"set", kSetKeys},
    {"benchmark", {{"name", 's'}, {"dataset", 's'}, {"dataset_path", 's'}, {"num_prompts", 'i'}, {"input_len", 'i'},
                   {"output_len", 'i'}, {"range_ratio", 'n'}, {"prefix_len", 'i'}, {"request_rate", 'n'},
                   {"burstiness", 'n'}, {"max_concurrency", 'i'}, {"seed", 'i'}, {"wait", 'b'}, {"timeout_ms", 'i'}}},
    {"wait", {{"ms", 'i'}}},
    {"wait_idle", {{"timeout_ms", 'i'}}},
    {"wait_benchmark", {{"timeout_ms", 'i'}}},
    {"select", {{"pane", 'i'}}},
    {"stop_all", {}},
    {"theme", {{"dark", 'b'}}},
    {"screenshot", {{"file", 's'}, {"width", 'i'}, {"indexed", 'b'}}},
    {"resize", {{"width", 'i'}, {"height", 'i'}}},
    {"key", {{"keys", 's'}}},
    {"connect", {{"base_url", 's'}, {"model", 's'}, {"api_key", 's'}, {"timeout_ms", 'i'}}},
};

// "" when every key of o is one of `keys` (or `common`) and holds its kind of value; else the problem.
QString checkKeys(const QJsonObject& o, const Keys& keys, const Keys& common = {}) {
    for (auto it = o.begin(); it != o.end(); ++it) {
        const char kind = keys.value(it.key(), common.value(it.key(), 0));
        if (!kind) {
            QStringList known = keys.keys();
            return QString("unknown key \"%1\" (%2)").arg(it.key(), known.isEmpty() ? "it takes none" : "one of " + known.join(", "));
        }
        const QJsonValue v = it.value();
        const bool ok = kind == 's'   ? v.isString()
                        : kind == 'b' ? v.isBool()
                        : kind == 'a' ? v.isArray()
                        : kind == 'o' ? v.isObject()
                        : kind == 'n' ? v.isDouble()
                                      : v.isDouble() && v.toDouble() == std::floor(v.toDouble()) &&
                                            std::abs(v.toDouble()) <= 2147483647.0;
        if (!ok) {
            const char* what = kind == 's'   ? "a string"
                               : kind == 'b' ? "true or false"
                               : kind == 'a' ? "an array"
                               : kind == 'o' ? "an object"
                               : kind == 'n' ? "a number"
                                             : "a whole number";
            return QString("\"%1\" must be %2").arg(it.key(), what);
        }
    }
    return {};
}

// The load-time configuration: defaults overridden by a script's "engine" object (keys checked).
EngineConfig engineConfigFrom(const QJsonObject& e, const EngineConfig& defaults) {
    EngineConfig c = defaults;
    c.scheduler.max_model_len = e.value("max_model_len").toInt(c.scheduler.max_model_len);
    c.scheduler.max_num_seqs = e.value("max_num_seqs").toInt(c.scheduler.max_num_seqs);
    c.scheduler.max_num_batched_tokens = e.value("max_num_batched_tokens").toInt(c.scheduler.max_num_batched_tokens);
    c.scheduler.policy = parse_scheduler_policy(
        e.value("policy").toString(QString::fromUtf8(to_string(c.scheduler.policy).data())).toStdString());
    c.scheduler.enable_prefix_caching = e.value("enable_prefix_caching").toBool(c.scheduler.enable_prefix_caching);
    c.block_size = e.value("block_size").toInt(c.block_size);
    c.mode = parse_batching_mode(e.value("mode").toString(QString::fromUtf8(to_string(c.mode).data())).toStdString());
    c.kv_cache_dtype = e.value("kv_cache_dtype").toString(QString::fromStdString(c.kv_cache_dtype)).toStdString();
    c.num_threads = e.value("threads").toInt(c.num_threads);
    if (e.contains("backend")) parse_backend(e.value("backend").toString().toStdString(), c);  // "sim:h100-sxm"
    c.tensor_parallel_size = e.value("tensor_parallel_size").toInt(c.tensor_parallel_size);
    c.sim_pace = e.value("sim_speed").toDouble(c.sim_pace);  // simulated seconds per wall second, 0 = as fast as possible
    if (e.contains("kv_cache_memory_mib")) c.kv_cache_memory = int64_t(e.value("kv_cache_memory_mib").toInt()) << 20;
    return c;
}

// Throws BadInput naming the first setting the engine would refuse. max_model_len 0 is the model's own
// length, which only the model knows: checked as a length that any value works with.
void validateEngineSettings(const QJsonObject& e) {
    // Past what the tuning panel holds, the engine ran one value and the panel showed another (4096 for
    // 100000), and a `set` failed mid-run.
    const std::pair<const char*, std::pair<int, int>> kPanelRanges[] = {
        {"max_num_seqs", TuningPanel::kMaxNumSeqsRange},
        {"max_num_batched_tokens", TuningPanel::kMaxNumBatchedTokensRange},
        {"kv_cache_memory_mib", TuningPanel::kKvCacheMiBRange}};
    for (const auto& [key, range] : kPanelRanges)
        if (const double v = e.value(key).toDouble(); e.contains(key) && (v < range.first || v > range.second))
            throw kvscope::BadInput(QString("%1 %2 is past what the tuning panel holds (%3..%4)")
                               .arg(key, QString::number(v, 'g', 17)).arg(range.first).arg(range.second).toStdString());
    // The engine's aliases (fp16, bf16) are names the panel's list lacks: it kept its old entry and sent it
    // back with the next knob moved.
    if (const QString dtype = e.value("kv_cache_dtype").toString(); e.contains("kv_cache_dtype") &&
        std::none_of(TuningPanel::kKvCacheDtypes.begin(), TuningPanel::kKvCacheDtypes.end(),
                     [&](const char* name) { return dtype == QLatin1String(name); }))
        throw kvscope::BadInput(("kv_cache_dtype '" + dtype + "': the tuning panel takes auto, float32, float16 or bfloat16")
                                    .toStdString());
    EngineConfig c = engineConfigFrom(e, EngineController::defaultConfig());
    if (c.scheduler.max_model_len == 0) c.scheduler.max_model_len = std::max(1, c.scheduler.max_num_batched_tokens);
    c.validate();
}
// An open_pane action's sampling over `base` (the pane's defaults): the same fields at load, where the
// engine's validate() checks them, and when the pane opens.
SamplingParams samplingFrom(const QJsonObject& a, SamplingParams base) {
    base.temperature = float(a.value("temperature").toDouble(base.temperature));
    base.top_p = float(a.value("top_p").toDouble(base.top_p));
    base.top_k = a.value("top_k").toInt(base.top_k);
    base.max_tokens = a.value("max_tokens").toInt(base.max_tokens);
    if (a.contains("seed")) base.seed = uint64_t(a.value("seed").toInt());
    return base;
}

}  // namespace

ScriptRunner::ScriptRunner(MainWindow* window, QObject* parent) : QObject(parent), m_window(window), m_poll(this) {
    m_poll.setSingleShot(true);
}

bool ScriptRunner::load(const QString& path, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        if (error) *error = QString("%1: cannot open script (%2)").arg(path, f.errorString());
        return false;
    }
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &pe);
    if (pe.error != QJsonParseError::NoError) {
        if (error) *error = QString("%1: invalid JSON at offset %2: %3").arg(path).arg(pe.offset).arg(pe.errorString());
        return false;
    }
    if (!doc.isObject()) {  // JSON, but an array or a value ("no error occurred at offset 0", before)
        if (error) *error = QString("%1: a script is a JSON object with \"actions\"").arg(path);
        return false;
    }
    QString e;
    if (!loadJson(doc.object(), &e)) {
        if (error) *error = path + ": " + e;
        return false;
    }
    return true;
}

bool ScriptRunner::loadJson(const QJsonObject& script, QString* error) {
    if (!script.value("actions").isArray()) {
        if (error) *error = "\"actions\" must be an array";
        return false;
    }
    auto failWith = [error](const QString& message) {
        if (error) *error = message;
        return false;
    };
    QString problem = checkKeys(script, {{"actions", 'a'}, {"engine", 'o'}, {"model", 's'}, {"description", 's'}});
    if (!problem.isEmpty()) return failWith(problem);
    // The engine settings as the engine checks them: a bad one is the script's error, here, not a failed
    // model load (or an exception) later.
    const QJsonObject engine = script.value("engine").toObject();
    if (!(problem = checkKeys(engine, kEngineKeys)).isEmpty()) return failWith("engine: " + problem);
    try {
        validateEngineSettings(engine);
    } catch (const std::exception& e) {
        return failWith(QString("engine: %1").arg(e.what()));
    }
    const QJsonArray actions = script.value("actions").toArray();
    for (int i = 0; i < actions.size(); ++i) {
        if (!actions[i].isObject()) return failWith(QString("actions[%1]: not an object").arg(i));
        const QJsonObject a = actions[i].toObject();
        const QString name = a.value("action").toString();
        if (!a.contains("action")) return failWith(QString("actions[%1]: \"action\" is missing").arg(i));
        if (!kActionKeys.contains(name))
            return failWith(QString("actions[%1]: unknown action '%2' (one of %3)").arg(i).arg(name, kActionKeys.keys().join(", ")));
        if (!(problem = checkKeys(a, kActionKeys[name], {{"action", 's'}, {"at_ms", 'n'}, {"comment", 's'}})).isEmpty())
            return failWith(QString("actions[%1] (%2): %3").arg(i).arg(name, problem));
        // Times and sizes a timer or a picture can take: a negative wait never fired (Qt refuses the
        // interval) and at_ms 10^15 overflowed it, both hanging the script; a 40000-pixel screenshot took a
        // minute.
        static const std::pair<const char*, std::pair<double, double>> kRanges[] = {
            {"ms", {0, 86400000}}, {"timeout_ms", {0, 86400000}}, {"at_ms", {0, 86400000}},
            {"width", {1, 8192}},  {"height", {1, 8192}},         {"pane", {1, 1024}}};
        for (const auto& [key, range] : kRanges)
            if (const double v = a.value(key).toDouble(); a.contains(key) && !(v >= range.first && v <= range.second))
                return failWith(QString("actions[%1] (%2): \"%3\" must be in [%4, %5], got %6")
                                    .arg(i).arg(name, key).arg(range.first).arg(range.second).arg(v));
        // What an action cannot do without (a submit with no prompt sent an empty message; a resize with
        // no size shrank the window to its minimum).
        const std::pair<const char*, const char*> kNeeds[] = {
            {"submit", "prompt"}, {"send_all", "prompt"}, {"key", "keys"}, {"connect", "base_url"}};
        for (const auto& [action, key] : kNeeds)
            if (name == action && !a.contains(key))
                return failWith(QString("actions[%1] (%2): \"%3\" is missing").arg(i).arg(name, key));
        // An empty prompt: the pane's Send and Send to all do nothing with one, where submit sent an empty message.
        if ((name == "submit" || name == "send_all") && a.value("prompt").isString() && a.value("prompt").toString().trimmed().isEmpty())
            return failWith(QString("actions[%1] (%2): \"prompt\" is empty").arg(i).arg(name));
        // A colour or a key Qt cannot read did nothing (the pane's dot turned black, the key press was lost).
        if (name == "open_pane" && a.contains("color") && !QColor::isValidColorName(a.value("color").toString()))
            return failWith(QString("actions[%1] (open_pane): \"color\" '%2' is not a colour (#rrggbb or a name)")
                                .arg(i).arg(a.value("color").toString()));
        if (name == "key") {
            const QKeySequence keys(a.value("keys").toString());
            bool known = !keys.isEmpty();
            for (int k = 0; k < keys.count(); ++k) known = known && keys[k].key() != Qt::Key_unknown;
            if (!known)
                return failWith(QString("actions[%1] (key): \"keys\" '%2' is not a key sequence (e.g. Tab, Ctrl+N, a)")
                                    .arg(i).arg(a.value("keys").toString()));
        }
        if (name == "resize" && !a.contains("width") && !a.contains("height"))
            return failWith(QString("actions[%1] (resize): give \"width\", \"height\" or both").arg(i));
        try {
            // Sampling as the engine takes it (max_tokens 0 ran as 1 token).
            if (name == "open_pane") samplingFrom(a, {}).validate();
            if (name == "benchmark") checkBenchSpec(BenchSpec::fromJson(a));
        } catch (const std::exception& e) {
            return failWith(QString("actions[%1] (%2): %3").arg(i).arg(name, e.what()));
        }
        if (name == "benchmark" && a.contains("dataset") &&
            !QStringList{"random", "shared-prefix", "sharegpt"}.contains(a.value("dataset").toString()))
            return failWith(QString("actions[%1] (benchmark): unknown dataset '%2' (random, shared-prefix or sharegpt)")
                                .arg(i).arg(a.value("dataset").toString()));
        if (name == "set") {  // the knobs as the engine would take them
            QJsonObject knobs = a;
            knobs.remove("action");
            knobs.remove("at_ms");
            knobs.remove("comment");
            try {
                validateEngineSettings(knobs);
            } catch (const std::exception& e) {
                return failWith(QString("actions[%1] (set): %2").arg(i).arg(e.what()));
            }
        }
    }
    m_script = script;
    m_actions = actions;
    return true;
}

EngineConfig ScriptRunner::engineConfig(const EngineConfig& defaults) const {
    return engineConfigFrom(m_script.value("engine").toObject(), defaults);
}

void ScriptRunner::start() {  // once per run (main.cpp)
    // A `set` the engine refuses (a KV budget too small for a running request) is the script's failure:
    // it went on as if applied, and exited 0.
    connect(m_window->controller(), &EngineController::reconfigureRefused, this, [this](const QString& message) {
        if (m_lastSet >= 0) fail(QString("actions[%1] (set): the engine refused it: %2").arg(m_lastSet).arg(message));
    });
    m_clock.start();
    m_index = 0;
    m_done = false;
    // The engine caps max_model_len at the model's context length: a script that asked for more runs with
    // less, which it did without a word (a `set` that is not taken fails the script too).
    const QJsonObject engine = m_script.value("engine").toObject();
    if (engine.contains("max_model_len")) {
        const int asked = engine.value("max_model_len").toInt(), held = m_window->controller()->config().scheduler.max_model_len;
        if (asked > held) {  // 0: the model's own, whatever it is
            fail(QString("engine.max_model_len %1 was not taken: the model's context allows %2").arg(asked).arg(held));
            return;
        }
    }
    next();
}

void ScriptRunner::settleLayout() {
    // A resize reaches nested layouts through posted layout requests, a round per level (the charts panel
    // then rearranges its columns and asks for another): a screenshot right after a resize caught the old
    // arrangement, with clipped titles. Only layout requests are sent here, never timers or input.
    for (int round = 0; round < 8; ++round) QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
}

void ScriptRunner::fail(const QString& message) {
    if (m_done) return;
    m_done = true;
    emit finished(false, message);
}

void ScriptRunner::next() {
    while (!m_done) {
        if (m_index >= m_actions.size()) {
            m_done = true;
            QString message = QString("%1 actions done in %2 s").arg(m_actions.size()).arg(m_clock.elapsed() / 1e3, 0, 'f', 1);
            // Work still in flight is exported as it stands (running, without metrics): said, so that a
            // script meant to export finished requests gets its missing wait_idle.
            int inFlight = 0;
            for (const RequestRecord& r : m_window->controller()->session()->requests())
                inFlight += r.status != RequestStatus::FINISHED;
            if (inFlight > 0)
                message += QString("; %1 request(s) still in flight, exported unfinished (end with wait_idle to finish them)")
                               .arg(inFlight);
            emit finished(true, message);
            return;
        }
        const QJsonObject a = m_actions[m_index].toObject();
        const qint64 at = qint64(a.value("at_ms").toDouble(-1));
        if (at > m_clock.elapsed()) {
            QTimer::singleShot(int(at - m_clock.elapsed()), this, &ScriptRunner::next);
            return;
        }
        ++m_index;
        emit actionStarted(m_index - 1, a.value("action").toString());
        if (!runAction(a)) return;  // resumes via a timer
    }
}

void ScriptRunner::waitUntil(std::function<bool()> done, int timeoutMs, const QString& what) {
    const qint64 deadline = m_clock.elapsed() + timeoutMs;
    auto poll = std::make_shared<std::function<void()>>();
    *poll = [this, done, deadline, what, poll] {
        if (m_done) return;
        if (done()) {
            next();
            return;
        }
        if (m_clock.elapsed() > deadline) {
            fail(QString("actions[%1]: timed out waiting for %2").arg(m_index - 1).arg(what));
            return;
        }
        QTimer::singleShot(25, this, *poll);
    };
    QTimer::singleShot(0, this, *poll);
}

bool ScriptRunner::runAction(const QJsonObject& a) {
    const QString action = a.value("action").toString();
    EngineController* controller = m_window->controller();
    auto paneAt = [&](const QJsonObject& o) -> ChatPane* {
        const int index = o.value("pane").toInt(1) - 1;
        const auto panes = m_window->panes();
        if (index < 0 || index >= panes.size()) {
            fail(QString("actions[%1]: no pane %2 (there are %3)").arg(m_index - 1).arg(index + 1).arg(panes.size()));
            return nullptr;
        }
        return panes[index];
    };
    if (action == "open_pane") {
        ChatPane* p = m_window->addPane();
        p->focusInput();  // as New pane (Ctrl+N) leaves it: the keys of a later "key" action go there
        p->setSamplingParams(samplingFrom(a, p->samplingParams()));
        p->setPriority(a.value("priority").toInt(0));
        if (a.contains("system")) p->setSystemPrompt(a.value("system").toString());
        if (a.contains("color")) p->setColor(QColor(a.value("color").toString()));
        return true;
    }
    if (action == "submit") {
        if (ChatPane* p = paneAt(a)) p->sendText(a.value("prompt").toString());
        return !m_done;
    }
    if (action == "send_all") {
        m_window->sendToAll(a.value("prompt").toString());
        return true;
    }
    if (action == "select") {
        // As a click on its row: the table takes the keyboard too. Left in a pane, a later resize brought that
        // pane back into view beside the selected request's blocks (the README's 1024 screenshot showed pane 3).
        if (ChatPane* p = paneAt(a); p && !p->lastRequestId().isEmpty()) {
            m_window->selectRequest(p->lastRequestId());
            if (auto* table = m_window->findChild<QWidget*>("requestTable")) table->setFocus(Qt::MouseFocusReason);
        }
        return !m_done;
    }
    if (action == "stop_all") {
        m_window->stopAll();
        return true;
    }
    if (action == "screenshot") {
        QDir dir(m_outputDir.isEmpty() ? QDir::currentPath() : m_outputDir);
        const QString file = dir.filePath(a.value("file").toString("screenshot.png"));
        QDir().mkpath(QFileInfo(file).absolutePath());  // "shots/1024.png" makes its folder
        settleLayout();
        // Charts that were out of view replot when painted, a frame late: the picture has them current.
        m_window->chartsPanel()->replotNow();
        QImage image = m_window->grab().toImage();
        if (a.contains("width")) image = image.scaledToWidth(a.value("width").toInt(), Qt::SmoothTransformation);
        // Indexed: a 256-colour PNG, about a third of the size. Ordered dithering keeps colours that the
        // palette's 6x6x6 cube merges apart (threshold mapping drew free blocks as the background).
        if (a.value("indexed").toBool()) image = image.convertToFormat(QImage::Format_Indexed8, Qt::OrderedDither);
        if (!image.save(file, nullptr, 0))  // PNG quality 0 = smallest file, still lossless
            fail(file + ": cannot write the screenshot");
        m_window->stallMonitor()->skipInterval();  // the grab blocks on purpose: not a stall of the app
        return !m_done;
    }
    if (action == "resize") {
        // The size a person would give it, so a session replays at 1024x700 as at 2560x1440.
        m_window->resize(a.value("width").toInt(m_window->width()), a.value("height").toInt(m_window->height()));
        settleLayout();
        return true;
    }
    if (action == "key") {
        // As the keyboard would: the action bound to the keys (Ctrl+N, Ctrl+W, Esc), else a key press in
        // the focused widget (Tab, Return, text).
        const QKeySequence keys(a.value("keys").toString());
        if (keys.isEmpty()) {
            fail(QString("actions[%1]: \"keys\" is not a key sequence").arg(m_index - 1));
            return false;
        }
        // A shortcut that opens a dialog (Ctrl+O, Ctrl+S) waits for an answer no script gives: the dialog's
        // own event loop runs until it closes, so a timer closes it and fails the script.
        QTimer::singleShot(250, this, [this, index = m_index - 1, text = keys.toString()] {
            if (QWidget* dialog = QApplication::activeModalWidget()) {
                dialog->close();
                fail(QString("actions[%1] (key): %2 opened a dialog (%3), which a script cannot answer")
                         .arg(index).arg(text, dialog->windowTitle()));
            }
        });
        for (QAction* act : m_window->findChildren<QAction*>())
            if (act->isEnabled() && act->shortcuts().contains(keys)) {
                act->trigger();
                return !m_done;
            }
        QWidget* target = QApplication::focusWidget() ? QApplication::focusWidget() : m_window;
        for (int i = 0; i < keys.count(); ++i) {
            const QKeyCombination k = keys[i];
            // Printable keys carry their character (what a text box inserts); Tab, Esc and chords none.
            QString text;
            if (k.key() >= Qt::Key_Space && k.key() <= Qt::Key_AsciiTilde && !(k.keyboardModifiers() & Qt::ControlModifier)) {
                text = QChar(int(k.key()));
                text = (k.keyboardModifiers() & Qt::ShiftModifier) ? text.toUpper() : text.toLower();
            }
            QKeyEvent press(QEvent::KeyPress, k.key(), k.keyboardModifiers(), text);
            QKeyEvent release(QEvent::KeyRelease, k.key(), k.keyboardModifiers());
            QApplication::sendEvent(target, &press);
            QApplication::sendEvent(QApplication::focusWidget() ? QApplication::focusWidget() : m_window, &release);
            target = QApplication::focusWidget() ? QApplication::focusWidget() : m_window;
        }
        return true;
    }
    if (action == "theme") {
        m_window->setDarkTheme(a.value("dark").toBool(true));
        // The palette reaches some widgets through posted events: a screenshot right after the switch had the
        // charts light and the panes' headers still dark. Those are delivered now; no queued call, input or timer.
        for (const QEvent::Type t : {QEvent::ApplicationPaletteChange, QEvent::PaletteChange, QEvent::StyleChange,
                                     QEvent::PolishRequest, QEvent::Polish, QEvent::LayoutRequest})
            QCoreApplication::sendPostedEvents(nullptr, t);
        return true;
    }
    if (action == "set") {
        TuningPanel* t = m_window->tuningPanel();
        if (a.contains("block_size")) t->setBlockSize(a.value("block_size").toInt());
        if (a.contains("max_num_seqs")) t->setMaxNumSeqs(a.value("max_num_seqs").toInt());
        if (a.contains("max_num_batched_tokens")) t->setMaxNumBatchedTokens(a.value("max_num_batched_tokens").toInt());
        if (a.contains("policy")) t->setPolicy(a.value("policy").toString());
        if (a.contains("enable_prefix_caching")) t->setPrefixCaching(a.value("enable_prefix_caching").toBool());
        if (a.contains("mode")) t->setMode(a.value("mode").toString());
        if (a.contains("kv_cache_memory_mib")) t->setKvCacheMiB(a.value("kv_cache_memory_mib").toInt());
        if (a.contains("kv_cache_dtype")) t->setKvCacheDtype(a.value("kv_cache_dtype").toString());
        if (a.contains("sim_speed")) t->setSimSpeed(a.value("sim_speed").toDouble());
        // The panel's widgets clamp and choose from lists: a value they did not take is the script's mistake,
        // not a silent change of what it asked for.
        const EngineConfig c = t->config();
        const std::pair<const char*, QString> held[] = {
            {"block_size", QString::number(c.block_size)},
            {"max_num_seqs", QString::number(c.scheduler.max_num_seqs)},
            {"max_num_batched_tokens", QString::number(c.scheduler.max_num_batched_tokens)},
            {"policy", QString::fromUtf8(to_string(c.scheduler.policy).data())},
            {"mode", QString::fromUtf8(to_string(c.mode).data())},
            {"kv_cache_memory_mib", QString::number(c.kv_cache_memory >> 20)},
            {"kv_cache_dtype", QString::fromStdString(c.kv_cache_dtype)}};
        for (const auto& [key, value] : held) {
            const QJsonValue v = a.value(key);
            const QString asked = v.isString() ? v.toString() : QString::number(v.toInteger());
            if (!v.isUndefined() && asked != value) {
                fail(QString("actions[%1] (set): the tuning panel does not take %2 %3 (it holds %4)")
                         .arg(m_index - 1).arg(key, asked, value));
                return false;
            }
        }
        m_lastSet = m_index - 1;
        controller->reconfigure(c);  // now, not after the panel's debounce
        return true;
    }
    if (action == "wait") {
        QTimer::singleShot(a.value("ms").toInt(0), this, &ScriptRunner::next);
        return false;
    }
    if (action == "wait_idle") {
        waitUntil([this, controller] {
            if (!controller->isIdle()) return false;
            for (ChatPane* p : m_window->panes())
                if (p->isBusy()) return false;
            return true;
        }, a.value("timeout_ms").toInt(300000), "the engine to become idle");
        return false;
    }
    if (action == "benchmark") {
        if (controller->isBenchmarkRunning()) {  // the panel runs one at a time: this one would be dropped
            fail(QString("actions[%1] (benchmark): a benchmark is already running (add \"wait_benchmark\" before it)")
                     .arg(m_index - 1));
            return false;
        }
        const BenchSpec spec = BenchSpec::fromJson(a);
        BenchmarkPanel* panel = m_window->benchmarkPanel();
        panel->setSpec(spec);
        // As for set: what the panel's fields did not take (a dataset it does not know, a count past its
        // range) is named, not run as something else.
        const QJsonObject asked = spec.toJson(), held = panel->spec().toJson();
        for (auto it = asked.begin(); it != asked.end(); ++it)
            if (it.key() != "name" && a.contains(it.key()) && held.value(it.key()) != it.value()) {
                fail(QString("actions[%1] (benchmark): the benchmark panel does not take %2 %3 (it holds %4)")
                         .arg(m_index - 1)
                         .arg(it.key(), it.value().toVariant().toString(), held.value(it.key()).toVariant().toString()));
                return false;
            }
        // A benchmark that cannot start (no such dataset file, prompts past max_model_len) fails the script
        // with the engine's reason; one that ran reports a summary.
        const int index = m_index - 1;
        auto reason = std::make_shared<QString>();
        auto onError = std::make_shared<QMetaObject::Connection>(), onDone = std::make_shared<QMetaObject::Connection>();
        *onError = connect(controller, &EngineController::errorOccurred, this, [reason](const QString& m) { *reason = m; });
        *onDone = connect(controller, &EngineController::benchmarkFinished, this,
                          [this, index, reason, onError, onDone](const BenchResult& r) {
                              disconnect(*onError);
                              disconnect(*onDone);
                              if (r.summary.isEmpty())
                                  fail(QString("actions[%1] (benchmark): it did not run: %2")
                                           .arg(index)
                                           .arg(reason->isEmpty() ? QStringLiteral("no result") : *reason));
                          });
        panel->runNamed(spec.name);
        if (!a.value("wait").toBool(true)) return true;
        waitUntil([controller] { return !controller->isBenchmarkRunning(); }, a.value("timeout_ms").toInt(600000),
                  "the benchmark");
        return false;
    }
    if (action == "connect") {
        // {"base_url", "model", "api_key"}: a remote engine from here on; the key goes to the connection only.
        RemoteConnection c{a.value("base_url").toString(), a.value("api_key").toString(), a.value("model").toString()};
        if (c.baseUrl.isEmpty()) {
            fail(QString("actions[%1]: connect needs \"base_url\"").arg(m_index - 1));
            return false;
        }
        auto failed = std::make_shared<QString>();
        auto conn = std::make_shared<QMetaObject::Connection>();
        *conn = connect(controller, &EngineController::remoteConnectFailed, this, [failed, conn](const QString& message) {
            *failed = message;
            disconnect(*conn);
        });
        m_window->connectToEndpoint(c);
        const int index = m_index - 1;
        waitUntil([this, controller, failed, index] {
            if (!failed->isEmpty()) fail(QString("actions[%1]: connect: %2").arg(index).arg(*failed));
            return !controller->isConnecting();
        }, a.value("timeout_ms").toInt(30000), "the connection");
        return false;
    }
    if (action == "wait_benchmark") {
        waitUntil([controller] { return !controller->isBenchmarkRunning(); }, a.value("timeout_ms").toInt(600000),
                  "the benchmark");
        return false;
    }
    fail("unknown action " + action);
    return false;
}

}  // namespace kvscope::ui
