// The Debian packages (packaging/CMakeLists.txt) of the label's portable build (KVSCOPE_PORTABLE_BUILD_DIR,
// see tests/packaging/portable_build.cmake), made with cpack, unpacked with dpkg-deb -x into temporary
// roots and run from there with CUDA out of reach: kvscope-cli info and a 16-token greedy generate, on the
// host and on an emulated Haswell (AVX2, no AVX-512), give the native build's tokens; --backend cuda
// exits 2 saying why, --backend auto runs on the CPU; kvscope --help answers without a display. Also the
// Depends that dpkg-shlibdeps wrote, what each package holds, and the desktop file and metainfo (checked
// by desktop-file-validate and appstreamcli where installed, skipped with a message where not).
//
// CUDA out of reach: the runs go through `unshare -m` (or `unshare -rm` where only user namespaces are
// allowed), which bind-mounts an empty directory over /usr/local/cuda and /usr/local/cuda-*, so the
// ld.so cache entries there lead nowhere. Where neither works the runs only get a clean
// LD_LIBRARY_PATH; the test says which it used, and asks ldd whether the CUDA runtime is still found.
#include "process_run.h"
#include "test_support.h"

#include <QDir>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <nlohmann/json.hpp>

using namespace kvscope;
using nlohmann::json;

namespace {

using Run = test::ProcessResult;

QString model() { return QString::fromStdString(test::models_dir()) + "/stories260K-f32.gguf"; }

QStringList generate_args(const QString& backend) {
    return {"generate", "--model", model(), "--prompt", "Once upon a time", "--temperature", "0",
            "--max-tokens", "16", "--threads", "1", "--json", "--backend", backend};
}

std::vector<int> output_ids(const Run& r) {
    return json::parse(r.out.section('\n', 0, 0).toStdString())["output_token_ids"].get<std::vector<int>>();
}

const char* kFellBack = "kvscope: backend auto: CUDA not available, using the CPU: ";

// The shell that hides the CUDA toolkit in a new mount namespace, then runs "$@".
const char* kHideCuda =
    "for d in /usr/local/cuda /usr/local/cuda-*; do"
    "  if [ -d \"$d\" ]; then mount --bind \"$KVSCOPE_EMPTY_DIR\" \"$d\" || exit 97; fi; "
    "done; exec \"$@\"";

}  // namespace

class TestPackage : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;
    QString main_deb_, cuda_deb_;  // cuda_deb_ empty when the build has no CUDA backend
    QString main_root_;            // kvscope unpacked
    QString full_root_;            // kvscope and kvscope-cuda unpacked
    QStringList hide_;             // the unshare command line before the program; empty: none works
    std::vector<int> native_ids_;

    // The environment of every run from a root: no library path, no CUDA library override, no display.
    QProcessEnvironment environment() const {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const char* v : {"LD_LIBRARY_PATH", "KVSCOPE_CUDA_LIBRARY", "KVSCOPE_CPU_VARIANT", "DISPLAY",
                              "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"})
            env.remove(v);
        env.insert("KVSCOPE_EMPTY_DIR", tmp_.filePath("empty"));
        return env;
    }
    // program with args, CUDA hidden where it can be.
    Run hidden(const QString& program, const QStringList& args, int timeout_s = 300) const {
        if (hide_.isEmpty()) return test::run_process(program, args, environment(), timeout_s);
        return test::run_process(hide_[0], hide_.mid(1) + QStringList{program} + args, environment(), timeout_s);
    }
    static Run tool(const QString& program, const QStringList& args, int timeout_s = 120) {
        return test::run_process(program, args, QProcessEnvironment::systemEnvironment(), timeout_s);
    }
    static QString field(const QString& deb, const QString& name) {
        return tool("dpkg-deb", {"-f", deb, name}).out.trimmed();
    }
    static QStringList contents(const QString& deb) {  // the files, as ./usr/...
        QStringList files;
        for (const QString& line : tool("dpkg-deb", {"-c", deb}).out.split('\n', Qt::SkipEmptyParts))
            if (!line.startsWith('d')) files << line.section(' ', -1);
        return files;
    }

