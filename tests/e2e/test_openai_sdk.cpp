// The official OpenAI JS SDK against a real kvscope-cli serve: it parses logprobs from the completions
// and chat endpoints (plain and streamed) into what the server computed. The SDK is an npm package, not a
// Debian one, so it is not a build dependency: the test runs where node finds `openai` (NODE_PATH, e.g.
// `npm install --prefix DIR openai` then NODE_PATH=DIR/node_modules) and is reported as skipped elsewhere.
#include "serve_process.h"

#include <QStandardPaths>

using namespace kvscope;
using namespace kvscope::test;
using nlohmann::json;

class TestOpenAiSdk : public QObject {
    Q_OBJECT
    ServeProcess server_;
    QString node_;

private slots:
    void initTestCase() {
        node_ = QStandardPaths::findExecutable("node");
        if (node_.isEmpty()) QSKIP("node is not installed");
        QProcess probe;
        probe.start(node_, {"-e", "require.resolve('openai')"});
        if (!probe.waitForFinished(30000) || probe.exitCode() != 0)
            QSKIP("the openai npm package is not on NODE_PATH (npm install --prefix DIR openai; NODE_PATH=DIR/node_modules)");
        QByteArray error;
        QVERIFY2(server_.start({"--model", QString::fromStdString(models_dir() + "/stories260K-hf")}, &error),
                 error.constData());
    }

    void cleanupTestCase() {
        QByteArray error;
        QVERIFY2(server_.stop(&error), error.constData());
    }

    void readsLogprobs() {
        QProcess p;
        p.start(node_, {QStringLiteral(KVSCOPE_TESTS_DIR "/e2e/openai_sdk_logprobs.cjs"),
                        QString("http://127.0.0.1:%1/v1").arg(server_.port())});
        QVERIFY(p.waitForFinished(60000));
        const QByteArray err = p.readAllStandardError();
        QVERIFY2(p.exitCode() == 0, err.constData());
        const json j = json::parse(p.readAllStandardOutput().toStdString());

        const json& c = j["completion"];
        QCOMPARE(c["tokens"].size(), size_t(6));
        std::string text;
        for (size_t t = 0; t < 6; ++t) {
            QCOMPARE(c["top_logprobs"][t].size(), size_t(3));
            // Greedy: the token is its own best alternative, with the same log-probability.
            QCOMPARE(c["top_logprobs"][t][c["tokens"][t].get<std::string>()], c["token_logprobs"][t]);
            QVERIFY(c["token_logprobs"][t].get<double>() <= 0);
            QCOMPARE(c["text_offset"][t].get<size_t>(), text.size());
            text += c["tokens"][t].get<std::string>();
        }
        QCOMPARE(text, j["completion_text"].get<std::string>());

        // The plain and the streamed chat give the same tokens and values.
        QCOMPARE(j["chat"].size(), size_t(6));
        QCOMPARE(j["streamed"], j["chat"]);
        std::string chat_text;
        for (const json& t : j["chat"]) {
            QCOMPARE(t["top_logprobs"].size(), size_t(2));
            QCOMPARE(t["top_logprobs"][0]["token"], t["token"]);
            QVERIFY(t["top_logprobs"][1]["logprob"].get<double>() <= t["logprob"].get<double>());
            chat_text += t["token"].get<std::string>();
        }
        QCOMPARE(chat_text, j["chat_text"].get<std::string>());
    }
};

QTEST_GUILESS_MAIN(TestOpenAiSdk)
#include "test_openai_sdk.moc"
