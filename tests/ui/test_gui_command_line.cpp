// kvscope answers --help, --version and a bad option with no display at all (issue 17): the command
// line is parsed before QApplication, which aborts without one. Runs the built GUI with DISPLAY,
// WAYLAND_DISPLAY and QT_QPA_PLATFORM removed from its environment.
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

class TestGuiCommandLine : public QObject {
    Q_OBJECT

    struct Run {
        int exitCode = -1;
        QString out, err;
    };
    // offscreen: with Qt's offscreen platform (a window, no display) instead of none.
    static Run run(const QStringList& args, bool offscreen = false) {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(name);
        if (offscreen) env.insert("QT_QPA_PLATFORM", "offscreen");
        p.setProcessEnvironment(env);
        p.start(KVSCOPE_GUI_PATH, args);
        Run r;
        if (!p.waitForFinished(120000) || p.exitStatus() != QProcess::NormalExit) return r;
        r.exitCode = p.exitCode();
        r.out = QString::fromLocal8Bit(p.readAllStandardOutput());
        r.err = QString::fromLocal8Bit(p.readAllStandardError());
        return r;
    }

private slots:
    void helpWithoutDisplay() {
        const Run r = run({"--help"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("Usage: kvscope") && r.out.contains("--script"), qPrintable(r.out));
        QVERIFY2(r.out.contains("--backend") && r.out.contains("h100-sxm") && r.out.contains("--sim-speed"), qPrintable(r.out));
    }
    void versionWithoutDisplay() {
        const Run r = run({"--version"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.out.startsWith("kvscope "), qPrintable(r.out));
    }
    void badOptionWithoutDisplay() {
        const Run r = run({"--no-such-option"});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("no-such-option"), qPrintable(r.err));
    }
    // The CLI's engine options (issue 20), checked before any window: a bad one names itself, exit 2.
    void badSimulationOptionsWithoutDisplay_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("named");
        QTest::newRow("unknown gpu") << QStringList{"--backend", "sim:h900"} << "h900";
        QTest::newRow("tp without sim") << QStringList{"--backend", "cpu", "--tensor-parallel-size", "2"}
                                        << "tensor_parallel_size";
        QTest::newRow("tp not a number") << QStringList{"--backend", "sim:h200", "--tensor-parallel-size", "two"} << "two";
        QTest::newRow("negative speed") << QStringList{"--backend", "sim:h200", "--sim-speed", "-1"} << "pace";
    }
    void badSimulationOptionsWithoutDisplay() {
        QFETCH(QStringList, args);
        QFETCH(QString, named);
        const Run r = run(args);
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(named), qPrintable(r.err));
    }

    // An export folder that cannot be written is bad input before the session runs: a path that is a file,
    // an empty one (screenshots went to the working folder). It was found when the script ended, exit 1.
    void unwritableExportIsBadInput() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        QFile script(dir.filePath("s.json"));
        QVERIFY(script.open(QIODevice::WriteOnly));
        script.write(R"({"model": "dummy:tiny", "actions": [{"action": "wait", "ms": 1}]})");
        script.close();
        QFile file(dir.filePath("afile"));
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.close();
        const std::pair<QString, QString> cases[] = {{file.fileName(), "a file, not a folder"}, {"", "give a folder"}};
        for (const auto& [where, named] : cases) {
            const Run r = run({"--script", script.fileName(), "--export", where, "--quit-when-done"}, true);
            QCOMPARE(r.exitCode, 2);
            QVERIFY2(r.err.contains("--export " + where + ": " + named), qPrintable(r.err));
        }
    }

    // A script that fails at run time (here: the engine is still busy when wait_idle's 1 ms is up) exits 1
    // and says why on stderr, where a CI log or a shell looks for errors.
    void failedScriptIsReportedOnStderr() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        QFile script(dir.filePath("busy.json"));
        QVERIFY(script.open(QIODevice::WriteOnly));
        script.write(R"({"model": "dummy:tiny", "engine": {"max_model_len": 512, "threads": 1},
                         "actions": [{"action": "open_pane", "max_tokens": 400},
                                     {"action": "send_all", "prompt": "Once"},
                                     {"action": "wait_idle", "timeout_ms": 1}]})");
        script.close();
        const QString exportDir = dir.filePath("export");
        const Run r = run({"--script", script.fileName(), "--export", exportDir, "--quit-when-done"}, true);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("kvscope: script failed: ") && r.err.contains("idle"), qPrintable(r.err));
        QVERIFY2(!r.out.contains("script failed"), qPrintable(r.out));
        // The export says so too: it looked like a finished session's.
        QFile session(QDir(exportDir).filePath("session.json"));
        QVERIFY(session.open(QIODevice::ReadOnly));
        const QJsonObject outcome = QJsonDocument::fromJson(session.readAll()).object().value("script").toObject();
        QCOMPARE(outcome.value("ok"), QJsonValue(false));
        QVERIFY2(outcome.value("message").toString().contains("idle"), qPrintable(outcome.value("message").toString()));
        QCOMPARE(outcome.value("file").toString(), QFileInfo(script.fileName()).absoluteFilePath());
    }
};

QTEST_GUILESS_MAIN(TestGuiCommandLine)
#include "test_gui_command_line.moc"