private slots:
    void initTestCase() {
        QVERIFY(tmp_.isValid());
        QVERIFY2(!QStandardPaths::findExecutable("dpkg-deb").isEmpty(), "dpkg-deb not found");
        QVERIFY2(!QStandardPaths::findExecutable("dpkg-shlibdeps").isEmpty(),
                 "dpkg-shlibdeps not found: install Debian's dpkg-dev (packaging/debian-deps.sh)");

        // Both generators, as a release would: the .deb files are tested, the tarball is looked into.
        const QString build = KVSCOPE_PORTABLE_BUILD_DIR;
        const QString out = tmp_.filePath("packages");
        const Run cpack = tool(KVSCOPE_CPACK_COMMAND, {"-G", "DEB;TGZ", "--config", build + "/CPackConfig.cmake", "-B", out}, 900);
        QVERIFY2(cpack.code == 0, qPrintable(cpack.out.right(4000) + cpack.err.right(4000)));
        const QStringList debs = QDir(out).entryList({"*.deb"}, QDir::Files, QDir::Name);
        qInfo("packages: %s", qPrintable(debs.join(", ")));
        const bool cuda_built = QFile::exists(build + "/lib/kvscope/libkvscope-cuda.so");
        // Only these: a file installed without COMPONENT would make a third package, kvscope-Unspecified.
        QCOMPARE(debs.size(), cuda_built ? 2 : 1);
        for (const QString& d : debs)
            (d.startsWith("kvscope-cuda_") ? cuda_deb_ : main_deb_) = out + "/" + d;
        QVERIFY2(!main_deb_.isEmpty(), "no kvscope_*.deb");
        QCOMPARE(cuda_deb_.isEmpty(), !cuda_built);

        main_root_ = tmp_.filePath("root-main");
        full_root_ = tmp_.filePath("root-full");
        for (const auto& [deb, root] : {std::pair{main_deb_, main_root_}, {main_deb_, full_root_}, {cuda_deb_, full_root_}}) {
            if (deb.isEmpty()) continue;
            const Run x = tool("dpkg-deb", {"-x", deb, root});
            QVERIFY2(x.code == 0, qPrintable(x.err));
        }

        QVERIFY(QDir().mkpath(tmp_.filePath("empty")));
        for (const QStringList& how : {QStringList{"unshare", "-m"}, QStringList{"unshare", "-rm"}}) {
            const QStringList cmd = how + QStringList{"sh", "-c", kHideCuda, "sh"};
            if (test::run_process(cmd[0], cmd.mid(1) + QStringList{"true"}, environment(), 60).code == 0) {
                hide_ = cmd;
                break;
            }
        }
        qInfo("CUDA out of reach by: %s", hide_.isEmpty() ? "a clean LD_LIBRARY_PATH only (no mount namespace here)"
                                                          : qPrintable(hide_.mid(0, 2).join(' ') +
                                                                       " + an empty directory over /usr/local/cuda*"));

        const Run native = test::run_process(QString::fromStdString(test::cli_path()), generate_args("cpu"),
                                             QProcessEnvironment::systemEnvironment(), 300);
        QVERIFY2(native.code == 0, qPrintable(native.err));
        native_ids_ = output_ids(native);
        QCOMPARE(native_ids_.size(), size_t(16));
    }

    // dpkg-shlibdeps' Depends: the Debian libraries the executables link, never CUDA.
    void mainDepends() {
        const QString depends = field(main_deb_, "Depends");
        qInfo("kvscope Depends: %s", qPrintable(depends));
        for (const char* lib : {"libc6", "libstdc++6", "libqt6core6", "libqt6gui6", "libqt6widgets6", "libqcustomplot",
                                "libpcre2-8-0", "libutf8proc2"})
            QVERIFY2(depends.contains(lib), qPrintable(QString(lib) + " not in: " + depends));
        QVERIFY2(!depends.contains("cuda", Qt::CaseInsensitive) && !depends.contains("nvidia", Qt::CaseInsensitive),
                 qPrintable(depends));
        QCOMPARE(field(main_deb_, "Package"), QString("kvscope"));
    }

    void mainContents() {
        const QStringList files = contents(main_deb_);
        for (const char* f : {"./usr/bin/kvscope", "./usr/bin/kvscope-cli",
                              "./usr/share/applications/io.github.kvscope.Kvscope.desktop",
                              "./usr/share/metainfo/io.github.kvscope.Kvscope.metainfo.xml",
                              "./usr/share/icons/hicolor/scalable/apps/io.github.kvscope.Kvscope.svg",
                              "./usr/share/kvscope/scripts/example.json", "./usr/share/kvscope/workloads/sharegpt_sample.json"})
            QVERIFY2(files.contains(f), qPrintable(QString(f) + " not in: " + files.join(' ')));
        for (const QString& f : files) QVERIFY2(!f.contains("cuda"), qPrintable(f));
    }

    // kvscope-cuda: the library alone, Depends on exactly this kvscope and on no CUDA package.
    void cudaPackage() {
        if (cuda_deb_.isEmpty()) QSKIP("this build has no CUDA backend, so no kvscope-cuda package");
        QCOMPARE(field(cuda_deb_, "Package"), QString("kvscope-cuda"));
        QCOMPARE(field(cuda_deb_, "Depends"), "kvscope (= " + field(main_deb_, "Version") + ")");
        QCOMPARE(contents(cuda_deb_), QStringList{"./usr/lib/kvscope/libkvscope-cuda.so"});
    }

    // The tarball carries both, in the same layout.
    void tarball() {
        const QStringList tars = QDir(tmp_.filePath("packages")).entryList({"*.tar.gz"}, QDir::Files);
        QCOMPARE(tars.size(), 1);
        const QString list = tool("tar", {"-tzf", tmp_.filePath("packages/" + tars[0])}).out;
        for (const char* f : {"/bin/kvscope\n", "/bin/kvscope-cli\n", "/share/kvscope/scripts/example.json\n"})
            QVERIFY2(list.contains(f), qPrintable(QString(f) + " not in: " + list));
        QCOMPARE(list.contains("/lib/kvscope/libkvscope-cuda.so\n"), !cuda_deb_.isEmpty());
    }

    void desktopFileValid() {
        if (QStandardPaths::findExecutable("desktop-file-validate").isEmpty())
            QSKIP("desktop-file-validate not found (Debian's desktop-file-utils): the desktop file is not checked");
        const Run r = tool("desktop-file-validate", {main_root_ + "/usr/share/applications/io.github.kvscope.Kvscope.desktop"});
        QVERIFY2(r.code == 0 && !r.out.contains("error"), qPrintable(r.out + r.err));
    }

    void metainfoValid() {
        if (QStandardPaths::findExecutable("appstreamcli").isEmpty())
            QSKIP("appstreamcli not found (Debian's appstream): the metainfo is not checked");
        const Run r = tool("appstreamcli",
                           {"validate", "--no-net", main_root_ + "/usr/share/metainfo/io.github.kvscope.Kvscope.metainfo.xml"});
        QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
    }

    // Every executable resolves all its libraries with CUDA hidden, links none of CUDA, and has no RUNPATH
    // into a build folder (the CUDA library is found from /proc/self/exe, not through a search path).
    void executablesNeedNoCuda() {
        for (const char* exe : {"kvscope", "kvscope-cli"}) {
            const QString path = full_root_ + "/usr/bin/" + exe;
            const Run ldd = hidden("ldd", {path});
            QVERIFY2(ldd.code == 0 && !ldd.out.contains("not found"), qPrintable(ldd.out + ldd.err));
            QVERIFY2(!ldd.out.contains("libcud") && !ldd.out.contains("libcublas"), qPrintable(ldd.out));
            const QString dynamic = tool("readelf", {"-d", path}).out;
            QVERIFY2(!dynamic.contains("(RUNPATH)") && !dynamic.contains("(RPATH)"), qPrintable(dynamic));
        }
    }

    void infoRuns() {
        const Run r = hidden(full_root_ + "/usr/bin/kvscope-cli", {"info", "--model", model(), "--json"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const std::string kernels = json::parse(r.out.toStdString()).value("cpu_kernels", "");
        QVERIFY2(kernels == "avx512" || kernels == "avx2" || kernels == "baseline",
                 qPrintable("not a portable build: cpu kernels " + QString::fromStdString(kernels)));
    }

    // The native build's greedy tokens, on the host and on an emulated AVX2-only CPU.
    void generateMatchesNative_data() {
        QTest::addColumn<QString>("cpu");  // qemu -cpu; "" = the host
        QTest::newRow("host") << "";
        QTest::newRow("qemu Haswell") << "Haswell";
    }
    void generateMatchesNative() {
        QFETCH(QString, cpu);
        const QString cli = full_root_ + "/usr/bin/kvscope-cli";
        Run r;
        if (cpu.isEmpty()) {
            r = hidden(cli, generate_args("cpu"));
        } else {
            const QString qemu = QStandardPaths::findExecutable("qemu-x86_64");
            QVERIFY2(!qemu.isEmpty(), "qemu-x86_64 not found: install Debian's qemu-user (packaging/debian-deps.sh)");
            r = hidden(qemu, QStringList{"-cpu", cpu, cli} + generate_args("cpu"), 600);
        }
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(output_ids(r), native_ids_);
    }

    // --backend cuda: exit 2 and why; --backend auto: the CPU's tokens, and why once on stderr. From the
    // root without kvscope-cuda the library is not there; from the one with it, its CUDA libraries are not.
    void cudaUnavailable_data() {
        QTest::addColumn<bool>("full");
        QTest::addColumn<QString>("why");
        const QString lib = "/usr/lib/kvscope/libkvscope-cuda.so";
        if (cuda_deb_.isEmpty()) {
            QTest::newRow("kvscope only, no CUDA in this build") << false << "this build has no CUDA backend";
            return;
        }
        QTest::newRow("kvscope only") << false << "CUDA backend library not found: " + main_root_ + lib;
        QTest::newRow("kvscope and kvscope-cuda") << true << "cannot load " + full_root_ + lib + ": libcu";
    }
    void cudaUnavailable() {
        QFETCH(bool, full);
        QFETCH(QString, why);
        const QString root = full ? full_root_ : main_root_;
        if (full) {
            const Run ldd = hidden("ldd", {root + "/usr/lib/kvscope/libkvscope-cuda.so"});
            const QString cudart = ldd.out.section("libcudart.so", 1, 1).section('\n', 0, 0);
            if (!cudart.contains("not found"))
                QSKIP(qPrintable("the CUDA runtime is within reach here (libcudart.so" + cudart +
                                 "): no library path without it"));
        }
        const QString cli = root + "/usr/bin/kvscope-cli";
        const Run cuda = hidden(cli, generate_args("cuda"));
        QVERIFY2(cuda.code == 2, qPrintable(QString("exit %1: %2").arg(cuda.code).arg(cuda.err)));
        QVERIFY2(cuda.err.contains("backend cuda is not available: ") && cuda.err.contains(why), qPrintable(cuda.err));
        QVERIFY(cuda.out.isEmpty());
        const Run fallback = hidden(cli, generate_args("auto"));
        QVERIFY2(fallback.code == 0, qPrintable(fallback.err));
        QCOMPARE(fallback.err.count(kFellBack), 1);
        QVERIFY2(fallback.err.contains(why), qPrintable(fallback.err));
        QCOMPARE(output_ids(fallback), native_ids_);
    }

    // No DISPLAY, no WAYLAND_DISPLAY, no QT_QPA_PLATFORM: --help still answers (it needs no QApplication).
    void guiHelpWithoutDisplay() {
        const Run r = hidden(full_root_ + "/usr/bin/kvscope", {"--help"});
        QVERIFY2(r.code == 0, qPrintable(QString("exit %1: %2").arg(r.code).arg(r.err)));
        QVERIFY2(r.out.contains("--model") && r.out.contains("--script"), qPrintable(r.out));
    }
};

QTEST_GUILESS_MAIN(TestPackage)
#include "test_package.moc"
