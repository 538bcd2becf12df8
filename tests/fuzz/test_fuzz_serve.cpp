// Fuzzing kvscope-cli serve's two front doors with seeded mutations (KVSCOPE_TEST_SEED to repeat,
// KVSCOPE_FUZZ_ITERATIONS for a longer run):
// - the OpenAI request decoder (parse_json_body + parse_generation_request): random and mutated bodies,
//   deep nesting, huge numbers, invalid UTF-8 must each give a request or an ApiError with a short
//   message, never a crash or another exception;
// - the HTTP request path (gate, httplib, routes, engine): mutated raw requests on a real loopback
//   server in this process must each be answered or closed, /health must keep answering, and at the
//   end every KV block must be free again.
// Built with -DKVSCOPE_SANITIZE=ON in CI, so memory errors and undefined behaviour fail the run.
#include "http_frontend.h"
#include "openai_protocol.h"
#include "openai_server.h"
#include "serve_engine_loop.h"
#include "serve_metrics.h"
#include "raw_socket.h"
#include "shared_models.h"
#include "test_support.h"

#include "llm_engine.h"

#include <QtTest>

#include <nlohmann/json.hpp>

#include <random>
#include <thread>

using namespace kvscope;
using namespace kvscope::cli;
using nlohmann::json;

namespace {

int iterations(int fallback) {
    const char* env = std::getenv("KVSCOPE_FUZZ_ITERATIONS");
    return env && *env ? std::atoi(env) : fallback;
}

class Mutator {
public:
    explicit Mutator(uint64_t seed) : rng_(seed) {}

    size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

    std::string mutate(std::string s) {
        static const char* pieces[] = {"[",      "]",      "{",          "}",         ",",          ":",
                                       "\"",     "\\",     "\\u0000",    "\\ud800",   "\xff\xfe",   "\xc3",
                                       "\xed\xa0\x80", "1e400",  "-99999999999999999999999", "0.5", "null", "true",
                                       "\r\n",   "\r\n\r\n", "\n",       " ",         "\t",         "\0",
                                       "Content-Length: 5\r\n", "Transfer-Encoding: chunked\r\n", "ffffffffffffffff\r\n",
                                       "\"n\": 1000000", "\"max_tokens\": 9223372036854775807", "\"stop\": [\"a\"]",
                                       "\"logit_bias\": {\"1\": 100}", "\"stream\": true"};
        const int edits = 1 + static_cast<int>(below(4));
        for (int e = 0; e < edits; ++e) {
            const size_t at = below(s.size() + 1);
            switch (below(7)) {
            case 0: if (!s.empty()) s[below(s.size())] = static_cast<char>(below(256)); break;
            case 1: s.insert(at, pieces[below(std::size(pieces))]); break;
            case 2: s.erase(at, below(16)); break;
            case 3: s = s.substr(0, at); break;
            case 4: s.insert(at, s.substr(below(s.size() + 1), below(64))); break;
            case 5: {  // nesting
                const size_t depth = 1 + below(below(2) ? 80 : 5000);
                s.insert(at, std::string(depth, '[') + std::string(depth, ']'));
                break;
            }
            default: {
                std::string random(below(32), '\0');
                for (char& c : random) c = static_cast<char>(below(256));
                s.insert(at, random);
            }
            }
        }
        return s;
    }

    std::mt19937_64& rng() { return rng_; }

private:
    std::mt19937_64 rng_;
};

const std::vector<std::string> kBodies = {
    R"({"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})",
    R"({"prompt": [1, 403, 407], "max_tokens": 3, "n": 2, "seed": 7, "stop": ["the", "."], "logit_bias": {"5": -100}})",
    R"({"prompt": ["a", "b"], "max_tokens": 2, "stream": true, "stream_options": {"include_usage": true}})",
    R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 3})",
    R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}], "max_completion_tokens": 2, "stream": true})",
    R"({"prompt": "x", "top_p": 0.5, "top_k": 3, "min_p": 0.1, "presence_penalty": 1, "frequency_penalty": -1, "min_tokens": 1, "max_tokens": 2, "stop_token_ids": [2]})",
};

}  // namespace

