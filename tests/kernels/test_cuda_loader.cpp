// The loader of libkvscope-cuda.so (kernels/cuda_loader.h) on any machine: each way a library can fail to
// open names the path and the problem (no file, not a library, a missing dependency as where
// libcudart.so.13 is absent, another ABI, other kvscope headers, no entry points); the library this build
// made opens and passes its checks, and its probe says either what device it found or "no CUDA device";
// available_backends() and make_backend() agree with it. The failing libraries are the fakes of
// tests/support/fake_cuda_library.cpp.
#include "test_support.h"

#include "backend_factory.h"
#include "cuda_loader.h"

#include <QTemporaryDir>

using namespace kvscope;

namespace {

std::string fake(const char* which) { return std::string(KVSCOPE_FAKE_CUDA_DIR) + "/libfake_cuda_" + which + ".so"; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

class TestCudaLoader : public QObject {
    Q_OBJECT
private slots:
    void refused_data() {
        QTest::addColumn<QString>("path");
        QTest::addColumn<QStringList>("mentions");  // what the error must name
        QTest::newRow("no file") << "/nonexistent/libkvscope-cuda.so"
                                 << QStringList{"not found", "/nonexistent/libkvscope-cuda.so"};
        QTest::newRow("missing dependency")
            << QString::fromStdString(fake("missing_dependency"))
            << QStringList{"cannot load", QString::fromStdString(fake("missing_dependency")),
                           "libkvscope_test_absent.so: cannot open shared object file"};
        QTest::newRow("another ABI") << QString::fromStdString(fake("wrong_abi"))
                                     << QStringList{QString::fromStdString(fake("wrong_abi")), "library ABI 999",
                                                    "this program needs 1", "one kvscope build"};
        QTest::newRow("other headers") << QString::fromStdString(fake("other_interface"))
                                       << QStringList{"other kvscope headers", "0000000000000000"};
        // A shared library, but not ours: the one the missing-dependency fake wants.
        const QString absent = QString(KVSCOPE_FAKE_CUDA_DIR) + "/../absent/libkvscope_test_absent.so";
        QTest::newRow("no entry points") << absent
                                         << QStringList{"is not a kvscope CUDA library", "kvscope_cuda_abi_version"};
    }
    void refused() {
        QFETCH(QString, path);
        QFETCH(QStringList, mentions);
        const CudaLibrary lib = CudaLibrary::open(path.toStdString());
        QVERIFY(!lib.loaded());
        qInfo("%s", lib.error().c_str());
        for (const QString& m : mentions) QVERIFY2(contains(lib.error(), m.toStdString()), qPrintable(m));
    }

    void notALibrary() {
        QTemporaryDir dir;
        const QString path = dir.filePath("libkvscope-cuda.so");
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not an ELF file\n");
        f.close();
        const CudaLibrary lib = CudaLibrary::open(path.toStdString());
        QVERIFY(!lib.loaded());
        QVERIFY2(contains(lib.error(), "cannot load " + path.toStdString() + ": "), lib.error().c_str());
    }

    // A library that passes every check and has no device: the probe and create say so, and create
    // returns nothing.
    void noDevice() {
        const CudaLibrary lib = CudaLibrary::open(fake("no_device"));
        QVERIFY2(lib.loaded(), lib.error().c_str());
        const CudaAvailability a = lib.probe();
        QVERIFY(!a.available);
        QVERIFY2(contains(a.text, "no CUDA device"), a.text.c_str());
        std::string text;
        QVERIFY(!lib.create_backend(0, &text));
        QVERIFY2(contains(text, "no CUDA device"), text.c_str());
    }

    // The library this build made, where the loader looks for it (../lib/kvscope from tests/, as from
    // bin/ when installed): it loads, and either has a device or says "no CUDA device".
    void builtLibrary() {
        if (!cuda_backend_built()) QSKIP("this build has no CUDA backend (KVSCOPE_CUDA=OFF or no toolkit)");
        const std::string path = cuda_library_path();
        QVERIFY2(contains(path, "/lib/kvscope/libkvscope-cuda.so"), path.c_str());
        const CudaLibrary lib = CudaLibrary::open(path);
        QVERIFY2(lib.loaded(), lib.error().c_str());
        const CudaAvailability a = lib.probe();
        qInfo("%s: %s", a.available ? "available" : "not available", a.text.c_str());
        QVERIFY2(a.available || contains(a.text, "no CUDA device"), a.text.c_str());
    }

    // The selector's list and make_backend tell the same story.
    void availableBackends() {
        const auto list = available_backends();
        QCOMPARE(list.size(), size_t(3));
        QCOMPARE(list[0].name, std::string("cpu"));
        QVERIFY(list[0].available);
        QVERIFY2(contains(list[0].description, "thread"), list[0].description.c_str());
        QCOMPARE(list[1].name, std::string("cuda"));
        QCOMPARE(list[2].name, std::string("auto"));
        QVERIFY(list[2].available);
        const auto& cuda = list[1];
        QCOMPARE(cuda.available, cuda_availability().available);
        if (cuda.available) {
            QVERIFY(cuda.reason.empty());
            QVERIFY2(list[2].description.rfind("cuda: ", 0) == 0, list[2].description.c_str());
            return;  // a GPU machine: tests/gpu cover the backend itself
        }
        QVERIFY(!cuda.reason.empty());
        QVERIFY(cuda.description.empty());
        QVERIFY2(list[2].description.rfind("cpu: ", 0) == 0, list[2].description.c_str());
        try {
            make_backend("cuda", 1);
            QFAIL("make_backend(\"cuda\") must throw where CUDA is unavailable");
        } catch (const std::invalid_argument& e) {
            QVERIFY2(contains(e.what(), "backend cuda is not available: "), e.what());
        }
        std::string note;
        auto b = make_backend("auto", 1, &note);
        QCOMPARE(b->name(), std::string("cpu"));
        QVERIFY2(contains(note, "CUDA not available"), note.c_str());
    }
};

QTEST_GUILESS_MAIN(TestCudaLoader)
#include "test_cuda_loader.moc"
