// MappedFile: maps a file read-only and reports unreadable paths as BadInput naming the path.
#include "test_support.h"
#include "util/errors.h"
#include "util/mapped_file.h"

#include <QTemporaryDir>
#include <fstream>

using namespace kvscope;

class TestMappedFile : public QObject {
    Q_OBJECT
private slots:
    void mapsContents() {
        QTemporaryDir dir;
        std::string path = dir.filePath("a.bin").toStdString();
        std::ofstream(path, std::ios::binary) << "hello";
        MappedFile f(path);
        QCOMPARE(f.size(), size_t(5));
        QCOMPARE(std::string(reinterpret_cast<const char*>(f.data()), 5), std::string("hello"));
    }
    void missingFileNamesPath() {
        try {
            MappedFile f("/nonexistent/model.gguf");
            QFAIL("no error");
        } catch (const BadInput& e) {
            QVERIFY(std::string(e.what()).find("/nonexistent/model.gguf") != std::string::npos);
        }
    }
};

QTEST_GUILESS_MAIN(TestMappedFile)
#include "test_mapped_file.moc"
