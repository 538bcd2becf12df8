// kvscope-cli bench --base-url end to end, against real servers started by the test: `kvscope-cli
// serve` as a subprocess (the same workload gives the same completed count and token totals as the
// local engine; the scraped KV-usage series rises and falls; --max-concurrency holds exactly; the chat
// endpoint with the server's /tokenize; 401 and 404), and a small misbehaving cpp-httplib server in
// this process for the rest of the bad endpoints (500, a stream that hangs, malformed SSE, a stream
// closed without [DONE], one that fails every other request). Each bad case ends its requests with a
// recorded error, the run finishes and says how many failed, and nothing hangs.
#include "process_run.h"
#include "serve_process.h"
#include "test_support.h"

#include "remote/metrics_scraper.h"

#include <QTcpServer>
#include <QTemporaryDir>
#include <QtTest>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

using kvscope::test::ProcessResult;

namespace {

// A server that answers /<case>/v1/completions the wrong way, one way per case, from its second request
// on: the first is the benchmark's test request, which must pass for the run to start. /v1/models lists
// the workload's model.
class MisbehavingServer {
public:
    MisbehavingServer() {
        // /moved/...: a 301 to /good/... (a proxy's moved path), for GETs and POSTs alike.
        auto moved = [](const httplib::Request& req, httplib::Response& res) {
            res.set_redirect("/good" + req.matches[1].str(), 301);
        };
        server_.Get(R"(/moved(/.*))", moved);
        server_.Post(R"(/moved(/.*))", moved);
        server_.Get(R"(/(\w+)/v1/models)", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"object": "list", "data": [{"id": "dummy:tiny", "object": "model", "owned_by": "vllm"}]})", "application/json");
        });
        server_.Post(R"(/(\w+)/v1/completions)", [this](const httplib::Request& req, httplib::Response& res) {
            const std::string mode = req.matches[1];
            int seen = 0;
            {
                std::lock_guard lock(mutex_);
                seen = count_[mode]++;
            }
            if (seen == 0 || mode == "good") good(res);
            else if (mode == "flaky" && seen % 2 == 1) mode_500(res);
            else if (mode == "flaky") good(res);
            else if (mode == "err500") mode_500(res);
            else if (mode == "malformed") stream(res, "data: {\"choices\":[{\"text\":\"a\"\n\n", false);
            else if (mode == "nodone") stream(res, event("a") + event("b"), false);
            else if (mode == "hang") stream(res, event("a"), true);
            else res.status = 404;
        });
        port_ = server_.bind_to_any_port("127.0.0.1");
        thread_ = std::thread([this] { server_.listen_after_bind(); });
    }
    ~MisbehavingServer() {
        stopping_ = true;
        server_.stop();
        thread_.join();
    }
    int port() const { return port_; }

private:
    static std::string event(const std::string& text, const char* finish = nullptr) {
        const nlohmann::json c = {{"index", 0}, {"text", text}, {"finish_reason", finish ? nlohmann::json(finish) : nlohmann::json()}};
        return "data: " + nlohmann::json{{"choices", {c}}}.dump() + "\n\n";
    }
    static void mode_500(httplib::Response& res) {
        res.status = 500;
        res.set_content("{\"error\":{\"message\":\"internal failure\"}}", "application/json");
    }
    static void good(httplib::Response& res) {
        res.set_content(event("a") + event("b") + event("c", "length") +
                            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n",
                        "text/event-stream");
    }
    // Sends `body` as a chunked event stream, then ends it (or, with hang, stays silent until stopped).
    void stream(httplib::Response& res, std::string body, bool hang) {
        res.set_chunked_content_provider("text/event-stream", [this, body, hang](size_t, httplib::DataSink& sink) {
            sink.write(body.data(), body.size());
            for (int i = 0; hang && !stopping_ && i < 400; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
            if (hang) return false;
            sink.done();
            return true;
        });
    }

    httplib::Server server_;
    std::thread thread_;
    std::atomic<bool> stopping_{false};
    std::mutex mutex_;
    std::map<std::string, int> count_;  // requests per mode
    int port_ = 0;
};

