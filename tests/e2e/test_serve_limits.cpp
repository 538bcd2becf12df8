// kvscope-cli serve against clients that are careless or hostile: one server process (with an API key and
// vLLM's metric names) for the whole suite. A body nested 100,000 deep, 1,000 idle and 100 one-byte-a-second
// sockets beside /health and a completion, 16 parallel 8 MB prompts and the server's memory after them, a
// 500,000-entry stop list, a body too large to read, a slow head, the API key, keep-alive, and the
// Prometheus text with vLLM's names. After each hostile case an ordinary request must still succeed.
#include "raw_socket.h"
#include "serve_process.h"

#include <QRegularExpression>
#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <thread>

using namespace kvscope::test;
using nlohmann::json;

namespace {

const QByteArray kKey = "test-key-4f1d";
const QByteArray kAuth = "Authorization: Bearer " + kKey + "\r\n";

QString model_path() { return QString::fromStdString(models_dir() + "/stories260K-hf"); }

// The status of the response on a raw socket (read until the server closes); 0 when none came.
int raw_status(int fd, std::string* body = nullptr) {
    const std::string data = receive_until_close(fd);
    if (body) *body = data;
    return status_of(data);
}

double rss_mb(qint64 pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
    return -1;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

class TestServeLimits : public QObject {
    Q_OBJECT
    ServeProcess server_;
    int port_ = 0;

    // An ordinary completion: the server still serves after whatever came before.
    void expectServing() {
        const Reply r = post(port_, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 16}}, kAuth);
        QVERIFY2(r.status == 200, r.body.constData());
        QCOMPARE(json::parse(r.body.toStdString())["usage"]["completion_tokens"].get<int>(), 16);
    }

private slots:
    void initTestCase() {
        // 1,100 client sockets in this process besides the usual ones.
        rlimit lim{};
        ::getrlimit(RLIMIT_NOFILE, &lim);
        lim.rlim_cur = lim.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &lim);
        QByteArray error;
        QVERIFY2(server_.start({"--model", model_path(), "--max-model-len", "512", "--api-key", QString(kKey),
                                "--metrics-prefix", "vllm", "--header-timeout", "3"},
                               &error),
                 error.constData());
        port_ = server_.port();
    }

    void cleanupTestCase() {
        QByteArray error;
        QVERIFY2(server_.stop(&error), error.constData());
    }

    void apiKeyIsRequiredOnV1Routes() {
        const json body = {{"prompt", "Once"}, {"max_tokens", 2}};
        const Reply none = post(port_, "/v1/completions", body);
        QCOMPARE(none.status, 401);
        const json e = json::parse(none.body.toStdString());
        QCOMPARE(e["error"]["code"].get<std::string>(), std::string("invalid_api_key"));
        QCOMPARE(post(port_, "/v1/completions", body, "Authorization: Bearer wrong-key\r\n").status, 401);
        QCOMPARE(post(port_, "/v1/completions", body, "Authorization: Bearer " + kKey + "x\r\n").status, 401);
        QCOMPARE(http(port_, "GET", "/v1/models").status, 401);
        QCOMPARE(http(port_, "GET", "/v1/models", {}, kAuth).status, 200);
        QCOMPARE(post(port_, "/v1/completions", body, kAuth).status, 200);
        // Liveness and scraping need no key, as in vLLM.
        QCOMPARE(http(port_, "GET", "/health").status, 200);
        QCOMPARE(http(port_, "GET", "/metrics").status, 200);
    }

    void deeplyNestedBodyIsRefused_data() {
        QTest::addColumn<QByteArray>("field");
        QTest::newRow("max_tokens") << QByteArray("max_tokens");
        QTest::newRow("stop") << QByteArray("stop");
        QTest::newRow("prompt") << QByteArray("prompt");
    }
    void deeplyNestedBodyIsRefused() {
        QFETCH(QByteArray, field);
        const int depth = 100000;
        QByteArray body = "{";
        if (field != "prompt") body += "\"prompt\": \"Once\", ";
        body += "\"" + field + "\": " + QByteArray(depth, '[') + QByteArray(depth, ']') + "}";
        const Reply r = http(port_, "POST", "/v1/completions", body, kAuth);
        QCOMPARE(r.status, 400);
        const json e = json::parse(r.body.toStdString());
        QVERIFY2(e["error"]["message"].get<std::string>().find("nests deeper") != std::string::npos, r.body.constData());
        QVERIFY(r.body.size() < 1000);  // the value is never echoed back
        expectServing();
    }

    // Brackets inside strings are text, escaped quotes included: a prompt of 300 brackets is no nesting.
    void bracketsInStringsAreNotNesting() {
        const std::string brackets = std::string(150, '[') + "\\\"" + std::string(150, '{');
        const QByteArray body = QByteArray::fromStdString(R"({"prompt": ")" + brackets + R"(", "max_tokens": 2})");
        const Reply r = http(port_, "POST", "/v1/completions", body, kAuth);
        QVERIFY2(r.status == 200, r.body.constData());
    }

    // 90,000 small objects in one body are read (nlohmann's parse callback, which checked the depth before,
    // made this quadratic: 400,000 took about 25 s of a core). Past --max-json-containers (100,000) a body
    // is refused before it is parsed: 3.5 million in 28 MB took 650 MB of memory to parse.
    void manySmallObjectsParseInLinearTime() {
        auto body_of = [](int objects) {
            QByteArray body = R"({"prompt": "Once", "max_tokens": 2, "user_data": [)";
            for (int i = 0; i < objects; ++i) body += i ? ",{}" : "{}";
            return body + "]}";
        };
        const auto t0 = std::chrono::steady_clock::now();
        const Reply r = http(port_, "POST", "/v1/completions", body_of(90000), kAuth);
        const double s = seconds_since(t0);
        QVERIFY2(r.status == 200, r.body.constData());
        QVERIFY2(s < 8, qPrintable(QString("%1 s").arg(s)));
        const Reply refused = http(port_, "POST", "/v1/completions", body_of(400000), kAuth);
        QCOMPARE(refused.status, 400);
        QVERIFY2(refused.body.contains("more than 100000 arrays and objects (--max-json-containers)"), refused.body.constData());
        expectServing();
    }

    // 1,000 idle sockets and 100 that send their head one byte a second hold no worker thread: /health
    // and a 16-token completion take no more than a second longer than without them.
    void idleAndSlowClientsDoNotDelayOthers() {
        auto time_both = [&] {
            const auto t0 = std::chrono::steady_clock::now();
            const int health = http(port_, "GET", "/health").status;
            const double health_s = seconds_since(t0);
            const auto t1 = std::chrono::steady_clock::now();
            const Reply c = post(port_, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 16}}, kAuth);
            const double completion_s = seconds_since(t1);
            return std::tuple{health, health_s, c.status, completion_s};
        };
        const auto [h0, health_base, c0, completion_base] = time_both();
        QCOMPARE(h0, 200);
        QCOMPARE(c0, 200);

        std::vector<int> idle, slow;
        for (int i = 0; i < 1000; ++i) {
            const int fd = connect_loopback(port_);
            QVERIFY2(fd >= 0, "connect failed");
            idle.push_back(fd);
        }
        const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
        for (int i = 0; i < 100; ++i) {
            const int fd = connect_loopback(port_);
            QVERIFY2(fd >= 0, "connect failed");
            slow.push_back(fd);
        }
        double worst_health = 0, worst_completion = 0;
        for (size_t byte = 0; byte < 3; ++byte) {
            for (int fd : slow) send_all(fd, head.substr(byte, 1));
            const auto [h, health_s, c, completion_s] = time_both();
            QCOMPARE(h, 200);
            QCOMPARE(c, 200);
            worst_health = std::max(worst_health, health_s);
            worst_completion = std::max(worst_completion, completion_s);
            std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        }
        qInfo("baseline: /health %.3f s, completion %.3f s; beside 1100 idle/slow sockets: %.3f s, %.3f s", health_base,
              completion_base, worst_health, worst_completion);
        QVERIFY(worst_health < health_base + 1.0);
        QVERIFY(worst_completion < completion_base + 1.0);

        // The slow heads ran past --header-timeout 3: the server answered 408 (an OpenAI error naming the
        // limit) and closed them.
        std::string answer;
        const int status = raw_status(slow.front(), &answer);
        QVERIFY2(status == 408, answer.c_str());
        QVERIFY2(answer.find("--header-timeout") != std::string::npos, answer.c_str());
        for (int fd : idle) ::close(fd);
        for (int fd : slow) ::close(fd);
        expectServing();
    }

    // With every generation worker busy streaming (a second server with --http-threads 2), /health and
    // /metrics still answer at once: they have their own threads.
    void healthAnswersWhenGenerationFillsEveryWorker() {
        ServeProcess small;
        QByteArray error;
        QVERIFY2(small.start({"--model", model_path(), "--max-model-len", "512", "--http-threads", "2"}, &error),
                 error.constData());
        std::vector<int> streams;
        const std::string body = json{{"prompt", "Once"}, {"max_tokens", 500}, {"ignore_eos", true}, {"stream", true}}.dump();
        for (int i = 0; i < 3; ++i) {  // two hold the workers, the third waits in the queue
            const int fd = connect_loopback(small.port());
            QVERIFY(fd >= 0);
            QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                 "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
            streams.push_back(fd);
        }
        char first[64];
        QVERIFY(::recv(streams[0], first, sizeof first, 0) > 0);  // the streams are running
        for (const char* path : {"/health", "/metrics", "/v1/models"}) {
            const auto t = std::chrono::steady_clock::now();
            QCOMPARE(http(small.port(), "GET", path).status, 200);
            QVERIFY2(seconds_since(t) < 1.0, path);
        }
        for (int fd : streams) ::close(fd);  // the server aborts them
        QVERIFY2(small.stop(&error), error.constData());
    }

    // --write-timeout counts a client's silence, not its whole download: a reader that takes several times
    // the timeout over a body of megabytes, reading all the while, gets all of it (it was cut off at the
    // timeout, a 200 with half its JSON). Not shorter than 3 s: the kernel wakes a blocked writer only once a
    // third of its send buffer (up to 4 MB) has drained, about a second at this reader's pace.
    void slowReaderGetsTheWholeBody() {
        ServeProcess small;
        QByteArray error;
        QVERIFY2(small.start({"--model", model_path(), "--max-model-len", "512", "--write-timeout", "3"}, &error),
                 error.constData());
        const std::string body = json{{"prompt", "Once"}, {"n", 40}, {"max_tokens", 400}, {"ignore_eos", true},
                                      {"logprobs", 20}, {"seed", 1}}.dump();
        const int fd = connect_loopback(small.port(), 16384);
        QVERIFY(fd >= 0);
        QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body));
        std::string reply;
        char buf[16384];
        std::optional<std::chrono::steady_clock::time_point> t0;  // the first byte: generation is not download
        for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
            if (!t0) t0 = std::chrono::steady_clock::now();
            reply.append(buf, static_cast<size_t>(n));
            // Paced by bytes at 1 MB/s, whatever the kernel's window hands each recv.
            std::this_thread::sleep_until(*t0 + std::chrono::microseconds(reply.size()));
        }
        ::close(fd);
        const double seconds = t0 ? seconds_since(*t0) : 0;
        const size_t head_end = reply.find("\r\n\r\n");
        QVERIFY2(head_end != std::string::npos, reply.substr(0, 200).c_str());
        QCOMPARE(status_of(reply), 200);
        const json parsed = json::parse(reply.substr(head_end + 4), nullptr, false);
        QVERIFY2(!parsed.is_discarded(), qPrintable(QString("%1 bytes in %2 s, not whole JSON").arg(reply.size()).arg(seconds)));
        QCOMPARE(parsed["choices"].size(), size_t(40));
        qInfo("%zu bytes read in %.1f s with --write-timeout 3", reply.size(), seconds);
        // Longer than the timeout past what the socket buffers hold (a few MB), or the test proves nothing.
        QVERIFY2(seconds > 6, "the body came too fast to outlast the timeout twice");
        QVERIFY2(small.stop(&error), error.constData());
    }

    // Clients that send a whole head and then none of the body they declared are held by the gate, not by
    // generation workers (a second server with --http-threads 2): a completion answers at once beside 8 of
    // them, and they get 408 when --body-timeout runs out. Before, they took every worker until then.
    void bodilessClientsDoNotHoldWorkers() {
        ServeProcess small;
        QByteArray error;
        QVERIFY2(small.start({"--model", model_path(), "--max-model-len", "512", "--http-threads", "2", "--body-timeout", "3"},
                             &error),
                 error.constData());
        std::vector<int> stalled;
        for (int i = 0; i < 8; ++i) {
            const int fd = connect_loopback(small.port());
            QVERIFY(fd >= 0);
            QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 100\r\n\r\n{\"prompt\""));
            stalled.push_back(fd);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the gate has them all
        const auto t = std::chrono::steady_clock::now();
        const Reply r = post(small.port(), "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 8}});
        QVERIFY2(r.status == 200, r.body.constData());
        QVERIFY2(seconds_since(t) < 2.0, qPrintable(QString::number(seconds_since(t))));
        std::string answer;
        QCOMPARE(raw_status(stalled.front(), &answer), 408);
        for (int fd : stalled) ::close(fd);
        QVERIFY2(small.stop(&error), error.constData());
    }

    // Oversized prompts are refused before they are tokenized, and leave no memory behind.
    void hugePromptsAreRefusedWithoutKeepingMemory() {
        expectServing();
        const double before = rss_mb(server_.pid());
        QVERIFY(before > 0);
        const std::string prompt(8 * 1024 * 1024, 'a');
        const std::string body = json{{"prompt", prompt}, {"max_tokens", 4}}.dump();
        const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                                    kAuth.toStdString() + "Content-Type: application/json\r\nContent-Length: " +
                                    std::to_string(body.size()) + "\r\n\r\n" + body;
        std::vector<int> statuses(16, -1);
        std::vector<std::string> answers(16);
        std::vector<std::thread> clients;
        for (int i = 0; i < 16; ++i)
            clients.emplace_back([&, i] {
                const int fd = connect_loopback(port_);
                if (fd < 0) return;
                if (send_all(fd, request)) statuses[i] = raw_status(fd, &answers[i]);
                ::close(fd);
            });
        for (auto& t : clients) t.join();
        for (int i = 0; i < 16; ++i) {
            QVERIFY2(statuses[i] == 400, answers[i].substr(0, 300).c_str());
            QVERIFY2(answers[i].find("--max-prompt-bytes") != std::string::npos, answers[i].substr(0, 300).c_str());
        }
        expectServing();
        QTest::qWait(500);
        const double after = rss_mb(server_.pid());
        qInfo("server RSS %.1f MB before, %.1f MB after 16 parallel 8 MB prompts", before, after);
        QVERIFY2(after < before + 50, qPrintable(QString("RSS %1 -> %2 MB").arg(before).arg(after)));
    }

    void longStopListIsRefused() {
        json stop = json::array();
        for (int i = 0; i < 500000; ++i) stop.push_back("s" + std::to_string(i));
        const Reply r = post(port_, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}, {"stop", stop}}, kAuth);
        QCOMPARE(r.status, 400);
        const json e = json::parse(r.body.toStdString());
        QCOMPARE(e["error"]["param"].get<std::string>(), std::string("stop"));
        QVERIFY(e["error"]["message"].get<std::string>().find("--max-stop") != std::string::npos);
        expectServing();
    }

    void boundsOnChoicesAndLogitBias() {
        Reply r = post(port_, "/v1/completions", {{"prompt", json::array({"a", "b", "c", "d", "e"})}, {"n", 64}}, kAuth);
        QCOMPARE(r.status, 400);
        QCOMPARE(json::parse(r.body.toStdString())["error"]["param"].get<std::string>(), std::string("n"));
        json bias = json::object();
        for (int i = 0; i < 2000; ++i) bias[std::to_string(i % 500)] = 1;  // 500 distinct keys: fine
        r = post(port_, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"logit_bias", bias}}, kAuth);
        QVERIFY2(r.status == 200, r.body.constData());
        r = post(port_, "/v1/completions", {{"prompt", "Once"}, {"logit_bias", {{"100000", 5}}}}, kAuth);
        QCOMPARE(r.status, 400);
        r = post(port_, "/v1/completions", {{"prompt", "Once"}, {"logit_bias", {{"7", 500}}}}, kAuth);
        QCOMPARE(r.status, 400);
    }

    // A bias of +100 on one token makes greedy decoding pick it at once (here it is also a stop token, so
    // the request ends after it); without the bias the same request runs to max_tokens.
    void logitBiasSteersSampling() {
        const json base = {{"prompt", json::array({1, 403})}, {"max_tokens", 5},       {"temperature", 0},
                           {"ignore_eos", true},              {"stop_token_ids", {300}}};
        json biased = base;
        biased["logit_bias"] = {{"300", 100}};
        const Reply r = post(port_, "/v1/completions", biased, kAuth);
        QVERIFY2(r.status == 200, r.body.constData());
        const json j = json::parse(r.body.toStdString());
        QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 1);
        QCOMPARE(j["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
        const json plain = json::parse(post(port_, "/v1/completions", base, kAuth).body.toStdString());
        QCOMPARE(plain["usage"]["completion_tokens"].get<int>(), 5);
    }

    // vLLM's cache_salt: a request reuses prefix-cache blocks only of requests with the same salt (a
    // second server, with prefix caching). The hits are read from /metrics, counted in tokens.
    void cacheSaltIsolatesPrefixCache() {
        ServeProcess cached;
        QByteArray error;
        QVERIFY2(cached.start({"--model", model_path(), "--max-model-len", "512", "--enable-prefix-caching"}, &error),
                 error.constData());
        std::vector<int> prompt;
        for (int i = 0; i < 70; ++i) prompt.push_back(10 + i);  // four full blocks of 16 and a partial one
        auto send = [&](const json& salt) {
            json body = {{"prompt", prompt}, {"max_tokens", 1}};
            if (!salt.is_null()) body["cache_salt"] = salt;
            const Reply r = post(cached.port(), "/v1/completions", body);
            QCOMPARE(r.status, 200);
        };
        // The counters are published after the step that answered the request: read until they settle.
        auto hits = [&] { return metric(http(cached.port(), "GET", "/metrics").body, "prefix_cache_hits_total"); };
        send("alice");
        send("alice");
        QTRY_COMPARE(hits(), 64.0);  // the four full blocks
        send("bob");                 // another salt: nothing shared
        send(json());                // no salt is a salt of its own
        send(json());
        QTRY_COMPARE(hits(), 128.0);
        QTest::qWait(300);
        QCOMPARE(hits(), 128.0);  // had bob or the first unsalted request shared, it would be 192 or more
        for (const json& bad : {json(3), json(""), json(std::string(2000, 'x'))}) {
            const Reply r = post(cached.port(), "/v1/completions", {{"prompt", prompt}, {"max_tokens", 1}, {"cache_salt", bad}});
            QCOMPARE(r.status, 400);
            QCOMPARE(json::parse(r.body.toStdString())["error"]["param"].get<std::string>(), std::string("cache_salt"));
        }
        QVERIFY2(cached.stop(&error), error.constData());
    }

    void bodyTooLargeIsRefusedUnread() {
        const int fd = connect_loopback(port_);
        QVERIFY(fd >= 0);
        QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth.toStdString() +
                                 "Content-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n"));
        std::string answer;
        QCOMPARE(raw_status(fd, &answer), 413);
        QVERIFY(answer.find("--max-request-bytes") != std::string::npos);
        ::close(fd);
        expectServing();
    }

    // A client that waits for 100 Continue before its body hears the 413 instead, and sends nothing.
    void expectContinueOverTheLimitIsRefusedFirst() {
        const int fd = connect_loopback(port_);
        QVERIFY(fd >= 0);
        QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth.toStdString() +
                                 "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 100000000000\r\n\r\n"));
        std::string answer;
        QCOMPARE(raw_status(fd, &answer), 413);  // the first status line: no 100 before it
        ::close(fd);
        expectServing();
    }

    // A chunked body past --max-request-bytes (32 MiB here) declares no length to refuse up front: it is
    // read up to the limit, answered 413, and the rest the client sends is drained rather than reset, so
    // that the answer reaches a client that reads only after sending everything.
    void chunkedBodyOverTheLimitIsAnswered413() {
        const int fd = connect_loopback(port_);
        QVERIFY(fd >= 0);
        QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth.toStdString() +
                                 "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"));
        const std::string chunk = "100000\r\n" + std::string(1 << 20, ' ') + "\r\n";  // 1 MiB of white space
        for (int i = 0; i < 34; ++i) QVERIFY2(send_all(fd, chunk), qPrintable(QString("chunk %1 was not taken").arg(i)));
        std::string answer;
        QCOMPARE(raw_status(fd, &answer), 413);
        QVERIFY2(answer.find("--max-request-bytes") != std::string::npos, answer.c_str());
        ::close(fd);
        expectServing();
    }

    // Range is ignored, as vLLM ignores it: a completion is whole JSON (not a 21-byte slice), and 1,024
    // ranges of /metrics are one ordinary reply (not a 29 MB multipart body that 8 clients who never read
    // it held the control workers with).
    void rangeHeadersAreIgnored() {
        std::string ranges = "bytes=0-";
        for (int i = 0; i < 1023; ++i) ranges += ",0-";
        const int fd = connect_loopback(port_);
        QVERIFY(fd >= 0);
        QVERIFY(send_all(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nRange: " + ranges + "\r\n\r\n"));
        std::string answer;
        QCOMPARE(raw_status(fd, &answer), 200);
        ::close(fd);
        QVERIFY2(answer.find("multipart/byteranges") == std::string::npos, answer.substr(0, 300).c_str());
        QVERIFY2(answer.size() < 1000000, qPrintable(QString::number(answer.size())));
        const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 4})";
        const int fd2 = connect_loopback(port_);
        QVERIFY(fd2 >= 0);
        QVERIFY(send_all(fd2, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth.toStdString() +
                                  "Connection: close\r\nRange: bytes=0-20\r\nContent-Type: application/json\r\n"
                                  "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
        QCOMPARE(raw_status(fd2, &answer), 200);
        ::close(fd2);
        const size_t start = answer.find("\r\n\r\n");
        QVERIFY(start != std::string::npos);
        QVERIFY2(json::accept(answer.substr(start + 4)), answer.c_str());
        QVERIFY(answer.find("Content-Range") == std::string::npos);
    }

    // Request framing as RFC 9112 asks of a server, answered at once and closed: a POST without a length
    // (read until the client closed: nothing for --body-timeout seconds), both framings at once, two
    // lengths, a signed length, a coding other than chunked. Each would let a request hide another
    // behind a proxy that frames it differently.
    void ambiguousFramingIsRefused_data() {
        QTest::addColumn<QByteArray>("headers");
        QTest::addColumn<int>("status");
        QTest::newRow("no length") << QByteArray("") << 411;
        QTest::newRow("length and chunked") << QByteArray("Content-Length: 2\r\nTransfer-Encoding: chunked\r\n") << 400;
        QTest::newRow("two lengths") << QByteArray("Content-Length: 2\r\nContent-Length: 40\r\n") << 400;
        QTest::newRow("signed length") << QByteArray("Content-Length: +2\r\n") << 400;
        QTest::newRow("gzip coding") << QByteArray("Transfer-Encoding: gzip\r\n") << 501;
        QTest::newRow("chunked, identity") << QByteArray("Transfer-Encoding: chunked, identity\r\n") << 501;
        // Malformed heads (RFC 9112 section 5), which httplib would skip or keep as they are: answered 400.
        QTest::newRow("space before colon") << QByteArray("Transfer-Encoding : chunked\r\nContent-Length: 2\r\n") << 400;
        QTest::newRow("line without colon") << QByteArray("Content-Length: 2\r\nbadheader\r\n") << 400;
        QTest::newRow("NUL in a value") << (QByteArray("Content-Length: 2\r\nX-A: a") + '\0' + QByteArray("b\r\n")) << 400;
        QTest::newRow("folded line") << QByteArray("Content-Length: 2\r\nX-A: a\r\n b\r\n") << 400;
        QTest::newRow("two hosts") << QByteArray("Content-Length: 2\r\nHost: y\r\n") << 400;
    }
    void ambiguousFramingIsRefused() {
        QFETCH(QByteArray, headers);
        QFETCH(int, status);
        const auto start = std::chrono::steady_clock::now();
        const int fd = connect_loopback(port_);
        QVERIFY(fd >= 0);
        QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth.toStdString() + headers.toStdString() +
                                 "\r\n{}"));
        std::string answer;
        QCOMPARE(raw_status(fd, &answer), status);  // and the server closed the connection
        ::close(fd);
        QVERIFY2(seconds_since(start) < 5, qPrintable(QString::number(seconds_since(start))));
        QVERIFY2(answer.find("\"error\"") != std::string::npos, answer.c_str());
        // The head says once that the connection closes, and offers no Keep-Alive (httplib's own headers
        // repeated the first and added the second).
        const std::string head = answer.substr(0, answer.find("\r\n\r\n"));
        const size_t close_at = head.find("\r\nConnection: close");
        QVERIFY2(close_at != std::string::npos && head.find("\r\nConnection:", close_at + 2) == std::string::npos, head.c_str());
        QVERIFY2(head.find("Keep-Alive") == std::string::npos, head.c_str());
        expectServing();
    }

    // RFC 9112 section 3.2: an HTTP/1.1 request without Host is answered 400, also the second request on a
    // kept-alive connection, which the worker reads without the gate.
    void requestWithoutHostIsRefused() {
        const int fd = connect_loopback(port_);
        QVERIFY(fd >= 0);
        QVERIFY(send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\n\r\n"));
        std::string answer;
        QCOMPARE(raw_status(fd, &answer), 200);
        ::close(fd);
        const size_t second = answer.find("HTTP/1.1 ", 1);
        QVERIFY2(second != std::string::npos, answer.c_str());
        QCOMPARE(status_of(answer.substr(second)), 400);
        QVERIFY2(answer.find("needs a Host header") != std::string::npos, answer.c_str());
        expectServing();
    }

    // An HTTP/1.0 client has no chunked coding (RFC 9112 section 6.1): its stream comes unframed and ends
    // when the server closes the connection, with the same events.
    void http10StreamIsNotChunked() {
        const std::string body = R"({"prompt": "Once upon", "max_tokens": 3, "stream": true})";
        const int fd = connect_loopback(port_);
        QVERIFY(fd >= 0);
        QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.0\r\n" + kAuth.toStdString() +
                                 "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                                 "\r\n\r\n" + body));
        std::string answer;
        QCOMPARE(raw_status(fd, &answer), 200);  // read until the server closed
        ::close(fd);
        QVERIFY2(answer.find("Transfer-Encoding") == std::string::npos, answer.c_str());
        const size_t events = answer.find("\r\n\r\n");
        QVERIFY(events != std::string::npos);
        QVERIFY2(answer.compare(events + 4, 6, "data: ") == 0, answer.c_str());
        QVERIFY2(answer.size() > 14 && answer.compare(answer.size() - 14, 14, "data: [DONE]\n\n") == 0, answer.c_str());
    }

    // Several requests on one connection, each answered in turn.
    void keepAliveCarriesSeveralRequests() {
        const int fd = connect_loopback(port_);
        QVERIFY(fd >= 0);
        timeval tv{20, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        std::string pending;
        char buf[4096];
        for (int i = 0; i < 3; ++i) {
            const std::string body = json{{"prompt", "Once"}, {"max_tokens", 3}}.dump();
            QVERIFY(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + kAuth.toStdString() +
                                     "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                                     "\r\n\r\n" + body));
            // One response: its head, then Content-Length bytes.
            size_t head_end;
            while ((head_end = pending.find("\r\n\r\n")) == std::string::npos) {
                const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
                QVERIFY2(n > 0, "the server closed a kept-alive connection");
                pending.append(buf, static_cast<size_t>(n));
            }
            QVERIFY2(pending.rfind("HTTP/1.1 200", 0) == 0, pending.c_str());
            const QRegularExpressionMatch m =
                QRegularExpression("Content-Length: (\\d+)", QRegularExpression::CaseInsensitiveOption)
                    .match(QString::fromStdString(pending.substr(0, head_end)));
            QVERIFY(m.hasMatch());
            const size_t length = m.captured(1).toULong();
            while (pending.size() < head_end + 4 + length) {
                const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
                QVERIFY(n > 0);
                pending.append(buf, static_cast<size_t>(n));
            }
            QCOMPARE(json::parse(pending.substr(head_end + 4, length))["usage"]["completion_tokens"].get<int>(), 3);
            pending.erase(0, head_end + 4 + length);
        }
        ::close(fd);
    }

    // With --metrics-prefix vllm the families carry vLLM's names and labels, and the text parses as the
    // Prometheus text format: HELP and TYPE before the samples, cumulative buckets ending in +Inf = count.
    void metricsAreVllmPrometheusText() {
        expectServing();
        const Reply r = http(port_, "GET", "/metrics");
        QCOMPARE(r.status, 200);
        QVERIFY(r.head.toLower().contains("content-type: text/plain; version=0.0.4"));
        for (const char* name :
             {"vllm:num_requests_running{", "vllm:num_requests_waiting{", "vllm:kv_cache_usage_perc{",
              "vllm:prompt_tokens_total{", "vllm:generation_tokens_total{", "vllm:num_preemptions_total{",
              "vllm:prefix_cache_queries_total{", "vllm:prefix_cache_hits_total{",
              "vllm:request_success_total{model_name=\"stories260K-hf\",engine=\"0\",finished_reason=\"error\"}",
              "vllm:cache_config_info{block_size=\"16\"", "num_gpu_blocks=\"", "vllm:iteration_tokens_total_bucket{",
              "vllm:inter_token_latency_seconds_bucket{", "vllm:time_to_first_token_seconds_bucket{",
              "vllm:request_time_per_output_token_seconds_count{", "vllm:e2e_request_latency_seconds_sum{",
              "vllm:request_queue_time_seconds_count{", "vllm:request_prefill_time_seconds_count{",
              "vllm:request_decode_time_seconds_count{", "vllm:request_params_max_tokens_count{",
              "le=\"0.001\"", "le=\"2560.0\"", "le=\"+Inf\""})
            QVERIFY2(r.body.contains(name), name);
        QVERIFY(!r.body.contains("kvscope:kv_cache_usage_perc"));
        QVERIFY(metric(r.body, "generation_tokens_total", {}, "vllm") >= 16);
        QVERIFY(metric(r.body, "request_success_total", "finished_reason=\"length\"", "vllm") >= 1);

        // The text format, line by line.
        // (An ordinary string literal: moc does not read raw ones.)
        const QRegularExpression sample(
            "^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{([a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\",?)*\\})? (-?[0-9.e+-]+|\\+Inf|NaN)$");
        QMap<QByteArray, QByteArray> type_of;
        QByteArray last_family;
        double last_bucket = -1, count_of_inf = -1;
        for (const QByteArray& line : r.body.split('\n')) {
            if (line.isEmpty()) continue;
            if (line.startsWith("# HELP ")) continue;
            if (line.startsWith("# TYPE ")) {
                const QList<QByteArray> parts = line.split(' ');
                QCOMPARE(parts.size(), 4);
                QVERIFY2(!type_of.contains(parts[2]), line.constData());  // one TYPE per family
                type_of[parts[2]] = parts[3];
                last_family = parts[2];
                last_bucket = -1;
                continue;
            }
            const QRegularExpressionMatch m = sample.match(QString::fromUtf8(line));
            QVERIFY2(m.hasMatch(), line.constData());
            const QByteArray name = m.captured(1).toUtf8();
            QVERIFY2(name == last_family || name == last_family + "_bucket" || name == last_family + "_sum" ||
                         name == last_family + "_count",
                     line.constData());  // samples follow their family's TYPE line
            const double value = line.mid(line.lastIndexOf(' ') + 1).toDouble();
            if (name.endsWith("_bucket")) {
                QVERIFY2(value >= last_bucket, line.constData());  // cumulative
                last_bucket = value;
                if (line.contains("le=\"+Inf\"")) count_of_inf = value;
            } else if (name.endsWith("_count") && type_of[last_family] == "histogram") {
                QCOMPARE(value, count_of_inf);
            }
        }
        QCOMPARE(type_of["vllm:iteration_tokens_total"], QByteArray("histogram"));
        QCOMPARE(type_of["vllm:request_success_total"], QByteArray("counter"));
        QCOMPARE(type_of["vllm:num_requests_running"], QByteArray("gauge"));
    }
};

QTEST_GUILESS_MAIN(TestServeLimits)
#include "test_serve_limits.moc"
