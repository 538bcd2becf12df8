// kvscope-cli where the CUDA backend cannot run (KVSCOPE_CUDA_LIBRARY pointing at no file, or at the fakes
// of tests/support/fake_cuda_library.cpp: a missing dependency as where libcudart.so.13 is absent, no
// device, another ABI): --backend cuda exits 2 naming the problem; --backend auto runs on the CPU, exit 0,
// the same tokens as --backend cpu, and says once on stderr that it fell back; `info --backend cuda`
// still describes the F32 KV budget. Without the variable the executable finds the library this build
// made. And no executable links CUDA: readelf -d shows no libcuda, libcudart or libcublas.
#include "test_support.h"

#include "backend_factory.h"

#include <QProcess>
#include <QStandardPaths>
#include <nlohmann/json.hpp>

using namespace kvscope;
using nlohmann::json;

namespace {

struct Run {
    int code = -1;
    QString out, err;
};

// kvscope-cli with KVSCOPE_CUDA_LIBRARY = library ("" = unset).
Run cli(const QStringList& args, const QString& library) {
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("KVSCOPE_CUDA_LIBRARY");
    if (!library.isEmpty()) env.insert("KVSCOPE_CUDA_LIBRARY", library);
    p.setProcessEnvironment(env);
    p.start(QString::fromStdString(test::cli_path()), args);
    if (!p.waitForFinished(300000)) qFatal("kvscope-cli did not finish");
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

QString model() { return QString::fromStdString(test::models_dir()) + "/stories260K-f32.gguf"; }

QStringList generate(const QString& backend) {
    return {"generate", "--model", model(), "--prompt", "Once upon a time", "--prompt", "Lily",
            "--max-tokens", "12", "--temperature", "0", "--json", "--backend", backend};
}

QString fake(const char* which) { return QString(KVSCOPE_FAKE_CUDA_DIR) + "/libfake_cuda_" + which + ".so"; }

const char* kFellBack = "kvscope: backend auto: CUDA not available, using the CPU: ";

// The DT_NEEDED entries of an executable, from readelf -d.
QStringList needed(const QString& file) {
    const QString readelf = QStandardPaths::findExecutable("readelf");
    if (readelf.isEmpty()) qFatal("readelf not found (binutils)");
    QProcess p;
    p.start(readelf, {"-d", file});
    if (!p.waitForFinished(60000) || p.exitCode() != 0) qFatal("readelf -d %s failed", qPrintable(file));
    QStringList libs;
    for (const QString& line : QString::fromUtf8(p.readAllStandardOutput()).split('\n'))
        if (line.contains("(NEEDED)")) libs << line.section('[', 1).section(']', 0, 0);
    return libs;
}

}  // namespace

class TestCliBackend : public QObject {
    Q_OBJECT
private slots:
    void unavailable_data() {
        QTest::addColumn<QString>("library");   // KVSCOPE_CUDA_LIBRARY
        QTest::addColumn<QStringList>("mentions");  // what the message must name
        QTest::newRow("no library file") << "/nonexistent/libkvscope-cuda.so"
                                         << QStringList{"/nonexistent/libkvscope-cuda.so", "not found"};
        QTest::newRow("CUDA runtime missing")
            << fake("missing_dependency")
            << QStringList{fake("missing_dependency"), "libkvscope_test_absent.so: cannot open shared object file"};
        QTest::newRow("no device") << fake("no_device") << QStringList{"no CUDA device"};
        QTest::newRow("another ABI") << fake("wrong_abi") << QStringList{fake("wrong_abi"), "ABI 999"};
    }

    void cudaIsAnError_data() { unavailable_data(); }
    void cudaIsAnError() {
        QFETCH(QString, library);
        QFETCH(QStringList, mentions);
        const Run r = cli(generate("cuda"), library);
        QVERIFY2(r.code == 2, qPrintable(QString("exit %1: %2").arg(r.code).arg(r.err)));
        QVERIFY2(r.err.startsWith("kvscope-cli generate: error: "), qPrintable(r.err));
        QVERIFY2(r.err.contains("backend cuda is not available: "), qPrintable(r.err));
        for (const QString& m : mentions) QVERIFY2(r.err.contains(m), qPrintable(m + " not in: " + r.err));
        QVERIFY(r.out.isEmpty());
    }

