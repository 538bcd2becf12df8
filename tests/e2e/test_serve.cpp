// kvscope-cli serve as an HTTP client sees it: one server process on a free port (--port 0) for the
// whole suite, driven over raw QTcpSocket. Health and model listing, a greedy completion equal to the
// engine's own greedy text (and to expected.json's reference ids), concurrent SSE chat streams, bad
// requests answered 400 without disturbing the server, Prometheus metrics, and a client that
// disconnects mid-stream leaving no KV blocks behind. The server is always stopped with SIGTERM.
#include "serve_process.h"

#include "llm_engine.h"

#include <QFile>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>

using namespace kvscope;
using namespace kvscope::test;
using nlohmann::json;

namespace {

QString model_path() { return QString::fromStdString(test::models_dir() + "/stories260K-hf"); }

// The engine alone on the served model: every output of one request, for the server's to be compared with.
std::vector<RequestOutput> engine_alone(const Model& model, const std::vector<int32_t>& prompt_ids,
                                        const SamplingParams& params) {
    std::shared_ptr<const Model> shared(&model, [](const Model*) {});
    EngineConfig config;
    config.scheduler.max_model_len = 512;
    config.num_blocks = 64;
    config.num_threads = 1;
    LlmEngine engine(shared, config);
    engine.add_request({"ref", prompt_ids, params, 0, ""});
    std::vector<RequestOutput> outputs;
    while (engine.has_unfinished_requests())
        for (RequestOutput& o : engine.step()) outputs.push_back(std::move(o));
    return outputs;
}

// A response's vLLM-shaped "prompt_logprobs" against the engine's own for the prompt `ids`: null for the
// first token, then each token's own entry and the num_top best, ranked from 1, and nothing else.
void verify_prompt_logprobs(const json& plp, const std::vector<int32_t>& ids, const std::vector<TokenLogprobs>& want,
                            const Tokenizer& tokenizer, size_t num_top) {
    auto near = [](const json& v, float x) { return std::fabs(v.get<double>() - x) < 1e-5; };
    QCOMPARE(want.size(), ids.size() - 1);
    QCOMPARE(plp.size(), ids.size());
    QVERIFY(plp[0].is_null());
    for (size_t j = 1; j < ids.size(); ++j) {
        const TokenLogprobs& l = want[j - 1];
        const json& own = plp[j][std::to_string(ids[j])];
        QVERIFY(near(own["logprob"], l.logprob));
        QCOMPARE(own["rank"].get<int>(), l.rank);
        QCOMPARE(own["decoded_token"].get<std::string>(), tokenizer.token_to_bytes(ids[j]));
        for (size_t k = 0; k < num_top; ++k) {
            const json& e = plp[j][std::to_string(l.top[k].first)];
            QVERIFY(near(e["logprob"], l.top[k].second));
            QCOMPARE(e["rank"].get<int>(), int(k) + 1);
        }
        QVERIFY(plp[j].size() <= num_top + 1);  // the best and the prompt token (one of them or not)
    }
}

}  // namespace

class TestServe : public QObject {
    Q_OBJECT
    ServeProcess server_;
    int port_ = 0;

private slots:
    void initTestCase() {
        QByteArray error;
        QVERIFY2(server_.start({"--model", model_path(), "--max-model-len", "512"}, &error), error.constData());
        port_ = server_.port();
    }

    void cleanupTestCase() {
        QByteArray error;
        QVERIFY2(server_.stop(&error), error.constData());
    }

    void health() {
        const Reply r = http(port_, "GET", "/health");
        QCOMPARE(r.status, 200);
    }

    void listsModel() {
        const Reply r = http(port_, "GET", "/v1/models");
        QCOMPARE(r.status, 200);
        const json j = json::parse(r.body.toStdString());
        QCOMPARE(j["object"].get<std::string>(), std::string("list"));
        QCOMPARE(j["data"].size(), size_t(1));
        // The served name defaults to the model's directory name; the path on the server never shows.
        QCOMPARE(j["data"][0]["id"].get<std::string>(), std::string("stories260K-hf"));
        QVERIFY2(!r.body.contains(QByteArray::fromStdString(test::models_dir())), r.body.constData());
        QCOMPARE(j["data"][0]["object"].get<std::string>(), std::string("model"));
    }