QProcessEnvironment clean_env() {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("OPENAI_API_KEY");
    return env;
}

ProcessResult bench(const QStringList& args, const QProcessEnvironment& env = clean_env()) {
    return kvscope::test::run_process(QString::fromStdString(kvscope::test::cli_path()), QStringList{"bench"} + args,
                                      env, 120);
}


QStringList workload(int n, int output_len = 16) {
    return {"--model", "dummy:tiny", "--dataset", "random", "--num-prompts", QString::number(n), "--input-len", "48",
            "--output-len", QString::number(output_len), "--range-ratio", "0.5", "--seed", "3"};
}

// A port where nothing listens (bound, then released).
int closed_port() {
    QTcpServer s;
    if (!s.listen(QHostAddress::LocalHost)) return 1;
    const int port = s.serverPort();
    s.close();
    return port;
}

}  // namespace

class TestBenchRemote : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QVERIFY(m_dir.isValid());
        QByteArray error;
        // A small pool (40 blocks of 16 tokens) so that the load shows in KV usage.
        QVERIFY2(m_serve.start({"--model", "dummy:tiny", "--max-model-len", "256", "--threads", "1", "--num-blocks", "40"},
                               &error), error.constData());
        m_url = "http://127.0.0.1:" + QString::number(m_serve.port());
    }
    void cleanupTestCase() {
        QByteArray error;
        QVERIFY2(m_serve.stop(&error), error.constData());
    }

    void sameTotalsAsTheLocalEngine() {
        const QString local = m_dir.filePath("local.json"), remote = m_dir.filePath("remote.json"),
                      requests = m_dir.filePath("remote.jsonl"), csv = m_dir.filePath("remote.csv");
        const ProcessResult l = bench(workload(24) + QStringList{"--threads", "1", "--max-model-len", "256", "--output-json", local});
        QVERIFY2(l.code == 0, qPrintable(l.err));
        const ProcessResult r = bench(workload(24) + QStringList{"--base-url", m_url, "--tokenizer", "dummy:tiny",
                                                                 "--output-json", remote, "--output-requests", requests,
                                                                 "--output-csv", csv});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY(r.out.contains("Serving Benchmark Result"));
        const nlohmann::json a = kvscope::test::read_json(local), b = kvscope::test::read_json(remote);
        for (const char* k : {"completed", "failed", "total_input_tokens", "total_output_tokens"})
            QVERIFY2(a[k] == b[k], (std::string(k) + ": local " + a[k].dump() + ", remote " + b[k].dump()).c_str());
        QCOMPARE(b["completed"].get<int>(), 24);
        QCOMPARE(b["target"]["kind"].get<std::string>(), std::string("remote"));
        QCOMPARE(b["target"]["engine"].get<std::string>(), std::string("kvscope"));
        QCOMPARE(b["target"]["base_url"].get<std::string>(), m_url.toStdString());
        // kvscope serve takes min_tokens as vLLM does, so it is sent too; every length came out exact.
        QCOMPARE(b["output_length_control"].get<std::string>(), std::string("max_tokens + ignore_eos + min_tokens"));
        QCOMPARE(b["output_lengths_exact"].get<int>(), 24);
        QCOMPARE(b["mode"].get<std::string>(), std::string("remote"));
        for (const char* local_only : {"engine_config", "engine", "kv_usage_over_time"})
            QVERIFY2(!b.contains(local_only), local_only);
        // The CSV speaks the same vocabulary: the section 3 columns, none of the local engine's knobs.
        const std::string table = kvscope::test::read_all(csv.toStdString());
        const std::string header = table.substr(0, table.find('\n'));
        QVERIFY2(header.starts_with("label,mode,") && header.find("completed") != std::string::npos, header.c_str());
        for (const char* local_only : {"block_size", "max_num_seqs", "kv_cache_dtype", "num_blocks", "backend",
                                       "kv_usage_peak", "mean_batch_size"})
            QVERIFY2(header.find(local_only) == std::string::npos, (std::string(local_only) + " in " + header).c_str());
        QVERIFY(table.find("\nremote,remote,") != std::string::npos);
        for (const char* k : {"mean_ttft_ms", "p99_itl_ms", "mean_tpot_ms", "output_throughput", "server_metrics"})
            QVERIFY2(b.contains(k), k);
        for (const nlohmann::json& row : kvscope::test::read_jsonl(requests)) {
            QCOMPARE(row.value("error", std::string()), std::string());
            QVERIFY(!row["token_times"].empty());
        }
    }

    // The scraped KV usage starts idle, rises under load and falls back when the run ends; the client
    // never has more than --max-concurrency requests in flight.
    void kvUsageRisesAndFallsUnderExactConcurrency() {
        const QString out = m_dir.filePath("kv.json");
        const ProcessResult r = bench(workload(32, 96) + QStringList{"--base-url", m_url, "--max-concurrency", "6",
                                                                     "--metrics-interval", "0.05", "--output-json", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const nlohmann::json j = kvscope::test::read_json(out);
        QCOMPARE(j["completed"].get<int>(), 32);
        QCOMPARE(j["max_concurrent_requests_instant"].get<int>(), 6);
        const nlohmann::json& sm = j["server_metrics"];
        QCOMPARE(sm["engine"].get<std::string>(), std::string("kvscope"));
        QCOMPARE(sm["unreported"], nlohmann::json::array());
        const size_t kv = 3, running = 1;
        QCOMPARE(sm["columns"][kv].get<std::string>(), std::string("kv_cache_usage"));
        double peak = 0, max_running = 0;
        for (const auto& s : sm["samples"]) {
            peak = std::max(peak, s[kv].get<double>());
            max_running = std::max(max_running, s[running].get<double>());
        }
        QVERIFY2(sm["samples"].size() >= 3, sm.dump().c_str());
        QCOMPARE(sm["samples"].front()[kv].get<double>(), 0.0);  // idle before the run
        QVERIFY2(peak > 0.2, sm.dump().c_str());                 // rises with the load
        QVERIFY2(sm["samples"].back()[kv].get<double>() == 0.0, sm.dump().c_str());  // falls when it ends
        QVERIFY(max_running <= 6);
        QVERIFY2(j["connections_opened"].get<int>() <= 6 + 1, j["connections_opened"].dump().c_str());  // reused
    }

    // One request at a time: every request reuses the connection of the first (the test request's).
    void connectionsAreReused() {
        const QString out = m_dir.filePath("reuse.json");
        const ProcessResult r = bench(workload(8) + QStringList{"--base-url", m_url, "--tokenizer", "dummy:tiny",
                                                                "--max-concurrency", "1", "--output-json", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const nlohmann::json j = kvscope::test::read_json(out);
        QCOMPARE(j["completed"].get<int>(), 8);
        // The test request's connection, or one: every request of the run reuses it.
        QVERIFY2(j["connections_opened"].get<int>() <= 1, j["connections_opened"].dump().c_str());
    }

    // Chat completions with prompts from the server's /tokenize and /detokenize (no local tokenizer).
    void chatEndpointWithTheServersTokenizer() {
        const QString out = m_dir.filePath("chat.json");
        const ProcessResult r = bench(workload(8) + QStringList{"--base-url", m_url, "--backend", "openai-chat",
                                                                "--output-json", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const nlohmann::json j = kvscope::test::read_json(out);
        QCOMPARE(j["completed"].get<int>(), 8);
        QCOMPARE(j["target"]["endpoint"].get<std::string>(), std::string("/v1/chat/completions"));
        QCOMPARE(j["tokenizer_id"].get<std::string>(), std::string("server:/tokenize"));
    }

    // A sweep over the request rate: one row per value, each with its own server series.
    void sweepOverRequestRate() {
        const QString out = m_dir.filePath("sweep.json");
        const ProcessResult r = bench(workload(6) + QStringList{"--base-url", m_url, "--tokenizer", "dummy:tiny", "--sweep",
                                                                "request-rate=20,inf", "--output-json", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const nlohmann::json j = kvscope::test::read_json(out);
        QCOMPARE(j["sweep_knob"].get<std::string>(), std::string("request-rate"));
        QCOMPARE(j["sweep"].size(), size_t(2));
        for (const auto& row : j["sweep"]) {
            QCOMPARE(row["completed"].get<int>(), 6);
            QVERIFY(row.contains("server_metrics"));
        }
        QVERIFY(bench(workload(2) + QStringList{"--base-url", m_url, "--sweep", "block-size=8,16"}).code == 2);
    }

    // vLLM's /tokenize and /detokenize on kvscope serve: ids with and without BOS, the text back, and
    // bad ids refused with the field named.
    void serveTokenizeAndDetokenize() {
        const auto tok = kvscope::test::post(m_serve.port(), "/tokenize", {{"prompt", "hi"}, {"add_special_tokens", false}});
        QCOMPARE(tok.status, 200);
        const auto t = nlohmann::json::parse(tok.body.toStdString());
        QCOMPARE(t["tokens"], nlohmann::json({104, 105}));  // dummy models: bytes
        QCOMPARE(t["count"].get<int>(), 2);
        QCOMPARE(t["max_model_len"].get<int>(), 256);
        const auto with_bos = nlohmann::json::parse(kvscope::test::post(m_serve.port(), "/tokenize", {{"prompt", "hi"}}).body.toStdString());
        QCOMPARE(with_bos["tokens"], nlohmann::json({256, 104, 105}));
        const auto back = kvscope::test::post(m_serve.port(), "/detokenize", {{"tokens", {104, 105}}});
        QCOMPARE(back.status, 200);
        QCOMPARE(nlohmann::json::parse(back.body.toStdString())["prompt"].get<std::string>(), std::string("hi"));
        const auto bad = kvscope::test::post(m_serve.port(), "/detokenize", {{"tokens", {-1}}});
        QCOMPARE(bad.status, 400);
        QVERIFY(bad.body.contains("tokens[0]"));
        QCOMPARE(kvscope::test::post(m_serve.port(), "/tokenize", {{"prompt", 3}}).status, 400);
    }

    // Before the run: the server must answer (else exit 1, the URL named once), list the model (else exit
    // 2, naming the served ones), and answer one test request (else exit 2 with its reason), as vLLM's
    // bench serve checks; a run is never started that can only fail.
    void connectionRefused() {
        const QString url = "http://127.0.0.1:" + QString::number(closed_port());
        const ProcessResult r = bench(workload(4) + QStringList{"--base-url", url});
        QCOMPARE(r.code, 1);
        QVERIFY2(r.err.contains("Couldn't connect") && r.err.count(url) == 1 && !r.err.contains("internal"), qPrintable(r.err));
    }

    void wrongPath404() {
        const ProcessResult extra = bench(workload(4) + QStringList{"--base-url", m_url + "/v1"});
        QCOMPARE(extra.code, 2);
        QVERIFY2(extra.err.contains("HTTP 404") && extra.err.contains("extra path"), qPrintable(extra.err));
        const ProcessResult r = bench(workload(4) + QStringList{"--base-url", m_url, "--backend", "openai", "--endpoint", "/v1/no-such-thing"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("test request") && r.err.contains("HTTP 404"), qPrintable(r.err));
    }

    // The scraper says whether its latest scrape failed, and why (the GUI shows it while it does; the
    // caller names the URL): a server with no /metrics (llama-server without --metrics answers 501), then one that has it.
    void scraperReportsFailingScrapes() {
        kvscope::HttpEndpoint none;
        none.base_url = misbehaving("good").toStdString();
        kvscope::MetricsScraper failing(none, 0.05, [] { return 0.0; });
        const kvscope::ServerSeries f = failing.series();
        QVERIFY(f.last_failed);
        QVERIFY(f.num_failed_scrapes >= 1);
        QVERIFY2(f.last_error == "HTTP 404", f.last_error.c_str());
        kvscope::HttpEndpoint served;
        served.base_url = m_url.toStdString();
        kvscope::MetricsScraper ok(served, 0.05, [] { return 0.0; });
        QVERIFY(!ok.series().last_failed);
        QCOMPARE(ok.series().num_failed_scrapes, 0);
    }

    void unservedModelIsRefused() {
        QStringList args = workload(2) + QStringList{"--base-url", m_url};
        args[args.indexOf("dummy:tiny")] = "no-such-model";
        const ProcessResult r = bench(args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("does not serve 'no-such-model'") && r.err.contains("dummy:tiny"), qPrintable(r.err));
    }

    void testRequestFailureStopsTheRun() {
        // Prompts longer than the server's max_model_len (256): the first is refused, nothing else is sent.
        const QString out = m_dir.filePath("toolong.json");
        QStringList args = workload(4) + QStringList{"--base-url", m_url, "--tokenizer", "dummy:tiny", "--output-json", out};
        args[args.indexOf("--input-len") + 1] = "400";
        const ProcessResult r = bench(args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("test request") && r.err.contains("at most 256"), qPrintable(r.err));
        QVERIFY(!QFile::exists(out));  // the output probe left nothing behind
    }

    void missingApiKey401() {
        kvscope::test::ServeProcess keyed;
        QByteArray error;
        QVERIFY2(keyed.start({"--model", "dummy:tiny", "--max-model-len", "256", "--threads", "1", "--api-key", "s3cret-key"},
                             &error), error.constData());
        const QString url = "http://127.0.0.1:" + QString::number(keyed.port());
        const ProcessResult no_key = bench(workload(4) + QStringList{"--base-url", url, "--tokenizer", "dummy:tiny"});
        QCOMPARE(no_key.code, 2);
        QVERIFY2(no_key.err.contains("HTTP 401") && no_key.err.contains("API key"), qPrintable(no_key.err));
        // With the key (from the environment), the same run works, and the key is in no export.
        QProcessEnvironment env = clean_env();
        env.insert("OPENAI_API_KEY", "s3cret-key");
        const QString out = m_dir.filePath("keyed.json"), rows = m_dir.filePath("keyed.jsonl");
        const ProcessResult r = bench(workload(4) + QStringList{"--base-url", url, "--tokenizer", "dummy:tiny", "--output-json",
                                                                out, "--output-requests", rows}, env);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(kvscope::test::read_json(out)["completed"].get<int>(), 4);
        for (const QString& f : {out, rows}) {
            QFile file(f);
            QVERIFY(file.open(QIODevice::ReadOnly));
            QVERIFY(!file.readAll().contains("s3cret"));
        }
        QVERIFY2(keyed.stop(&error), error.constData());
    }

    // user:password@ in the URL reaches the server (HTTP basic auth) but no export.
    void urlCredentialsAreNotExported() {
        const QString out = m_dir.filePath("userinfo.json");
        const QString url = "http://someone:pa55word@127.0.0.1:" + QString::number(m_serve.port());
        const ProcessResult r = bench(workload(2) + QStringList{"--base-url", url, "--tokenizer", "dummy:tiny", "--output-json", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(kvscope::test::read_json(out)["target"]["base_url"].get<std::string>(), m_url.toStdString());
        QFile file(out);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QVERIFY(!file.readAll().contains("pa55word"));
    }

    void serverError500() { expectAllFailed(misbehaving("err500"), {}, "HTTP 500: internal failure"); }
    void hangsMidStream() {
        // The hanging streams stay silent for 10 s: each ends at its --request-timeout (0.5 s), not at
        // curl's low-speed check, which averaged over 5 s and counted whole seconds (6 s for a 1 s timeout).
        expectAllFailed(misbehaving("hang"), {"--request-timeout", "0.5"}, "timed out: no data for 0.5 s");
        // Each request's own span, which the machine's load barely moves (curl's check took 6 s and more).
        for (const auto& row : kvscope::test::read_jsonl(m_dir.filePath("failed.jsonl"))) {
            const double span = row["finish_time"].get<double>() - row["submit_time"].get<double>();
            QVERIFY2(span < 3.0, row.dump().c_str());
        }
    }
    void malformedSse() { expectAllFailed(misbehaving("malformed"), {}, "malformed SSE"); }
    void closedWithoutDone() { expectAllFailed(misbehaving("nodone"), {}, "without [DONE]"); }

    // Every other request fails: the run goes on, the others complete, and it says how many failed.
    void runGoesOnPastFailures() {
        const QString out = m_dir.filePath("flaky.json"), rows = m_dir.filePath("flaky.jsonl");
        const ProcessResult r = bench(workload(8) + QStringList{"--base-url", misbehaving("flaky"), "--tokenizer", "dummy:tiny",
                                                                "--num-warmups", "0", "--max-concurrency", "1",
                                                                "--output-json", out, "--output-requests", rows});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const nlohmann::json j = kvscope::test::read_json(out);
        QCOMPARE(j["completed"].get<int>(), 4);
        QCOMPARE(j["failed"].get<int>(), 4);
        QCOMPARE(j["total_output_tokens"].get<int>(), 12);  // the usage the server reported
        QVERIFY(r.out.contains("Failed requests:"));
        QVERIFY(r.err.contains("4 request(s) failed: HTTP 500: internal failure"));
        // It has no /metrics: the series names the engine that /v1/models did, not "unknown".
        QCOMPARE(j["target"]["engine"].get<std::string>(), std::string("vllm"));
        QCOMPARE(j["server_metrics"]["engine"].get<std::string>(), std::string("vllm"));
        QVERIFY(j["server_metrics"]["failed_scrapes"].get<int>() >= 1);
        // The server stopped each at 3 tokens of the 8 to 16 asked: said, not only counted in the JSON.
        QVERIFY2(r.err.contains("4 of 4 completed requests did not get the output length asked for (12 tokens"), qPrintable(r.err));
        int with_error = 0;
        for (const auto& row : kvscope::test::read_jsonl(rows)) with_error += !row.value("error", std::string()).empty();
        QCOMPARE(with_error, 4);
    }

    // A base URL that answers 301 (a moved path behind a proxy): followed, as curl -L and vLLM's benchmark
    // (aiohttp) follow it, and the POSTs stay POSTs.
    void redirectsAreFollowed() {
        const ProcessResult r = bench(workload(4) + QStringList{"--base-url", misbehaving("moved"), "--tokenizer", "dummy:tiny",
                                                                "--num-warmups", "0"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains(QRegularExpression("Successful requests:\\s+4\\b")), qPrintable(r.out));
    }

    void badRemoteFlagsExit2() {
        QCOMPARE(bench(workload(2) + QStringList{"--base-url", "ftp://x"}).code, 2);
        QCOMPARE(bench(workload(2) + QStringList{"--base-url", m_url, "--backend", "cuda"}).code, 2);
        QCOMPARE(bench(workload(2) + QStringList{"--backend", "openai"}).code, 2);  // no --base-url
        // A remote target's options without --base-url: refused, not ignored by the local run.
        for (const QStringList& remote_only : {QStringList{"--tokenizer", "dummy:tiny"}, QStringList{"--endpoint", "/v1/completions"},
                                              QStringList{"--request-timeout", "5"}}) {
            const ProcessResult k = bench(workload(2) + remote_only);
            QCOMPARE(k.code, 2);
            QVERIFY2(k.err.contains(remote_only.front() + " is for a remote target"), qPrintable(k.err));
        }
        // --dataset-path is sharegpt's.
        const ProcessResult path = bench(workload(2) + QStringList{"--dataset-path", "x.json"});
        QCOMPARE(path.code, 2);
        QVERIFY2(path.err.contains("--dataset-path is read by --dataset sharegpt only"), qPrintable(path.err));
        QCOMPARE(bench(workload(2) + QStringList{"--base-url", m_url, "--compare", "naive"}).code, 2);
        QCOMPARE(bench(workload(2) + QStringList{"--base-url", m_url, "--endpoint", "/v1/other"}).code, 2);
        // The other API's path under --backend: every request would fail.
        const ProcessResult api = bench(workload(2) + QStringList{"--base-url", m_url, "--backend", "openai", "--endpoint",
                                                                  "/v1/chat/completions"});
        QCOMPARE(api.code, 2);
        QVERIFY2(api.err.contains("--backend openai"), qPrintable(api.err));
        // The engine's knobs are the server's: refused, not ignored.
        for (const QStringList& knob : {QStringList{"--max-num-seqs", "4"}, QStringList{"--enable-prefix-caching"},
                                        QStringList{"--block-size", "32"}, QStringList{"--save-timeline"}}) {
            const ProcessResult k = bench(workload(2) + QStringList{"--base-url", m_url} + knob);
            QCOMPARE(k.code, 2);
            QVERIFY2(k.err.contains(knob.front()), qPrintable(k.err));
        }
        const ProcessResult t = bench(workload(2) + QStringList{"--base-url", m_url, "--tokenizer", m_dir.filePath("none")});
        QCOMPARE(t.code, 2);
        QVERIFY2(t.err.contains("--tokenizer"), qPrintable(t.err));
        // No local tokenizer and a server without /tokenize: a clear refusal before the run.
        const ProcessResult s = bench(workload(2) + QStringList{"--base-url", misbehaving("good")});
        QCOMPARE(s.code, 2);
        QVERIFY2(s.err.contains("/tokenize") && s.err.contains("--tokenizer"), qPrintable(s.err));
    }

private:
    QString misbehaving(const QString& mode) {
        if (!m_bad) m_bad = std::make_unique<MisbehavingServer>();
        return "http://127.0.0.1:" + QString::number(m_bad->port()) + "/" + mode;
    }

    // Runs 4 requests at `url`: every one fails with `expected` in its error, the run ends (exit 1:
    // nothing completed) and the JSON and the per-request file say so.
    void expectAllFailed(const QString& url, const QStringList& extra, const QString& expected) {
        const QString out = m_dir.filePath("failed.json"), rows = m_dir.filePath("failed.jsonl");
        const ProcessResult r = bench(workload(4) + QStringList{"--base-url", url, "--tokenizer", "dummy:tiny", "--output-json",
                                                                out, "--output-requests", rows} + extra);
        QVERIFY2(r.code == 1, qPrintable("exit " + QString::number(r.code) + ": " + r.err));
        const nlohmann::json j = kvscope::test::read_json(out);
        QCOMPARE(j["completed"].get<int>(), 0);
        QCOMPARE(j["failed"].get<int>(), 4);
        const auto rows_read = kvscope::test::read_jsonl(rows);
        QCOMPARE(rows_read.size(), size_t(4));
        for (const auto& row : rows_read)
            QVERIFY2(QString::fromStdString(row.value("error", std::string())).contains(expected), row.dump().c_str());
        QVERIFY2(r.err.contains("4 request(s) failed"), qPrintable(r.err));
    }

    QTemporaryDir m_dir;
    kvscope::test::ServeProcess m_serve;
    QString m_url;
    std::unique_ptr<MisbehavingServer> m_bad;
};

QTEST_GUILESS_MAIN(TestBenchRemote)
#include "test_bench_remote.moc"
