// BenchResultsModel under QAbstractItemModelTester: runs added, exported and loaded back from JSON
// (a session export and a single vLLM-keyed result), and a bad file reported with its name.
#include "bench_results_model.h"

#include <QAbstractItemModelTester>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QtTest>

using namespace kvscope::ui;

class TestBenchResultsModel : public QObject {
    Q_OBJECT
private slots:
    void addAndLoad() {
        BenchResultsModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        BenchResult r;
        r.spec.name = "run 1";
        r.summary = QJsonObject{{"completed", 8}, {"num_prompts", 8}, {"output_throughput", 123.4}, {"mean_ttft_ms", 5.5}};
        r.config = QJsonObject{{"mode", "paged"}};
        model.addResult(r);
        QCOMPARE(model.rowCount(), 1);
        QCOMPARE(model.index(0, BenchResultsModel::OutputTput).data().toString(), QString("123.4"));
        QCOMPARE(model.index(0, BenchResultsModel::Mode).data().toString(), QString("paged"));

        QTemporaryDir dir;
        const QString session = dir.filePath("session.json");
        QFile f(session);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QJsonDocument(QJsonObject{{"benchmarks", QJsonArray{BenchResultsModel::resultToJson(r)}}}).toJson());
        f.close();
        QString error;
        QCOMPARE(model.loadFile(session, &error), 1);
        QCOMPARE(model.rowCount(), 2);
        QCOMPARE(model.index(1, BenchResultsModel::Name).data().toString(), QString("run 1"));
        QCOMPARE(model.index(1, BenchResultsModel::Completed).data().toInt(), 8);

        const QString single = dir.filePath("vllm.json");
        QFile g(single);
        QVERIFY(g.open(QIODevice::WriteOnly));
        g.write(QJsonDocument(QJsonObject{{"completed", 100}, {"output_throughput", 999.0}}).toJson());
        g.close();
        QCOMPARE(model.loadFile(single, &error), 1);
        QCOMPARE(model.rowCount(), 3);
        QCOMPARE(model.index(2, BenchResultsModel::Name).data().toString(), QString("vllm"));

        QCOMPARE(model.loadFile(dir.filePath("missing.json"), &error), 0);
        QVERIFY(error.contains("missing.json"));
        model.clear();
        QCOMPARE(model.rowCount(), 0);
    }
};

QTEST_MAIN(TestBenchResultsModel)
#include "test_bench_results_model.moc"