    // The server's greedy text equals the engine's, whose ids are expected.json's reference ids.
    void greedyCompletionMatchesEngine() {
        const std::string prompt = "Once upon a time";
        std::shared_ptr<const Model> model = load_model(model_path().toStdString());
        SamplingParams params;
        params.temperature = 0;
        params.max_tokens = 20;
        const auto prompt_ids = model->tokenizer.encode(prompt, true);
        std::string engine_text;
        std::vector<int32_t> engine_ids;
        for (const RequestOutput& o : engine_alone(*model, prompt_ids, params)) {
            engine_text += o.text_delta;
            engine_ids.insert(engine_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        }
        QFile f(QString::fromStdString(test::models_dir() + "/expected.json"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        const json expected = json::parse(f.readAll().toStdString());
        for (const json& c : expected["cases"]) {
            if (c["prompt"] != prompt) continue;
            QCOMPARE(json(prompt_ids), c["prompt_ids"]);
            const std::vector<int32_t> ref = c["continuation_ids"];
            QCOMPARE(engine_ids, std::vector<int32_t>(ref.begin(), ref.begin() + 20));
            QVERIFY(c["continuation_text"].get<std::string>().starts_with(engine_text));
        }

        const Reply r = post(port_, "/v1/completions",
                             {{"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0}, {"model", "stories260K-hf"}});
        QVERIFY2(r.status == 200, r.body.constData());
        const json j = json::parse(r.body.toStdString());
        QCOMPARE(j["object"].get<std::string>(), std::string("text_completion"));
        QVERIFY(j["id"].get<std::string>().starts_with("cmpl-"));
        QVERIFY(j["created"].is_number_integer());
        QCOMPARE(j["choices"].size(), size_t(1));
        QCOMPARE(j["choices"][0]["index"].get<int>(), 0);
        QCOMPARE(j["choices"][0]["text"].get<std::string>(), engine_text);
        QCOMPARE(j["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
        QCOMPARE(j["usage"]["prompt_tokens"].get<int>(), int(prompt_ids.size()));
        QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 20);
        QCOMPARE(j["usage"]["total_tokens"].get<int>(), int(prompt_ids.size()) + 20);
        QVERIFY(!j["usage"].contains("prompt_tokens_details"));  // only with --enable-prompt-tokens-details

        // The same prompt given as token ids.
        const Reply ids = post(port_, "/v1/completions", {{"prompt", prompt_ids}, {"max_tokens", 20}, {"temperature", 0}});
        QVERIFY2(ids.status == 200, ids.body.constData());
        QCOMPARE(json::parse(ids.body.toStdString())["choices"][0]["text"].get<std::string>(), engine_text);
        QVERIFY(j["choices"][0]["stop_reason"].is_null());  // a length finish

        // vLLM's stop_reason names what stopped it; include_stop_str_in_output keeps a stop string in the
        // text. A stop string from the middle of the greedy text (5 bytes from byte 10), then a stop token.
        const std::string stop = engine_text.substr(10, 5);
        for (const bool include : {false, true}) {
            const Reply st = post(port_, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0},
                                                            {"stop", stop}, {"include_stop_str_in_output", include}});
            QVERIFY2(st.status == 200, st.body.constData());
            const json choice = json::parse(st.body.toStdString())["choices"][0];
            const size_t at = engine_text.find(stop);
            QCOMPARE(choice["text"].get<std::string>(), engine_text.substr(0, at + (include ? stop.size() : 0)));
            QCOMPARE(choice["finish_reason"].get<std::string>(), std::string("stop"));
            QCOMPARE(choice["stop_reason"].get<std::string>(), stop);
        }
        const Reply tok = post(port_, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0},
                                                         {"stop_token_ids", {engine_ids[3]}}});
        QVERIFY2(tok.status == 200, tok.body.constData());
        QCOMPARE(json::parse(tok.body.toStdString())["choices"][0]["stop_reason"].get<int>(), engine_ids[3]);
    }

    // Four chat streams in flight at once: each ends with a finish reason and [DONE].
    void concurrentStreamingChat() {
        const QStringList questions = {"Tell me a story.", "Who is Lily?", "What did the dog do?", "Say hello."};
        std::vector<std::unique_ptr<QTcpSocket>> sockets;
        for (const QString& q : questions) {
            const json body = {{"messages", json::array({{{"role", "user"}, {"content", q.toStdString()}}})},
                               {"max_tokens", 48}, {"stream", true}, {"seed", 7}, {"ignore_eos", true},
                               {"stream_options", {{"include_usage", true}}}};
            auto s = std::make_unique<QTcpSocket>();
            s->connectToHost("127.0.0.1", static_cast<quint16>(port_));
            QVERIFY(s->waitForConnected(5000));
            s->write(request_bytes("POST", "/v1/chat/completions", QByteArray::fromStdString(body.dump())));
            s->flush();
            sockets.push_back(std::move(s));
        }
        for (auto& s : sockets) {
            const Reply r = read_reply(*s);
            QVERIFY2(r.status == 200, r.body.constData());
            QVERIFY(r.head.toLower().contains("content-type: text/event-stream"));
            const QList<QByteArray> events = sse_events(r.body);
            QVERIFY2(events.size() >= 4, r.body.constData());
            QCOMPARE(events.back(), QByteArray("[DONE]"));
            const json first = json::parse(events.front().toStdString());
            QCOMPARE(first["object"].get<std::string>(), std::string("chat.completion.chunk"));
            QCOMPARE(first["choices"][0]["delta"]["role"].get<std::string>(), std::string("assistant"));
            std::string content, finish;
            int completion_tokens = -1;
            for (qsizetype i = 0; i + 1 < events.size(); ++i) {
                const json chunk = json::parse(events[i].toStdString());
                QCOMPARE(chunk["id"], first["id"]);
                if (chunk.contains("usage")) {
                    completion_tokens = chunk["usage"]["completion_tokens"].get<int>();
                    continue;
                }
                const json& c = chunk["choices"][0];
                if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
                if (!c["finish_reason"].is_null()) finish = c["finish_reason"].get<std::string>();
            }
            QCOMPARE(finish, std::string("length"));
            QCOMPARE(completion_tokens, 48);
            QVERIFY(!content.empty());
        }
    }

    void badRequestIsRejectedAndServerKeepsServing_data() {
        QTest::addColumn<QByteArray>("path");
        QTest::addColumn<QByteArray>("body");
        QTest::addColumn<QByteArray>("names");  // what the error message must mention
        QTest::newRow("max_tokens -1") << QByteArray("/v1/completions")
                                       << QByteArray(R"({"prompt": "Once", "max_tokens": -1})") << QByteArray("max_tokens");
        QTest::newRow("invalid JSON") << QByteArray("/v1/completions") << QByteArray(R"({"prompt": "Once",)")
                                      << QByteArray("JSON");
        QTest::newRow("temperature type") << QByteArray("/v1/completions")
                                          << QByteArray(R"({"prompt": "Once", "temperature": "hot"})")
                                          << QByteArray("temperature");
        QTest::newRow("temperature past float") << QByteArray("/v1/completions")
                                                << QByteArray(R"({"prompt": "Once", "temperature": 1e308})")
                                                << QByteArray("temperature is out of range");
        // Integers past the range say so (they said "must be an integer", or named the clamped value).
        QTest::newRow("top_k 1e30") << QByteArray("/v1/completions") << QByteArray(R"({"prompt": "Once", "top_k": 1e30})")
                                    << QByteArray("top_k is out of range: 1e+30");
        QTest::newRow("prompt_logprobs 2^40") << QByteArray("/v1/completions")
                                              << QByteArray(R"({"prompt": "Once", "prompt_logprobs": 1099511627776})")
                                              << QByteArray("prompt_logprobs is out of range: 1099511627776");
        QTest::newRow("token outside vocab") << QByteArray("/v1/completions") << QByteArray(R"({"prompt": [1, 100000]})")
                                             << QByteArray("prompt");
        QTest::newRow("no messages") << QByteArray("/v1/chat/completions") << QByteArray(R"({"max_tokens": 4})")
                                     << QByteArray("messages");
        // vLLM refuses a priority the scheduler would ignore (this server runs --policy fcfs).
        QTest::newRow("priority under fcfs") << QByteArray("/v1/completions")
                                             << QByteArray(R"({"prompt": "Once", "priority": 1})")
                                             << QByteArray("priority scheduling is not enabled");
        QTest::newRow("stream_options without stream") << QByteArray("/v1/completions")
                                                       << QByteArray(R"({"prompt": "Once", "stream_options": {"include_usage": true}})")
                                                       << QByteArray("stream_options");
        // Fields asking for a shape of output or a tool call are refused, not ignored.
        QTest::newRow("response_format json") << QByteArray("/v1/completions")
                                              << QByteArray(R"({"prompt": "Once", "response_format": {"type": "json_object"}})")
                                              << QByteArray("response_format is not supported");
        QTest::newRow("guided_choice") << QByteArray("/v1/completions")
                                       << QByteArray(R"({"prompt": "Once", "guided_choice": ["yes", "no"]})")
                                       << QByteArray("guided_choice is not supported");
        QTest::newRow("tool_choice required") << QByteArray("/v1/chat/completions")
                                              << QByteArray(R"({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": "required"})")
                                              << QByteArray("tool_choice asks for a tool call");
        QTest::newRow("request chat_template") << QByteArray("/v1/chat/completions")
                                               << QByteArray(R"({"messages": [{"role": "user", "content": "Hi"}], "chat_template": "{{ messages }}"})")
                                               << QByteArray("chat_template in a request is not supported");
        QTest::newRow("prompt too long") << QByteArray("/v1/completions")
                                         << QByteArray(R"({"prompt": "Once", "max_tokens": 100000})")
                                         << QByteArray("max_tokens");
    }
    void badRequestIsRejectedAndServerKeepsServing() {
        QFETCH(QByteArray, path);
        QFETCH(QByteArray, body);
        QFETCH(QByteArray, names);
        const Reply bad = http(port_, "POST", path, body);
        QCOMPARE(bad.status, 400);
        const json e = json::parse(bad.body.toStdString());
        QCOMPARE(e["error"]["type"].get<std::string>(), std::string("invalid_request_error"));
        QVERIFY2(QByteArray::fromStdString(e["error"]["message"].get<std::string>()).contains(names), bad.body.constData());

        const Reply good = post(port_, "/v1/completions", {{"prompt", "The little dog"}, {"max_tokens", 4}});
        QVERIFY2(good.status == 200, good.body.constData());
        QCOMPARE(json::parse(good.body.toStdString())["usage"]["completion_tokens"].get<int>(), 4);
    }

    void unknownRouteIs404() {
        QCOMPARE(http(port_, "GET", "/v1/nothing").status, 404);
        const Reply wrong = http(port_, "GET", "/v1/completions");
        QCOMPARE(wrong.status, 405);
        QVERIFY2(wrong.head.contains("Allow: POST"), wrong.head.constData());  // RFC 9110: a 405 lists the methods
    }

    // --enable-prompt-tokens-details (vLLM's flag): usage says how many prompt tokens the prefix cache
    // served, in the answer and in the stream's usage chunk; a prompt counts once however many samples.
    void promptTokensDetailsCountCachedTokens() {
        ServeProcess cached;
        QByteArray error;
        QVERIFY2(cached.start({"--model", model_path(), "--max-model-len", "512", "--block-size", "16", "--enable-prefix-caching",
                               "--enable-prompt-tokens-details"},
                              &error),
                 error.constData());
        const std::string prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
                                   "with her friends and her big red ball.";
        auto cached_tokens = [](const json& usage) {
            return usage.contains("prompt_tokens_details") ? usage["prompt_tokens_details"]["cached_tokens"].get<int>() : -1;
        };
        const json body = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}};
        const Reply first = post(cached.port(), "/v1/completions", body);
        QVERIFY2(first.status == 200, first.body.constData());
        const json u1 = json::parse(first.body.toStdString())["usage"];
        QCOMPARE(cached_tokens(u1), 0);
        const int prompt_tokens = u1["prompt_tokens"].get<int>();
        QVERIFY(prompt_tokens > 32);
        // Again: every full block of the prompt but the last token's (vLLM recomputes the last one).
        const int hit = (prompt_tokens - 1) / 16 * 16;
        const Reply second = post(cached.port(), "/v1/completions", body);
        QCOMPARE(cached_tokens(json::parse(second.body.toStdString())["usage"]), hit);
        // Two samples of it: the prompt once.
        json two = body;
        two["n"] = 2;
        QCOMPARE(cached_tokens(json::parse(post(cached.port(), "/v1/completions", two).body.toStdString())["usage"]), hit);
        // The stream's usage chunk.
        json streamed = body;
        streamed["stream"] = true;
        streamed["stream_options"] = {{"include_usage", true}};
        const Reply s = post(cached.port(), "/v1/completions", streamed);
        int seen = -2;
        for (const QByteArray& line : s.body.split('\n'))
            if (line.startsWith("data: {") && line.contains("\"usage\":{"))
                seen = cached_tokens(json::parse(line.mid(6).toStdString())["usage"]);
        QCOMPARE(seen, hit);
        QVERIFY2(cached.stop(&error), error.constData());
    }

