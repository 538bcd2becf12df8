// HTTPS end to end: kvscope-cli serve --ssl-certfile/--ssl-keyfile with a self-signed certificate made
// at test time by the openssl CLI (skipped, with the reason, where it is absent), a benchmark against it
// that verifies the server with --cacert, one with the wrong CA whose every request fails with a
// recorded certificate error (the run goes on and says so), --insecure, and bad TLS flags exiting 2.
#include "process_run.h"
#include "serve_process.h"
#include "test_support.h"

#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

using namespace kvscope;

namespace {

test::ProcessResult cli(const QStringList& args) {
    return test::run_process(QString::fromStdString(test::cli_path()), args, QProcessEnvironment::systemEnvironment(), 120);
}

// A self-signed certificate for 127.0.0.1 (its own CA), with its key.
bool make_certificate(const QString& dir, const QString& name, const QString& common_name, QByteArray* error) {
    const auto r = test::run_process("openssl",
                                     {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout",
                                      dir + "/" + name + ".key", "-out", dir + "/" + name + ".pem", "-subj",
                                      "/CN=" + common_name, "-addext", "subjectAltName=IP:127.0.0.1"},
                                     QProcessEnvironment::systemEnvironment(), 60);
    if (r.code != 0) *error = r.err.toUtf8();
    return r.code == 0;
}

QStringList workload() {
    return {"bench", "--model", "dummy:tiny", "--tokenizer", "dummy:tiny", "--dataset", "random", "--num-prompts", "12",
            "--input-len", "32", "--output-len", "8", "--seed", "5"};
}

}  // namespace

class TestServeTls : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (QStandardPaths::findExecutable("openssl").isEmpty())
            QSKIP("the openssl command is not installed: no certificate can be made for the HTTPS tests");
        QVERIFY(m_dir.isValid());
        QByteArray error;
        QVERIFY2(make_certificate(m_dir.path(), "server", "127.0.0.1", &error), error.constData());
        QVERIFY2(make_certificate(m_dir.path(), "other", "another CA", &error), error.constData());
        QVERIFY2(m_serve.start({"--model", "dummy:tiny", "--max-model-len", "256", "--threads", "1", "--ssl-certfile",
                                m_dir.filePath("server.pem"), "--ssl-keyfile", m_dir.filePath("server.key")},
                               &error),
                 error.constData());
        m_url = "https://127.0.0.1:" + QString::number(m_serve.port());
    }
    void cleanupTestCase() {
        QByteArray error;
        if (m_serve.port() > 0) QVERIFY2(m_serve.stop(&error), error.constData());
    }

    void benchVerifiesTheServerWithItsCa() {
        const QString out = m_dir.filePath("ok.json");
        const auto r = cli(workload() + QStringList{"--base-url", m_url, "--cacert", m_dir.filePath("server.pem"),
                                                    "--max-concurrency", "2", "--output-json", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const nlohmann::json j = test::read_json(out);
        QCOMPARE(j["completed"].get<int>(), 12);
        QCOMPARE(j["failed"].get<int>(), 0);
        QCOMPARE(j["target"]["engine"].get<std::string>(), std::string("kvscope"));  // /version over TLS too
        QCOMPARE(j["target"]["tls"].get<std::string>(), std::string("verified (--cacert)"));
        QVERIFY(j["server_metrics"]["scrapes"].get<int>() >= 1);
        QCOMPARE(j["server_metrics"]["failed_scrapes"].get<int>(), 0);
        QVERIFY(j["connections_opened"].get<int>() < 12);  // kept alive through TLS
    }

    // The server's certificate is not signed by the CA given: the run is refused before it starts (the
    // first call, /v1/models, cannot be made), with libcurl's reason and the URL, exit 1; nothing is
    // written as if a run had happened.
    void wrongCaIsRefusedBeforeTheRun() {
        const QString out = m_dir.filePath("wrong.json");
        const auto r = cli(workload() + QStringList{"--base-url", m_url, "--cacert", m_dir.filePath("other.pem"),
                                                    "--output-json", out});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("certificate") && r.err.contains(m_url + "/v1/models"), qPrintable(r.err));
        QVERIFY(!QFile::exists(out));
    }

    // Without --cacert the system store does not know a self-signed certificate; --insecure skips the check.
    void systemStoreRefusesAndInsecureAccepts() {
        auto r = cli(workload() + QStringList{"--base-url", m_url, "--num-prompts", "2"});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("certificate"), qPrintable(r.err));
        const QString out = m_dir.filePath("insecure.json");
        r = cli(workload() + QStringList{"--base-url", m_url, "--insecure", "--output-json", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(test::read_json(out)["target"]["tls"].get<std::string>(), std::string("not verified (--insecure)"));
    }

    void badTlsFlagsExit2_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        const QString cert = m_dir.filePath("server.pem"), key = m_dir.filePath("server.key");
        QTest::newRow("cert without key") << QStringList{"--ssl-certfile", cert} << "--ssl-certfile needs --ssl-keyfile";
        QTest::newRow("missing cert") << QStringList{"--ssl-certfile", m_dir.filePath("none.pem"), "--ssl-keyfile", key}
                                      << "none.pem: cannot read the file";
        QTest::newRow("key is not a key") << QStringList{"--ssl-certfile", cert, "--ssl-keyfile", cert}
                                          << "not a readable PEM private key";
        QTest::newRow("key of another certificate")
            << QStringList{"--ssl-certfile", cert, "--ssl-keyfile", m_dir.filePath("other.key")}
            << "does not match the certificate";
    }
    void badTlsFlagsExit2() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        const auto r = cli(QStringList{"serve", "--model", "dummy:tiny", "--port", "0"} + args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }

private:
    QTemporaryDir m_dir;
    test::ServeProcess m_serve;
    QString m_url;
};

QTEST_GUILESS_MAIN(TestServeTls)
#include "test_serve_tls.moc"