    void autoFallsBackToTheCpu_data() { unavailable_data(); }
    void autoFallsBackToTheCpu() {
        QFETCH(QString, library);
        QFETCH(QStringList, mentions);
        const Run cpu = cli(generate("cpu"), library);
        QVERIFY2(cpu.code == 0, qPrintable(cpu.err));
        QVERIFY2(!cpu.err.contains("CUDA"), qPrintable(cpu.err));  // cpu never looks for CUDA
        const Run r = cli(generate("auto"), library);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(r.err.count(kFellBack), 1);
        for (const QString& m : mentions) QVERIFY2(r.err.contains(m), qPrintable(m + " not in: " + r.err));
        const QStringList a = r.out.split('\n', Qt::SkipEmptyParts), b = cpu.out.split('\n', Qt::SkipEmptyParts);
        QCOMPARE(a.size(), 3);
        QCOMPARE(b.size(), 3);
        for (int i = 0; i < 2; ++i)
            QCOMPARE(json::parse(a[i].toStdString())["output_token_ids"], json::parse(b[i].toStdString())["output_token_ids"]);
    }

    // bench --compare naive builds two engines in one process: the fallback is reported once.
    void autoSaysItOnce() {
        const Run r = cli({"bench", "--model", model(), "--backend", "auto", "--compare", "naive", "--num-prompts",
                           "4", "--input-len", "16", "--output-len", "4", "--num-warmups", "0"},
                          "/nonexistent/libkvscope-cuda.so");
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(r.err.count(kFellBack), 1);
    }

    // info describes what the CUDA backend would hold (the weights' type under auto, a half type when asked)
    // without loading it.
    void infoWithoutCuda() {
        const Run r = cli({"info", "--model", model(), "--backend", "cuda", "--kv-cache-memory", "1M", "--json"},
                          "/nonexistent/libkvscope-cuda.so");
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const json j = json::parse(r.out.toStdString());
        QCOMPARE(j["kv_cache_dtype"].get<std::string>(), std::string("float32"));
        QCOMPARE(j["kv_bytes_per_token"].get<int>(), 2 * 5 * 4 * 8 * 4);
        const Run h = cli({"info", "--model", model(), "--backend", "cuda", "--kv-cache-memory", "1M", "--json",
                           "--kv-cache-dtype", "float16"},
                          "/nonexistent/libkvscope-cuda.so");
        QVERIFY2(h.code == 0, qPrintable(h.err));
        const json jh = json::parse(h.out.toStdString());
        QCOMPARE(jh["kv_cache_dtype"].get<std::string>(), std::string("float16"));
        QCOMPARE(jh["kv_bytes_per_token"].get<int>(), 2 * 5 * 4 * 8 * 2);
    }

    // Without KVSCOPE_CUDA_LIBRARY: the library this build made is found beside the executable
    // (../lib/kvscope) and loads; it either runs or says "no CUDA device".
    void defaultLocation() {
        const Run r = cli(generate("cuda"), "");
        if (!cuda_backend_built()) {
            QCOMPARE(r.code, 2);
            QVERIFY2(r.err.contains("this build has no CUDA backend"), qPrintable(r.err));
            return;
        }
        if (r.code == 0) {
            qInfo("a CUDA device is present: --backend cuda ran");
            return;
        }
        QVERIFY2(r.code == 2 && r.err.contains("no CUDA device"), qPrintable(r.err));
    }

    void noCudaLinked_data() {
        QTest::addColumn<QString>("executable");
        QTest::newRow("kvscope-cli") << QString::fromStdString(test::cli_path());
#ifdef KVSCOPE_GUI_PATH
        QTest::newRow("kvscope") << QString(KVSCOPE_GUI_PATH);
#endif
    }
    void noCudaLinked() {
        QFETCH(QString, executable);
        if (!QFile::exists(executable)) QSKIP(qPrintable(executable + " is not built"));
        const QStringList libs = needed(executable);
        QVERIFY2(libs.contains("libc.so.6"), qPrintable(libs.join(", ")));  // readelf read it
        for (const QString& lib : libs)
            QVERIFY2(!lib.startsWith("libcuda") && !lib.startsWith("libcublas") && !lib.startsWith("libnvrtc"),
                     qPrintable(executable + " links " + lib));
    }
};

QTEST_GUILESS_MAIN(TestCliBackend)
#include "test_cli_backend.moc"