    // vLLM's stream_options.continuous_usage_stats: each choice chunk carries its choice's prompt tokens and
    // its completion tokens so far; the final usage chunk the sums (it was ignored).
    void continuousUsageStats() {
        const json body = {{"prompt", {"Once", "Lily went to the park"}}, {"max_tokens", 5}, {"ignore_eos", true},
                           {"stream", true}, {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}};
        const Reply r = post(port_, "/v1/completions", body);
        QVERIFY2(r.status == 200, r.body.constData());
        std::map<int, std::vector<json>> usage_of;  // choice index -> its chunks' usage
        json total;
        for (const QByteArray& event : sse_events(r.body)) {
            if (event == "[DONE]") continue;
            const json chunk = json::parse(event.toStdString());
            QVERIFY2(chunk.contains("usage"), event.constData());
            if (chunk["choices"].empty()) total = chunk["usage"];
            else usage_of[chunk["choices"][0]["index"].get<int>()].push_back(chunk["usage"]);
        }
        QCOMPARE(int(usage_of.size()), 2);
        int64_t prompts = 0;
        for (const auto& [index, usages] : usage_of) {
            QCOMPARE(usages.back()["completion_tokens"].get<int>(), 5);
            for (size_t k = 1; k < usages.size(); ++k) {
                QCOMPARE(usages[k]["prompt_tokens"], usages[0]["prompt_tokens"]);
                QVERIFY(usages[k]["completion_tokens"].get<int>() >= usages[k - 1]["completion_tokens"].get<int>());
            }
            prompts += usages[0]["prompt_tokens"].get<int64_t>();
        }
        QVERIFY(usage_of[0][0]["prompt_tokens"] != usage_of[1][0]["prompt_tokens"]);  // each choice its own prompt
        QCOMPARE(total["prompt_tokens"].get<int64_t>(), prompts);
        QCOMPARE(total["completion_tokens"].get<int>(), 10);
    }

