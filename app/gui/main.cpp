// kvscope: the GUI. Parses the command line (docs/DESIGN.md section 4), opens the main window, loads the
// model on the engine thread, and in script mode replays the script, writes the export and quits.
// Exit codes: 0 success, 1 runtime failure (script failed, export failed), 2 bad input.
#include "chat_pane.h"
#include "engine_controller.h"
#include "main_window.h"
#include "script_runner.h"
#include "stall_monitor.h"
#include "theme.h"

#include "engine_config.h"
#include "metrics/export.h"
#include "sim/gpu_specs.h"
#include "util/errors.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QJsonObject>
#include <QSettings>
#include <QTemporaryFile>
#include <QTimer>

#include <cstdio>
#include <functional>

using namespace kvscope::ui;

int main(int argc, char** argv) {
    // The command line is parsed before QApplication exists: it aborts with no display, and --help,
    // --version and a bad option must answer anywhere (a CI job, an ssh session).
    QApplication::setApplicationName("kvscope");
    QApplication::setOrganizationName("kvscope");
    QApplication::setApplicationVersion(QString::fromStdString(kvscope::kvscope_version() + " (" + kvscope::git_revision() + ")"));
    QCommandLineParser parser;
    parser.setApplicationDescription("Desktop workbench for paged-KV, continuous-batching LLM inference");
    const QCommandLineOption helpOption = parser.addHelpOption();
    const QCommandLineOption versionOption = parser.addVersionOption();
    QCommandLineOption modelOption("model", "Model: HF directory, .gguf file or dummy:PRESET (default: the last one, "
                                            "else dummy:tiny).", "M");
    QCommandLineOption scriptOption("script", "Replay a session script (see resources/scripts/example.json).", "FILE.json");
    QCommandLineOption exportOption("export", "Write the session export into DIR when the script ends (or on quit).", "DIR");
    QCommandLineOption quitOption("quit-when-done", "Quit when the script has finished (and the export is written).");
    QCommandLineOption lightOption("light", "Use the light palette.");
    // The CLI's names and meanings (app/cli/engine_options.cpp), so a command line moves between them.
    QCommandLineOption backendOption("backend", "cpu, cuda, auto or sim:GPU (a simulated accelerator: GPU one of " +
                                                    QString::fromStdString(kvscope::gpu_spec_names()) + ").", "B");
    QCommandLineOption tpOption("tensor-parallel-size", "GPUs the model is sharded over (sim backends).", "N");
    QCommandLineOption simSpeedOption("sim-speed", "Simulated seconds per wall second (sim backends; 0 = as fast as "
                                                   "the host allows; default 1).", "X");
    parser.addOptions({modelOption, scriptOption, exportOption, quitOption, lightOption, backendOption, tpOption,
                       simSpeedOption});
    QStringList arguments;
    for (int i = 0; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);
    if (!parser.parse(arguments)) {
        std::fprintf(stderr, "kvscope: error: %s\n", qPrintable(parser.errorText()));
        return 2;
    }
    if (parser.isSet(helpOption) || parser.isSet("help-all")) {
        // With no QApplication yet Qt cannot know the program's name for the usage line.
        std::fputs(qPrintable(parser.helpText().replace("<executable_name>", "kvscope")), stdout);
        return 0;
    }
    if (parser.isSet(versionOption)) {
        std::printf("kvscope %s\n", qPrintable(QApplication::applicationVersion()));
        return 0;
    }
    if (!parser.positionalArguments().isEmpty()) {
        std::fprintf(stderr, "kvscope: error: unexpected argument '%s' (see kvscope --help)\n",
                     qPrintable(parser.positionalArguments().constFirst()));
        return 2;
    }

    // The engine settings of the command line, checked before any window opens (exit 2 on a bad one).
    std::function<void(kvscope::EngineConfig&)> applyEngineOptions = [&](kvscope::EngineConfig& c) {
        if (parser.isSet(backendOption)) {
            kvscope::parse_backend(parser.value(backendOption).toStdString(), c);
            if (c.backend == kvscope::BackendKind::SIM && !parser.isSet(simSpeedOption)) c.sim_pace = 1;  // watchable
        }
        if (parser.isSet(tpOption)) {
            bool ok = false;
            c.tensor_parallel_size = parser.value(tpOption).toInt(&ok);
            if (!ok) throw kvscope::BadInput("--tensor-parallel-size must be an integer, got '" +
                                             parser.value(tpOption).left(64).toStdString() + "'");
        }
        if (parser.isSet(simSpeedOption)) {
            bool ok = false;
            c.sim_pace = parser.value(simSpeedOption).toDouble(&ok);
            if (!ok) throw kvscope::BadInput("--sim-speed must be a number, got '" +
                                             parser.value(simSpeedOption).left(64).toStdString() + "'");
        }
        kvscope::EngineConfig check = c;  // max_model_len 0 = the model's, known at load
        if (check.scheduler.max_model_len < 1) check.scheduler.max_model_len = 1;
        check.validate();
    };
    try {
        kvscope::EngineConfig probe = EngineController::defaultConfig();
        applyEngineOptions(probe);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvscope: error: %s\n", e.what());
        return 2;
    }

    QApplication::setHighDpiScaleFactorRoundingPolicy(Qt::HighDpiScaleFactorRoundingPolicy::PassThrough);
    QApplication app(argc, argv);

    const bool scripted = parser.isSet(scriptOption);
    QSettings settings;
    Theme::apply(!parser.isSet(lightOption) && settings.value("darkTheme", true).toBool());

    MainWindow window;
    ScriptRunner runner(&window);
    if (scripted) {
        QString error;
        if (!runner.load(parser.value(scriptOption), &error)) {
            std::fprintf(stderr, "kvscope: error: %s\n", qPrintable(error));
            return 2;
        }
    }
    QString model = parser.value(modelOption);
    if (model.isEmpty()) model = runner.model();
    if (model.isEmpty()) model = scripted ? QString("dummy:tiny") : settings.value("lastModel", "dummy:tiny").toString();
    const QString exportDir = parser.value(exportOption);
    const bool quitWhenDone = parser.isSet(quitOption);
    // A folder the export cannot be written into is bad input, found before the session runs (it was
    // found when the script ended, exit 1, with the wrong reason for a read-only folder).
    if (parser.isSet(exportOption)) {
        const QFileInfo where(exportDir);
        QString problem;
        if (exportDir.isEmpty()) problem = "give a folder";
        else if (where.exists() && !where.isDir()) problem = "a file, not a folder";
        else if (!QDir().mkpath(exportDir)) problem = "cannot create the folder";
        else if (QTemporaryFile probe(QDir(exportDir).filePath("kvscope-XXXXXX")); !probe.open()) problem = "cannot write into the folder";
        if (!problem.isEmpty()) {
            std::fprintf(stderr, "kvscope: error: --export %s: %s\n", qPrintable(exportDir), qPrintable(problem));
            return 2;
        }
    }

    if (scripted) window.resize(1600, 1000);
    runner.setOutputDir(exportDir);
    window.show();

    auto writeExport = [&](const QJsonObject& script = {}) -> bool {
        if (exportDir.isEmpty()) return true;
        QString error;
        if (!window.exportSession(exportDir, &error, script)) {
            std::fprintf(stderr, "kvscope: error: export: %s\n", qPrintable(error));
            return false;
        }
        std::printf("kvscope: session exported to %s (GUI max stall %.1f ms)\n", qPrintable(exportDir),
                    window.stallMonitor()->maxStallMs());
        return true;
    };

    QObject::connect(window.controller(), &EngineController::modelLoadFailed, &app,
                     [&](const QString& spec, const QString& message) {
                         // The loader's messages start with the path they could not use: said once.
                         if (message.startsWith(spec))
                             std::fprintf(stderr, "kvscope: error: %s\n", qPrintable(message));
                         else
                             std::fprintf(stderr, "kvscope: error: %s: %s\n", qPrintable(spec), qPrintable(message));
                         if (scripted && quitWhenDone) QApplication::exit(2);
                     });
    if (scripted) {
        QObject::connect(&window, &MainWindow::modelReady, &runner, [&] {
            static bool started = false;
            if (started) return;
            started = true;
            // From the engine's first update on (queued right behind the load): before it the block map and
            // the status bar had nothing to show, and a first screenshot said "No model loaded".
            QObject::connect(window.controller(), &EngineController::updateApplied, &runner, [&] {
                // From the event loop, not inside the update's signal (its views are still being told).
                QTimer::singleShot(0, &runner, [&] {
                    window.stallMonitor()->reset();  // measure the session, not the start-up
                    runner.start();
                });
            }, Qt::SingleShotConnection);
        });
        QObject::connect(&runner, &ScriptRunner::actionStarted, &app, [](int i, const QString& name) {
            std::printf("kvscope: script action %d: %s\n", i, qPrintable(name));
            std::fflush(stdout);
        });
        QObject::connect(&runner, &ScriptRunner::finished, &app, [&](bool ok, const QString& message) {
            // A failure goes to stderr, where a CI log or a shell looks for errors; progress stays on stdout.
            if (ok) std::printf("kvscope: script finished: %s\n", qPrintable(message));
            else std::fprintf(stderr, "kvscope: script failed: %s\n", qPrintable(message));
            std::fflush(stdout);
            // Let the last updates and the queued replots land before the export grabs the window.
            QTimer::singleShot(300, &app, [&, ok, message] {
                const bool exported = writeExport(QJsonObject{
                    {"file", QFileInfo(parser.value(scriptOption)).absoluteFilePath()}, {"ok", ok}, {"message", message}});
                if (quitWhenDone) QApplication::exit(ok && exported ? 0 : 1);
            });
        });
    } else if (!exportDir.isEmpty()) {
        QObject::connect(&app, &QApplication::aboutToQuit, &app, [&] { writeExport(); });
    }
    if (!scripted) {
        // A first window that teaches: one pane, a prompt ready to send with Ctrl+Return.
        QObject::connect(&window, &MainWindow::modelReady, &window, [&window] {
            if (!window.panes().isEmpty()) return;
            ChatPane* pane = window.addPane();
            pane->setInputText(QObject::tr("Tell me a short story about a lighthouse keeper."));
            pane->focusInput();
        }, Qt::SingleShotConnection);
    }
    kvscope::EngineConfig config = runner.engineConfig(EngineController::defaultConfig());
    applyEngineOptions(config);  // checked above
    window.loadModel(model, config);
    return app.exec();
}