class TestFuzzServe : public QObject {
    Q_OBJECT

private slots:
    void decoderNeverFailsBadly() {
        const auto model = test::load_stories("hf");
        const RequestLimits limits;
        const int64_t cap = max_prompt_bytes(limits, model->tokenizer, 512);
        Mutator m(test::test_seed(11));
        const int n = iterations(20000);
        int accepted = 0;
        for (int i = 0; i < n; ++i) {
            const std::string& base = kBodies[m.below(kBodies.size())];
            const std::string body = m.below(10) == 0 ? base : m.mutate(base);
            const Endpoint endpoint = body.find("messages") != std::string::npos ? Endpoint::CHAT : Endpoint::COMPLETIONS;
            try {
                const json j = parse_json_body(body, limits);
                const GenerationJob job = parse_generation_request(endpoint, j, *model, 512, limits, cap);
                QVERIFY(!job.prompts.empty());
                for (const auto& p : job.prompts) QVERIFY(!p.empty() && p.size() < 512);
                ++accepted;
            } catch (const ApiError& e) {
                if (!(e.status >= 400 && e.status < 500) || std::string_view(e.what()).size() > 1000)
                    QFAIL(qPrintable(QString("input %1: status %2, message of %3 bytes: %4")
                                         .arg(i).arg(e.status).arg(std::string_view(e.what()).size())
                                         .arg(QString::fromStdString(std::string(e.what()).substr(0, 300)))));
                (void)openai_error_body(e.status, e.what(), e.param);  // the error itself must render
            } catch (const std::exception& e) {
                QFAIL(qPrintable(QString("input %1 threw %2: %3").arg(i).arg(typeid(e).name()).arg(e.what())));
            }
        }
        qInfo("%d bodies, %d accepted", n, accepted);
        QVERIFY(accepted > n / 20);  // the mutations leave many requests valid: the deep paths run too
    }

    void httpPathNeverFailsBadly() {
        const auto model = test::load_stories("hf");
        EngineConfig config;
        config.scheduler.max_model_len = 512;
        config.num_blocks = 256;
        config.num_threads = 1;
        LlmEngine engine(model, config);
        ServeMetrics metrics("stories", "kvscope", 512, {16, engine.num_blocks(), "float32", false});
        EngineLoop loop(engine, metrics);
        HttpLimits http_limits;
        http_limits.body_timeout_s = 1;
        http_limits.header_timeout_s = 1;
        HttpFrontend frontend(http_limits);
        OpenAiServer api(*model, {"stories", 512, "", {}}, loop, metrics);
        api.install(frontend);
        frontend.bind("127.0.0.1", 0);
        loop.start();
        std::thread server([&] { frontend.run(); });
        // Stops the server on every way out of this function (a failed check returns early).
        struct Stop {
            HttpFrontend& frontend;
            EngineLoop& loop;
            std::thread& server;
            ~Stop() {
                frontend.request_stop();
                if (server.joinable()) server.join();
                loop.stop();
                frontend.shutdown();
            }
        } stop{frontend, loop, server};
        const int port = frontend.port();

        // half_close: end the input with a FIN, so that a server waiting for more of it learns at once
        // (a mutated Content-Length would otherwise cost a body timeout); the server takes it as a
        // client gone, so a whole request is sent without it, and runs to its end.
        auto exchange = [&](const std::string& bytes, bool half_close = true) -> std::string {
            const int fd = test::connect_loopback(port);
            if (fd < 0) return "connect failed";
            test::send_all(fd, bytes);
            if (half_close) ::shutdown(fd, SHUT_WR);
            const std::string reply = test::receive_until_close(fd, 10);
            ::close(fd);
            return reply;
        };
        auto request = [](const std::string& method, const std::string& path, const std::string& body) {
            std::string r = method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
            if (!body.empty()) r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
            return r + "\r\n" + body;
        };
        std::vector<std::string> corpus = {request("GET", "/health", ""), request("GET", "/v1/models", ""),
                                           request("GET", "/metrics", "")};
        for (const std::string& b : kBodies)
            corpus.push_back(request("POST", b.find("messages") != std::string::npos ? "/v1/chat/completions" : "/v1/completions", b));
        corpus.push_back("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "11\r\n{\"prompt\": \"Once\"\r\n1\r\n}\r\n0\r\n\r\n");
        {  // pipelined: two requests in one write, the first kept alive
            std::string first = request("GET", "/health", "");
            first.replace(first.find("Connection: close\r\n"), 19, "");
            corpus.push_back(first + request("GET", "/v1/models", ""));
        }

        Mutator m(test::test_seed(12));
        const int n = iterations(1500);
        int answered = 0;
        for (int i = 0; i < n; ++i) {
            const std::string& base = corpus[m.below(corpus.size())];
            const bool whole = m.below(8) == 0;
            const std::string reply = whole ? exchange(base, false) : exchange(m.mutate(base));
            if (whole) QVERIFY2(reply.rfind("HTTP/1.1 200", 0) == 0, reply.substr(0, 300).c_str());
            QVERIFY2(reply != "connect failed", qPrintable(QString("input %1: the server stopped accepting").arg(i)));
            answered += reply.rfind("HTTP/1.1 ", 0) == 0;
            if (i % 100 == 99) {
                const std::string health = exchange(request("GET", "/health", ""));
                QVERIFY2(health.rfind("HTTP/1.1 200", 0) == 0, qPrintable(QString("after input %1: %2").arg(i).arg(health.c_str())));
            }
        }
        qInfo("%d raw requests, %d answered with a status line", n, answered);
        QVERIFY(answered > n / 2);

        frontend.request_stop();
        server.join();
        loop.stop();
        frontend.shutdown();
        // Every request ended (finished, refused or aborted with its client): no block is held.
        QCOMPARE(engine.kv_cache_manager().num_free_blocks(), engine.num_blocks());
    }
};

QTEST_GUILESS_MAIN(TestFuzzServe)
#include "test_fuzz_serve.moc"
