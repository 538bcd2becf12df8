#include "script_runner.h"

#include "bench_spec.h"
#include "charts_panel.h"
#include "benchmark_panel.h"
#include "chat_pane.h"
#include "engine_controller.h"
#include "main_window.h"
#include "stall_monitor.h"
#include "tuning_panel.h"

#include <QAction>
#include <QApplication>
#include <QDir>
#include <QKeyEvent>
#include <QFile>
#include <QImage>
#include <QJsonDocument>

namespace kvscope::ui {

namespace {
const QStringList kActions = {"open_pane", "submit", "send_all", "set", "benchmark", "wait", "wait_idle",
                              "wait_benchmark", "select", "stop_all", "theme", "screenshot", "resize", "key",
                              "connect"};
}

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
    if (!doc.isObject()) {
        if (error) *error = QString("%1: invalid JSON at offset %2: %3").arg(path).arg(pe.offset).arg(pe.errorString());
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
    // Names the engine parses: a bad one is the script's error, here, not a failed model load later.
    const QJsonObject engine = script.value("engine").toObject();
    try {
        if (engine.contains("mode")) (void)parse_batching_mode(engine.value("mode").toString().toStdString());
        if (engine.contains("policy")) (void)parse_scheduler_policy(engine.value("policy").toString().toStdString());
        EngineConfig probe;
        if (engine.contains("backend")) parse_backend(engine.value("backend").toString().toStdString(), probe);
    } catch (const std::exception& e) {
        if (error) *error = QString("engine: %1").arg(e.what());
        return false;
    }
    const QJsonArray actions = script.value("actions").toArray();
    for (int i = 0; i < actions.size(); ++i) {
        const QString name = actions[i].toObject().value("action").toString();
        if (!kActions.contains(name)) {
            if (error) *error = QString("actions[%1]: unknown action '%2' (one of %3)").arg(i).arg(name, kActions.join(", "));
            return false;
        }
    }
    m_script = script;
    m_actions = actions;
    return true;
}

EngineConfig ScriptRunner::engineConfig(const EngineConfig& defaults) const {
    EngineConfig c = defaults;
    const QJsonObject e = m_script.value("engine").toObject();
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

void ScriptRunner::start() {
    m_clock.start();
    m_index = 0;
    m_done = false;
    next();
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
            emit finished(true, QString("%1 actions done in %2 s").arg(m_actions.size()).arg(m_clock.elapsed() / 1e3, 0, 'f', 1));
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
            fail(QString("timed out waiting for %1").arg(what));
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
        SamplingParams s = p->samplingParams();
        s.temperature = float(a.value("temperature").toDouble(s.temperature));
        s.top_p = float(a.value("top_p").toDouble(s.top_p));
        s.top_k = a.value("top_k").toInt(s.top_k);
        s.max_tokens = a.value("max_tokens").toInt(s.max_tokens);
        if (a.contains("seed")) s.seed = uint64_t(a.value("seed").toInt());
        p->setSamplingParams(s);
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
        if (ChatPane* p = paneAt(a)) m_window->selectRequest(p->currentRequestId());
        return !m_done;
    }
    if (action == "stop_all") {
        m_window->stopAll();
        return true;
    }
    if (action == "screenshot") {
        QDir dir(m_outputDir.isEmpty() ? QDir::currentPath() : m_outputDir);
        dir.mkpath(".");
        const QString file = dir.filePath(a.value("file").toString("screenshot.png"));
        // Charts that were out of view replot when painted, a frame late: the picture has them current.
        m_window->chartsPanel()->replotNow();
        QImage image = m_window->grab().toImage();
        if (a.contains("width")) image = image.scaledToWidth(a.value("width").toInt(), Qt::SmoothTransformation);
        if (a.value("indexed").toBool()) image = image.convertToFormat(QImage::Format_Indexed8, Qt::ThresholdDither);
        if (!image.save(file, nullptr, 0))  // PNG quality 0 = smallest file, still lossless
            fail(file + ": cannot write the screenshot");
        m_window->stallMonitor()->skipInterval();  // the grab blocks on purpose: not a stall of the app
        return !m_done;
    }
    if (action == "resize") {
        // The size a person would give it, so a session replays at 1024x700 as at 2560x1440.
        m_window->resize(a.value("width").toInt(m_window->width()), a.value("height").toInt(m_window->height()));
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
        for (QAction* act : m_window->findChildren<QAction*>())
            if (act->isEnabled() && act->shortcuts().contains(keys)) {
                act->trigger();
                return true;
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
        controller->reconfigure(t->config());  // now, not after the panel's debounce
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
        BenchSpec spec = BenchSpec::fromJson(a);
        m_window->benchmarkPanel()->setSpec(spec);
        m_window->benchmarkPanel()->run();
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