    // CORS as vLLM allows it by default: a browser's preflight is answered (before any API key check), and
    // responses name the origin, so a web page can call the API.
    void corsPreflightAndOrigin() {
        const Reply pre = http(port_, "OPTIONS", "/v1/chat/completions", {},
                               "Origin: http://example.org\r\nAccess-Control-Request-Method: POST\r\n"
                               "Access-Control-Request-Headers: authorization, content-type\r\n");
        QCOMPARE(pre.status, 204);
        QVERIFY2(pre.head.contains("Access-Control-Allow-Origin: *"), pre.head.constData());
        QVERIFY2(pre.head.contains("Access-Control-Allow-Methods: GET, POST, OPTIONS"), pre.head.constData());
        QVERIFY2(pre.head.contains("Access-Control-Allow-Headers: authorization, content-type"), pre.head.constData());
        const Reply r = post(port_, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}});
        QCOMPARE(r.status, 200);
        QVERIFY2(r.head.contains("Access-Control-Allow-Origin: *"), r.head.constData());
    }

    // logprobs in both endpoints, in OpenAI's shapes, equal to the engine's own (runner/logprobs.h).
    void logprobsInBothEndpoints() {
        const std::string prompt = "Once upon a time";
        std::shared_ptr<const Model> model = load_model(model_path().toStdString());
        SamplingParams params;
        params.temperature = 0;
        params.max_tokens = 8;
        params.logprobs = 3;
        std::vector<TokenLogprobs> want;
        for (const RequestOutput& o : engine_alone(*model, model->tokenizer.encode(prompt, true), params))
            want.insert(want.end(), o.logprobs.begin(), o.logprobs.end());
        QCOMPARE(want.size(), size_t(8));

        const Reply c = post(port_, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 3}});
        QVERIFY2(c.status == 200, c.body.constData());
        const json completion = json::parse(c.body.toStdString());
        const json& lp = completion["choices"][0]["logprobs"];
        QCOMPARE(lp["tokens"].size(), size_t(8));
        std::string joined;
        for (size_t t = 0; t < 8; ++t) {
            QCOMPARE(lp["tokens"][t].get<std::string>(), model->tokenizer.token_to_bytes(want[t].token_id));
            QVERIFY(std::fabs(lp["token_logprobs"][t].get<double>() - want[t].logprob) < 1e-5);
            QCOMPARE(lp["top_logprobs"][t].size(), size_t(3));
            for (const auto& [id, value] : want[t].top)
                QVERIFY(std::fabs(lp["top_logprobs"][t][model->tokenizer.token_to_bytes(id)].get<double>() - value) < 1e-5);
            QCOMPARE(lp["text_offset"][t].get<size_t>(), joined.size());
            joined += lp["tokens"][t].get<std::string>();
        }

        // logprobs 0: each entry holds the sampled token alone, as vLLM answers.
        const Reply zero = post(port_, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0.8}, {"logprobs", 0}});
        QVERIFY2(zero.status == 200, zero.body.constData());
        const json zlp = json::parse(zero.body.toStdString())["choices"][0]["logprobs"];
        for (size_t t = 0; t < zlp["tokens"].size(); ++t) {
            QCOMPARE(zlp["top_logprobs"][t].size(), size_t(1));
            QCOMPARE(zlp["top_logprobs"][t][zlp["tokens"][t].get<std::string>()], zlp["token_logprobs"][t]);
        }

        // Sampled hot, read in the order sent: OpenAI's field order, and each top_logprobs object in vLLM's
        // (the sampled token first, then the top 3 best first: 4 entries where it is not among them).
        const Reply hot = post(port_, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 2.0},
                                                          {"seed", 7}, {"logprobs", 3}});
        QVERIFY2(hot.status == 200, hot.body.constData());
        const nlohmann::ordered_json sent = nlohmann::ordered_json::parse(hot.body.toStdString());
        std::vector<std::string> keys;
        for (const auto& [key, value] : sent.items()) keys.push_back(key);
        QCOMPARE(keys, (std::vector<std::string>{"id", "object", "created", "model", "choices", "usage"}));
        const auto& hlp = sent["choices"][0]["logprobs"];
        int outside_top = 0;
        for (size_t t = 0; t < hlp["tokens"].size(); ++t) {
            const auto& top = hlp["top_logprobs"][t];
            QCOMPARE(top.begin().key(), hlp["tokens"][t].get<std::string>());
            const bool among = top.size() == 3;
            QVERIFY(among || top.size() == 4);
            outside_top += !among;
            double last = 0;
            for (auto it = std::next(top.begin()); it != top.end(); ++it) {
                QVERIFY(it == std::next(top.begin()) || it.value().get<double>() <= last);
                last = it.value().get<double>();
            }
        }
        QVERIFY2(outside_top > 0, "no sampled token outside the top 3: the seed no longer tests the order");

        // Chat, streamed: each chunk carries its tokens' logprobs.
        const json body = {{"messages", json::array({{{"role", "user"}, {"content", "Who is Lily?"}}})},
                           {"max_tokens", 6}, {"temperature", 0}, {"stream", true}, {"logprobs", true}, {"top_logprobs", 2}};
        const Reply s = post(port_, "/v1/chat/completions", body);
        QCOMPARE(s.status, 200);
        int tokens = 0;
        std::string text, from_tokens;
        for (const QByteArray& e : sse_events(s.body)) {
            if (e == "[DONE]") continue;
            const json chunk = json::parse(e.toStdString());
            const json& choice = chunk["choices"][0];
            text += choice["delta"].value("content", "");
            if (choice["logprobs"].is_null()) continue;
            for (const json& t : choice["logprobs"]["content"]) {
                ++tokens;
                from_tokens += t["token"].get<std::string>();
                QCOMPARE(t["top_logprobs"].size(), size_t(2));
                QCOMPARE(t["top_logprobs"][0]["token"], t["token"]);  // greedy: the best is the token itself
                QCOMPARE(t["top_logprobs"][0]["logprob"], t["logprob"]);
                QVERIFY(t["top_logprobs"][1]["logprob"].get<double>() <= t["logprob"].get<double>());
                QCOMPARE(t["bytes"].size(), t["token"].get<std::string>().size());
            }
        }
        QCOMPARE(tokens, 6);
        QCOMPARE(from_tokens, text);

        // top_logprobs without logprobs, and out of range: 400 naming the field.
        const json bad = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"top_logprobs", 2}};
        const Reply b = post(port_, "/v1/chat/completions", bad);
        QCOMPARE(b.status, 400);
        QCOMPARE(json::parse(b.body.toStdString())["error"]["param"].get<std::string>(), std::string("top_logprobs"));
        const Reply r = post(port_, "/v1/completions", {{"prompt", "hi"}, {"logprobs", 21}});
        QCOMPARE(r.status, 400);
        QCOMPARE(json::parse(r.body.toStdString())["error"]["param"].get<std::string>(), std::string("logprobs"));
    }

    // Completions' prompt_logprobs (vLLM's extension) and echo with logprobs (OpenAI's legacy): the
    // engine's own prompt logprobs (runner/input_batch.h), null for the first prompt token; the echoed
    // text is the prompt's, each text_offset where its token's text begins; streamed in the first chunk.
    void promptLogprobsAndEcho() {
        const std::string prompt = "Once upon a time";
        std::shared_ptr<const Model> model = load_model(model_path().toStdString());
        const std::vector<int32_t> ids = model->tokenizer.encode(prompt, true);
        SamplingParams params;
        params.temperature = 0;
        params.max_tokens = 3;
        params.prompt_logprobs = 2;
        params.logprobs = 2;
        std::vector<TokenLogprobs> want, want_out;
        std::string out_text;
        for (RequestOutput& o : engine_alone(*model, ids, params)) {
            if (o.prompt_logprobs) want = *o.prompt_logprobs;
            want_out.insert(want_out.end(), o.logprobs.begin(), o.logprobs.end());
            out_text += o.text_delta;
        }
        auto near = [](const json& v, float x) { return std::fabs(v.get<double>() - x) < 1e-5; };

        const Reply c = post(port_, "/v1/completions",
                             {{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0}, {"prompt_logprobs", 2}});
        QVERIFY2(c.status == 200, c.body.constData());
        verify_prompt_logprobs(json::parse(c.body.toStdString())["choices"][0]["prompt_logprobs"], ids, want,
                               model->tokenizer, 2);
        if (QTest::currentTestFailed()) return;

        // echo with logprobs, whole and streamed: the same text and the same lists.
        for (bool stream : {false, true}) {
            const json body = {{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0}, {"echo", true},
                               {"logprobs", 2}, {"stream", stream}};
            const Reply e = post(port_, "/v1/completions", body);
            QVERIFY2(e.status == 200, e.body.constData());
            std::string text;
            json lp = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                       {"text_offset", json::array()}};
            if (stream) {
                for (const QByteArray& ev : sse_events(e.body)) {
                    if (ev == "[DONE]") continue;
                    const json choice = json::parse(ev.toStdString())["choices"][0];
                    text += choice["text"].get<std::string>();
                    if (!choice["logprobs"].is_null())
                        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
                            for (const json& v : choice["logprobs"][key]) lp[key].push_back(v);
                }
            } else {
                const json choice = json::parse(e.body.toStdString())["choices"][0];
                text = choice["text"].get<std::string>();
                lp = choice["logprobs"];
            }
            QCOMPARE(text, prompt + out_text);
            QCOMPARE(lp["tokens"].size(), ids.size() + 3);
            QVERIFY(lp["token_logprobs"][0].is_null());
            QVERIFY(lp["top_logprobs"][0].is_null());
            for (size_t t = 1; t < ids.size() + 3; ++t) {
                const TokenLogprobs& l = t < ids.size() ? want[t - 1] : want_out[t - ids.size()];
                QCOMPARE(lp["tokens"][t].get<std::string>(), model->tokenizer.token_to_bytes(l.token_id));
                QVERIFY(near(lp["token_logprobs"][t], l.logprob));
                // The top 2, and the token itself where it is not among them (vLLM's K + 1).
                const json& top = lp["top_logprobs"][t];
                QVERIFY2(top.size() == 2 || top.size() == 3, top.dump().c_str());
                QVERIFY2(top.contains(lp["tokens"][t].get<std::string>()), top.dump().c_str());
                QVERIFY(near(top[lp["tokens"][t].get<std::string>()], l.logprob));
            }
            // Offsets point into the echoed text: the prompt's words start where the text has them.
            QCOMPARE(lp["text_offset"][1].get<size_t>(), size_t(0));  // after BOS, which has no text
            QCOMPARE(text.substr(lp["text_offset"][2].get<size_t>(), 5), std::string(" upon"));
            QCOMPARE(lp["text_offset"][ids.size()].get<size_t>(), prompt.size());  // the first generated token
        }

        // echo without logprobs: the text only.
        const Reply e = post(port_, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0}, {"echo", true}});
        QCOMPARE(json::parse(e.body.toStdString())["choices"][0]["text"].get<std::string>(), prompt + out_text);
        // A text prompt is echoed as sent (vLLM), special tokens written in it included, though they are
        // ids to the model; a prompt of ids is echoed detokenized.
        const std::string with_specials = "<s>Once upon</s> a time";
        const Reply sp = post(port_, "/v1/completions", {{"prompt", json::array({with_specials, ids})}, {"max_tokens", 1},
                                                         {"temperature", 0}, {"echo", true}});
        QVERIFY2(sp.status == 200, sp.body.constData());
        const json echoed = json::parse(sp.body.toStdString());
        QCOMPARE(echoed["choices"].size(), size_t(2));
        for (const json& choice : echoed["choices"]) {
            const std::string text = choice["text"].get<std::string>();
            const std::string& sent = choice["index"].get<int>() == 0 ? with_specials : prompt;
            QVERIFY2(text.size() > sent.size() && text.compare(0, sent.size(), sent) == 0, text.c_str());
        }

        // Bad values: 400 naming the field; -1 is off.
        for (const json& bad : {json(-2), json(21), json("2")}) {
            const Reply r = post(port_, "/v1/completions", {{"prompt", "hi"}, {"prompt_logprobs", bad}});
            QCOMPARE(r.status, 400);
            QCOMPARE(json::parse(r.body.toStdString())["error"]["param"].get<std::string>(), std::string("prompt_logprobs"));
        }
        const Reply off = post(port_, "/v1/completions", {{"prompt", "hi"}, {"prompt_logprobs", -1}, {"max_tokens", 1}});
        QCOMPARE(off.status, 200);
        QVERIFY(!json::parse(off.body.toStdString())["choices"][0].contains("prompt_logprobs"));
    }

    // /tokenize with messages (vLLM's chat form) counts what the chat endpoint runs: the rendered template.
    void tokenizeMessagesCountsTheChatPrompt() {
        std::shared_ptr<const Model> model = load_model(model_path().toStdString());
        const json messages = json::array({{{"role", "user"}, {"content", "Once upon a time"}}});
        for (bool generation_prompt : {true, false}) {
            const std::string text = model->chat_template.render({{"user", "Once upon a time"}}, generation_prompt);
            const std::vector<int32_t> want =
                model->tokenizer.encode(text, !model->chat_template.renders_bos());
            const Reply r = post(port_, "/tokenize", {{"messages", messages}, {"add_generation_prompt", generation_prompt}});
            QVERIFY2(r.status == 200, r.body.constData());
            const json j = json::parse(r.body.toStdString());
            QCOMPARE(j["tokens"].get<std::vector<int32_t>>(), want);
            QCOMPARE(j["count"].get<size_t>(), want.size());
        }
        const Reply chat = post(port_, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}});
        QVERIFY2(chat.status == 200, chat.body.constData());
        const Reply counted = post(port_, "/tokenize", {{"messages", messages}});
        QCOMPARE(json::parse(counted.body.toStdString())["count"], json::parse(chat.body.toStdString())["usage"]["prompt_tokens"]);

        const Reply bad = post(port_, "/tokenize", {{"messages", messages}, {"add_generation_prompt", "yes"}});
        QCOMPARE(bad.status, 400);
        QCOMPARE(json::parse(bad.body.toStdString())["error"]["param"].get<std::string>(), std::string("add_generation_prompt"));
        const Reply role = post(port_, "/tokenize", {{"messages", json::array({{{"role", "tool"}, {"content", "x"}}})}});
        QCOMPARE(role.status, 400);

        // continue_final_message (vLLM's, HF's rendering): the text ends where the final message's content
        // does, so the model goes on with it; the chat endpoint runs the same prompt.
        const json opened = json::array({{{"role", "user"}, {"content", "Tell me a story"}},
                                          {{"role", "assistant"}, {"content", "Once upon a time "}}});
        const std::string full = model->chat_template.render({{"user", "Tell me a story"}, {"assistant", "Once upon a time "}}, false);
        const std::string prefix = full.substr(0, full.rfind("Once upon a time") + std::string("Once upon a time ").size());
        QVERIFY2(prefix.size() < full.size(), full.c_str());  // the template closes the turn after it
        const json go_on = {{"messages", opened}, {"add_generation_prompt", false}, {"continue_final_message", true}};
        const Reply cont = post(port_, "/tokenize", go_on);
        QVERIFY2(cont.status == 200, cont.body.constData());
        QCOMPARE(json::parse(cont.body.toStdString())["tokens"].get<std::vector<int32_t>>(),
                 model->tokenizer.encode(prefix, !model->chat_template.renders_bos()));
        json go_on_chat = go_on;
        go_on_chat["max_tokens"] = 1;
        const Reply continued = post(port_, "/v1/chat/completions", go_on_chat);
        QVERIFY2(continued.status == 200, continued.body.constData());
        QCOMPARE(json::parse(continued.body.toStdString())["usage"]["prompt_tokens"],
                 json::parse(cont.body.toStdString())["count"]);
        // Both at once is refused, as vLLM refuses it (add_generation_prompt defaults to true).
        const Reply both = post(port_, "/v1/chat/completions", {{"messages", opened}, {"continue_final_message", true}});
        QCOMPARE(both.status, 400);
        QCOMPARE(json::parse(both.body.toStdString())["error"]["param"].get<std::string>(), std::string("continue_final_message"));
        const Reply kwargs = post(port_, "/tokenize", {{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", 1}}}});
        QCOMPARE(kwargs.status, 400);
        QCOMPARE(json::parse(kwargs.body.toStdString())["error"]["param"].get<std::string>(), std::string("enable_thinking"));
    }

    // vLLM's prompt scoring, as lm-eval's loglikelihood asks for it: echo with max_tokens 0 returns the
    // prompt alone, its logprobs those of the same request that generates, streamed or not.
    void echoWithoutGenerationScoresThePrompt() {
        const json scored = {{"prompt", "Once upon a time there"}, {"echo", true}, {"max_tokens", 0}, {"logprobs", 2}, {"temperature", 0}};
        const Reply r = post(port_, "/v1/completions", scored);
        QVERIFY2(r.status == 200, r.body.constData());
        const json choice = json::parse(r.body.toStdString())["choices"][0];
        QCOMPARE(choice["text"].get<std::string>(), std::string("Once upon a time there"));
        json generating = scored;
        generating["max_tokens"] = 3;
        const json full = json::parse(post(port_, "/v1/completions", generating).body.toStdString())["choices"][0]["logprobs"];
        const size_t n = choice["logprobs"]["tokens"].size();
        QCOMPARE(full["tokens"].size(), n + 3);
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
            for (size_t t = 0; t < n; ++t) QCOMPARE(choice["logprobs"][key][t], full[key][t]);
        json streamed = scored;
        streamed["stream"] = true;
        const Reply s = post(port_, "/v1/completions", streamed);
        QCOMPARE(s.status, 200);
        std::string text;
        size_t tokens = 0;
        for (const QByteArray& e : sse_events(s.body)) {
            if (e == "[DONE]") continue;
            const json c = json::parse(e.toStdString())["choices"][0];
            text += c["text"].get<std::string>();
            if (!c["logprobs"].is_null()) tokens += c["logprobs"]["tokens"].size();
        }
        QCOMPARE(text, std::string("Once upon a time there"));
        QCOMPARE(tokens, n);
        // Without echo, max_tokens 0 is still refused.
        QCOMPARE(post(port_, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 0}}).status, 400);
    }

    // vLLM's chat echo: the answer opens with the last message where that is the assistant's (as
    // continue_final_message goes on with it), streamed or not; a last user message is not repeated.
    void chatEchoOpensWithTheLastAssistantMessage() {
        const json opened = json::array({{{"role", "user"}, {"content", "Tell me a story"}},
                                          {{"role", "assistant"}, {"content", "Once upon a time"}}});
        json body = {{"messages", opened},         {"add_generation_prompt", false}, {"continue_final_message", true},
                     {"echo", true},               {"max_tokens", 4},               {"temperature", 0}};
        const Reply r = post(port_, "/v1/chat/completions", body);
        QVERIFY2(r.status == 200, r.body.constData());
        const std::string content = json::parse(r.body.toStdString())["choices"][0]["message"]["content"];
        QVERIFY2(content.starts_with("Once upon a time") && content.size() > 16, content.c_str());
        body["stream"] = true;
        const Reply s = post(port_, "/v1/chat/completions", body);
        QCOMPARE(s.status, 200);
        std::string streamed;
        for (const QByteArray& e : sse_events(s.body))
            if (e != "[DONE]") streamed += json::parse(e.toStdString())["choices"][0]["delta"].value("content", "");
        QCOMPARE(streamed, content);
        const Reply user_last = post(port_, "/v1/chat/completions", {{"messages", json::array({opened[0]})}, {"echo", true},
                                                                     {"max_tokens", 2}, {"temperature", 0}});
        QVERIFY2(user_last.status == 200, user_last.body.constData());
        const std::string answer = json::parse(user_last.body.toStdString())["choices"][0]["message"]["content"];
        QVERIFY2(!answer.starts_with("Tell me"), answer.c_str());
    }

    // Chat's prompt_logprobs (vLLM accepts them there too): of the rendered template's token ids, once at
    // the top level of the response, or of the stream chunk that carries the first token.
    void chatPromptLogprobs() {
        std::shared_ptr<const Model> model = load_model(model_path().toStdString());
        const std::string text = model->chat_template.render({{"user", "Once upon a time"}}, true);
        const std::vector<int32_t> ids =
            model->tokenizer.encode(text, !model->chat_template.renders_bos());
        SamplingParams params;
        params.temperature = 0;
        params.max_tokens = 2;
        params.prompt_logprobs = 3;
        std::vector<TokenLogprobs> want;
        for (RequestOutput& o : engine_alone(*model, ids, params))
            if (o.prompt_logprobs) want = *o.prompt_logprobs;

        const json messages = json::array({{{"role", "user"}, {"content", "Once upon a time"}}});
        for (bool stream : {false, true}) {
            const json body = {{"messages", messages}, {"max_tokens", 2}, {"temperature", 0}, {"prompt_logprobs", 3},
                               {"stream", stream}};
            const Reply r = post(port_, "/v1/chat/completions", body);
            QVERIFY2(r.status == 200, r.body.constData());
            json plp;
            int places = 0;
            if (stream) {
                for (const QByteArray& ev : sse_events(r.body)) {
                    if (ev == "[DONE]") continue;
                    const json chunk = json::parse(ev.toStdString());
                    QVERIFY(!chunk["choices"][0].contains("prompt_logprobs"));
                    if (chunk.contains("prompt_logprobs")) plp = chunk["prompt_logprobs"], ++places;
                }
            } else {
                const json response = json::parse(r.body.toStdString());
                QVERIFY(!response["choices"][0].contains("prompt_logprobs"));
                if (response.contains("prompt_logprobs")) plp = response["prompt_logprobs"], ++places;
            }
            QCOMPARE(places, 1);
            verify_prompt_logprobs(plp, ids, want, model->tokenizer, 3);
            if (QTest::currentTestFailed()) return;
        }

        // Bad values: 400 naming the field, as in completions; -1 is off.
        for (const json& bad : {json(-2), json(21), json("2")}) {
            const Reply r = post(port_, "/v1/chat/completions", {{"messages", messages}, {"prompt_logprobs", bad}});
            QCOMPARE(r.status, 400);
            QCOMPARE(json::parse(r.body.toStdString())["error"]["param"].get<std::string>(), std::string("prompt_logprobs"));
        }
        const Reply off = post(port_, "/v1/chat/completions", {{"messages", messages}, {"prompt_logprobs", -1}, {"max_tokens", 1}});
        QCOMPARE(off.status, 200);
        QVERIFY(!json::parse(off.body.toStdString()).contains("prompt_logprobs"));
    }

    void metricsArePrometheusText() {
        const Reply r = http(port_, "GET", "/metrics");
        QCOMPARE(r.status, 200);
        for (const char* name : {"kvscope:num_requests_running{", "kvscope:num_requests_waiting{",
                                 "kvscope:kv_cache_usage_perc{", "kvscope:prompt_tokens_total{",
                                 "kvscope:generation_tokens_total{", "kvscope:num_preemptions_total{",
                                 "kvscope:prefix_cache_queries_total{", "kvscope:prefix_cache_hits_total{",
                                 "# TYPE kvscope:time_to_first_token_seconds histogram",
                                 "kvscope:time_to_first_token_seconds_bucket{", "le=\"+Inf\"",
                                 "kvscope:e2e_request_latency_seconds_count{",
                                 "kvscope:inter_token_latency_seconds_sum{"})
            QVERIFY2(r.body.contains(name), name);
        QVERIFY(metric(r.body, "generation_tokens_total") >= 20);
        QVERIFY(metric(r.body, "time_to_first_token_seconds_count") >= 1);
    }

    // A client that goes away mid-stream has its request aborted: once idle, no KV block is in use.
    void disconnectMidStreamFreesBlocks() {
        const double aborted_before = metric(http(port_, "GET", "/metrics").body, "request_success_total", "abort");
        {
            QTcpSocket s;
            s.connectToHost("127.0.0.1", static_cast<quint16>(port_));
            QVERIFY(s.waitForConnected(5000));
            const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 500}, {"ignore_eos", true}, {"stream", true}};
            s.write(request_bytes("POST", "/v1/completions", QByteArray::fromStdString(body.dump())));
            s.flush();
            QByteArray got;
            QElapsedTimer t;
            t.start();
            while (!got.contains("data: ") && t.elapsed() < 20000) {
                s.waitForReadyRead(200);
                got += s.readAll();
            }
            QVERIFY2(got.contains("data: "), got.constData());
            s.abort();  // gone mid-stream
        }
        QByteArray text;
        QElapsedTimer t;
        t.start();
        do {
            QTest::qWait(50);
            text = http(port_, "GET", "/metrics").body;
        } while (t.elapsed() < 10000 && (metric(text, "num_requests_running") != 0 ||
                                         metric(text, "num_requests_waiting") != 0 ||
                                         metric(text, "kv_cache_usage_perc") != 0));
        QCOMPARE(metric(text, "num_requests_running"), 0.0);
        QCOMPARE(metric(text, "num_requests_waiting"), 0.0);
        QCOMPARE(metric(text, "kv_cache_usage_perc"), 0.0);
        // 500 tokens take far longer than noticing the disconnect: the request ended as an abort.
        QCOMPARE(metric(text, "request_success_total", "abort"), aborted_before + 1);

        const Reply good = post(port_, "/v1/completions", {{"prompt", "Tom and Lily went to"}, {"max_tokens", 4}});
        QCOMPARE(good.status, 200);
    }
};

QTEST_GUILESS_MAIN(TestServe)
#include "test_serve.moc"
