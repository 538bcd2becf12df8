// The client side of a remote engine, with no network: the SSE framing (events split anywhere, CRLF,
// comments, multi-line data), the OpenAI stream reader (token times, usage, [DONE], each way a stream
// can go wrong), the request body, the Prometheus text reader, and the mapping of the /metrics
// families of vLLM, SGLang, TGI, llama-server and kvscope into one series (hand-written samples in
// each engine's names, from their docs and sources), with the series each engine does not report.
#include "remote/http_client.h"
#include "remote/openai_stream.h"
#include "remote/prometheus_text.h"
#include "remote/remote_bench_target.h"
#include "remote/server_metrics.h"
#include "remote/sse_parser.h"

#include <QtTest>

#include <nlohmann/json.hpp>

using namespace kvscope;

namespace {

// Feeds `bytes` to a parser in pieces of `step` bytes; returns every event's data.
std::vector<std::string> parse_in_pieces(const std::string& bytes, size_t step) {
    SseParser p;
    std::vector<std::string> out;
    for (size_t i = 0; i < bytes.size(); i += step)
        for (std::string& e : p.feed(std::string_view(bytes).substr(i, step))) out.push_back(std::move(e));
    return out;
}

std::string completion_chunk(const std::string& text, const char* finish = nullptr) {
    nlohmann::json c = {{"index", 0}, {"text", text}, {"finish_reason", finish ? nlohmann::json(finish) : nlohmann::json()}};
    return "data: " + nlohmann::json{{"object", "text_completion"}, {"choices", {c}}}.dump() + "\n\n";
}

const char* const kUsage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\n";

// Hand-written /metrics pages in each engine's family names (HELP/TYPE lines as the engines print them).
const char* const kVllmPage = R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.25
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1000.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 250.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5000.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 800.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
)";

const char* const kSglangPage = R"(# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 6.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.28
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0075
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="meta-llama/Llama-3.1-8B-Instruct"} 321.5
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
)";

const char* const kTgiPage = R"(# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 4
# TYPE tgi_queue_size gauge
tgi_queue_size 2
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="+Inf"} 10
tgi_request_input_length_sum 1500
tgi_request_input_length_count 10
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_sum 640
tgi_request_generated_tokens_count 10
)";

const char* const kLlamacppPage = R"(# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 6886
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 3469
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 2.37151
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 0.97
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.125
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
)";

const char* const kKvscopePage = R"(# TYPE kvscope:num_requests_running gauge
kvscope:num_requests_running{engine="0",model_name="dummy:tiny"} 1
kvscope:num_requests_waiting{engine="0",model_name="dummy:tiny"} 0
kvscope:kv_cache_usage_perc{engine="0",model_name="dummy:tiny"} 0.75
kvscope:num_preemptions_total{engine="0",model_name="dummy:tiny"} 2
kvscope:prefix_cache_queries_total{engine="0",model_name="dummy:tiny"} 100
kvscope:prefix_cache_hits_total{engine="0",model_name="dummy:tiny"} 40
kvscope:prompt_tokens_total{engine="0",model_name="dummy:tiny"} 300
kvscope:generation_tokens_total{engine="0",model_name="dummy:tiny"} 90
kvscope:request_success_total{engine="0",finished_reason="stop",model_name="dummy:tiny"} 3
)";

double v(const std::optional<double>& x) { return x ? *x : -12345; }

}  // namespace

class TestRemoteProtocol : public QObject {
    Q_OBJECT
private slots:
    void sseEventsSurviveAnySplit_data() {
        QTest::addColumn<int>("step");
        for (int step : {1, 2, 3, 7, 1000}) QTest::newRow(qPrintable(QString::number(step))) << step;
    }
    void sseEventsSurviveAnySplit() {
        QFETCH(int, step);
        const std::string stream = ": a comment\r\nevent: x\r\ndata: one\r\n\r\ndata:two\ndata: lines\n\nid: 5\n\ndata: [DONE]\n\n";
        const std::vector<std::string> events = parse_in_pieces(stream, static_cast<size_t>(step));
        QCOMPARE(events.size(), size_t(3));
        QCOMPARE(events[0], std::string("one"));
        QCOMPARE(events[1], std::string("two\nlines"));  // two data lines of one event
        QCOMPARE(events[2], std::string("[DONE]"));
    }

    void sseKnowsAStreamCutMidEvent() {
        SseParser p;
        QVERIFY(p.feed("data: {\"a\":1}\n\ndata: {\"b\"").size() == 1);
        QVERIFY(p.has_partial_event());
        SseParser q;
        q.feed("data: x\n\n");
        QVERIFY(!q.has_partial_event());
    }

    void readerTakesTokenTimesUsageAndDone() {
        OpenAiStreamReader r(OpenAiApi::COMPLETIONS);
        QVERIFY(r.feed(200, completion_chunk("Hel"), 1.0));
        QVERIFY(r.feed(200, completion_chunk("lo"), 1.5));
        QVERIFY(r.feed(200, completion_chunk(" you", "length"), 2.0));
        QVERIFY(r.feed(200, kUsage, 2.1));
        QVERIFY(r.feed(200, "data: [DONE]\n\n", 2.2));
        r.finish(200, "");
        QCOMPARE(r.error(), std::string());
        QCOMPARE(r.chunk_times(), (std::vector<double>{1.0, 1.5, 2.0}));
        QCOMPARE(r.prompt_tokens(), 7);
        QCOMPARE(r.completion_tokens(), 3);
        QCOMPARE(r.finish_reason(), std::string("length"));
        QCOMPARE(r.text(), std::string("Hello you"));  // what a chat pane shows as it streams
        QCOMPARE(r.cached_tokens(), -1);                 // not reported
    }

    // llama-server (and vLLM with --enable-prompt-tokens-details) report the prompt tokens it took from its
    // prefix cache; they become the request's num_cached_tokens.
    void readerTakesCachedTokens() {
        OpenAiStreamReader r(OpenAiApi::COMPLETIONS);
        QVERIFY(r.feed(200, completion_chunk("a", "length"), 1.0));
        QVERIFY(r.feed(200, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":1,"
                            "\"prompt_tokens_details\":{\"cached_tokens\":6}}}\n\ndata: [DONE]\n\n", 1.1));
        RequestMetrics m;
        QCOMPARE(finish_remote_request(m, r, 200, "", 1.2), std::string());
        QCOMPARE(m.num_prompt_tokens, 7);
        QCOMPARE(m.num_cached_tokens, 6);
    }

    void chatRoleChunkIsNoToken() {
        OpenAiStreamReader r(OpenAiApi::CHAT);
        r.feed(200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n", 0.1);
        r.feed(200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n", 0.7);
        r.feed(200, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", 0.9);
        r.finish(200, "");
        QCOMPARE(r.error(), std::string());
        QCOMPARE(r.chunk_times(), (std::vector<double>{0.7, 0.9}));
        QCOMPARE(r.finish_reason(), std::string("stop"));
        QCOMPARE(r.text(), std::string("Hi"));
    }

    // A reasoning model thinks in delta.reasoning_content (llama-server, SGLang) or delta.reasoning (vLLM):
    // those chunks are tokens (the first one is the TTFT), not the answer's text. They had counted as bytes
    // without a token, which --request-timeout ended.
    void chatReasoningChunksAreTokens() {
        OpenAiStreamReader r(OpenAiApi::CHAT, 0, 5);
        r.feed(200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n", 0.1);
        r.feed(200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Let me\"}}]}\n\n", 0.4);
        r.feed(200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\" think\"}}]}\n\n", 3.0);
        QVERIFY(r.feed(200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\".\"}}]}\n\n", 7.5));
        r.feed(200, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n", 8.0);
        r.feed(200, "data: [DONE]\n\n", 8.1);
        r.finish(200, "");
        QCOMPARE(r.error(), std::string());
        QCOMPARE(r.chunk_times(), (std::vector<double>{0.4, 3.0, 7.5, 8.0}));
        QCOMPARE(r.text(), std::string("Hi"));
    }

    // Every way a stream goes wrong ends in an error that says what happened.
    void readerErrors_data() {
        QTest::addColumn<int>("status");
        QTest::addColumn<QByteArray>("body");
        QTest::addColumn<QString>("transport");
        QTest::addColumn<QString>("expected");
        QTest::newRow("404") << 404 << QByteArray("{\"detail\":\"Not Found\"}") << "" << "HTTP 404: Not Found";
        QTest::newRow("401") << 401 << QByteArray("{\"error\":{\"message\":\"incorrect API key\"}}") << ""
                             << "HTTP 401: incorrect API key";  // the message, not the JSON around it
        QTest::newRow("TGI error") << 422 << QByteArray("{\"error\":\"Input validation error\",\"error_type\":\"validation\"}") << ""
                                   << "HTTP 422: Input validation error";
        QTest::newRow("not JSON") << 502 << QByteArray("<html>Bad Gateway</html>") << "" << "HTTP 502: <html>Bad Gateway</html>";
        QTest::newRow("500") << 500 << QByteArray("boom") << "" << "HTTP 500: boom";
        QTest::newRow("not json") << 200 << QByteArray("data: {oops\n\n") << "" << "malformed SSE event";
        QTest::newRow("choices not objects") << 200 << QByteArray("data: {\"choices\":[3]}\n\n") << "" << "malformed SSE event";
        QTest::newRow("error event") << 200 << QByteArray("data: {\"error\":{\"message\":\"out of memory\"}}\n\n") << ""
                                     << "error event: out of memory";
        QTest::newRow("no [DONE]") << 200 << QByteArray(completion_chunk("a").c_str()) << "" << "the stream ended without [DONE]";
        QTest::newRow("cut mid-event") << 200 << QByteArray("data: {\"choi") << "" << "in the middle of an event";
        QTest::newRow("event after [DONE]") << 200 << QByteArray("data: [DONE]\n\ndata: {}\n\n") << "" << "after [DONE]";
        QTest::newRow("refused") << 0 << QByteArray() << "http://x: Couldn't connect to server" << "Couldn't connect";
        QTest::newRow("timeout") << 200 << QByteArray(completion_chunk("a").c_str()) << "timed out: no data for 1 s" << "timed out";
        QTest::newRow("text not a string") << 200 << QByteArray("data: {\"choices\":[{\"text\":7}]}\n\n") << ""
                                           << "text is not a string";
        // [DONE] after events that carry no token (no choices, or lines without data:): nothing was timed,
        // and the request failed with no reason, before.
        QTest::newRow("[DONE] and no token") << 200 << QByteArray("data: {\"choices\":[]}\n\ndata: [DONE]\n\n") << ""
                                             << "carried no token";
    }
    void readerErrors() {
        QFETCH(int, status);
        QFETCH(QByteArray, body);
        QFETCH(QString, transport);
        QFETCH(QString, expected);
        OpenAiStreamReader r(OpenAiApi::COMPLETIONS);
        r.feed(status, body.toStdString(), 1.0);
        r.finish(status, transport.toStdString());
        QVERIFY2(QString::fromStdString(r.error()).contains(expected), r.error().c_str());
    }

    // A server that does not end its answer is cut off: past max_tokens token events, past 16 MiB in one
    // SSE event, after --request-timeout of pings without a token, past 1000 bytes of an error body (each
    // kept a benchmark going, and its memory growing, past every timeout).
    void endlessAnswersAreCutOff() {
        OpenAiStreamReader many(OpenAiApi::COMPLETIONS, 3);
        bool open = true;
        for (int i = 0; i < 10 && open; ++i) open = many.feed(200, completion_chunk("a"), i);
        QVERIFY(!open);
        QVERIFY2(many.error().find("more than max_tokens (3)") != std::string::npos, many.error().c_str());
        QCOMPARE(many.chunk_times().size(), size_t(5));  // 3 tokens, a finishing chunk, and the one too many

        OpenAiStreamReader huge(OpenAiApi::COMPLETIONS, 8);
        const std::string mib(1 << 20, 'x');
        open = huge.feed(200, "data: ", 0);
        for (int i = 0; i < 20 && open; ++i) open = huge.feed(200, mib, 0);
        QVERIFY(!open);
        QVERIFY2(huge.error().find("an event longer than 16 MiB") != std::string::npos, huge.error().c_str());

        OpenAiStreamReader pings(OpenAiApi::COMPLETIONS, 8, 5.0);
        QVERIFY(pings.feed(200, completion_chunk("a"), 1.0));
        QVERIFY(pings.feed(200, ": ping\n\n", 4.0));
        QVERIFY(!pings.feed(200, ": ping\n\n", 6.5));  // 5.5 s since the last token
        QVERIFY2(pings.error().find("no token for 5 s") != std::string::npos, pings.error().c_str());

        OpenAiStreamReader error_body(OpenAiApi::COMPLETIONS, 8);
        open = true;
        for (int i = 0; i < 100 && open; ++i) open = error_body.feed(500, std::string(100, 'e'), 0);
        QVERIFY(!open);
        error_body.finish(500, "ended by the reader");
        QVERIFY2(error_body.error().rfind("HTTP 500: eee", 0) == 0, error_body.error().c_str());
    }

    // Usage counts a server could not have meant are not taken: more completion tokens than asked for,
    // prompt tokens past int (2^40 read as 0 before), negative ones. The chunks are counted instead.
    void implausibleUsageIsNotBelieved() {
        OpenAiStreamReader r(OpenAiApi::COMPLETIONS, 2);
        QVERIFY(r.feed(200, completion_chunk("a"), 1.0));
        QVERIFY(r.feed(200, completion_chunk("b", "length"), 1.1));
        QVERIFY(r.feed(200, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1099511627776,\"completion_tokens\":1000000,"
                            "\"prompt_tokens_details\":{\"cached_tokens\":-4}}}\n\ndata: [DONE]\n\n", 1.2));
        RequestMetrics m;
        m.num_prompt_tokens = 5;
        QCOMPARE(finish_remote_request(m, r, 200, "", 1.3), std::string());
        QCOMPARE(m.num_prompt_tokens, 5);
        QCOMPARE(m.num_output_tokens, 2);
        QCOMPARE(m.num_cached_tokens, 0);
    }

    void requestBodies() {
        OpenAiRequest q;
        q.model = "m";
        q.prompt_token_ids = {5, 6, 7};
        q.max_tokens = 9;
        const auto c = nlohmann::json::parse(openai_request_body(q));
        QCOMPARE(c["prompt"], nlohmann::json({5, 6, 7}));
        QCOMPARE(c["max_tokens"].get<int>(), 9);
        QVERIFY(c["ignore_eos"].get<bool>() && c["stream"].get<bool>() && c["stream_options"]["include_usage"].get<bool>());
        QVERIFY(!c.contains("seed"));  // greedy: no seed
        q.api = OpenAiApi::CHAT;
        q.prompt_text = "hi";
        const auto h = nlohmann::json::parse(openai_request_body(q));
        QCOMPARE(h["messages"][0]["content"].get<std::string>(), std::string("hi"));
        QCOMPARE(h["max_completion_tokens"].get<int>(), 9);
        QVERIFY(!h.contains("prompt"));
        QVERIFY(!h.contains("min_tokens"));  // only for engines known to take it
        q.min_tokens = true;
        QCOMPARE(nlohmann::json::parse(openai_request_body(q))["min_tokens"].get<int>(), 9);
        QVERIFY(engine_takes_min_tokens(ServerEngine::VLLM) && engine_takes_min_tokens(ServerEngine::SGLANG) &&
                engine_takes_min_tokens(ServerEngine::KVSCOPE));
        QVERIFY(!engine_takes_min_tokens(ServerEngine::TGI) && !engine_takes_min_tokens(ServerEngine::LLAMACPP) &&
                !engine_takes_min_tokens(ServerEngine::UNKNOWN));
        QVERIFY(!h.contains("top_p"));  // 1: the server's default
        // A chat pane's conversation: every turn in order, and the reply ends where the model ends it.
        q.messages = {{"system", "be brief"}, {"user", "hi"}, {"assistant", "hello"}, {"user", "again"}};
        q.ignore_eos = false;
        q.top_p = 0.5f;
        const auto p = nlohmann::json::parse(openai_request_body(q));
        QCOMPARE(p["messages"].size(), size_t(4));
        QCOMPARE(p["messages"][0]["role"].get<std::string>(), std::string("system"));
        QCOMPARE(p["messages"][3]["content"].get<std::string>(), std::string("again"));
        QVERIFY(!p.contains("ignore_eos"));
        QCOMPARE(p["top_p"].get<double>(), 0.5);
    }

    void credentialsLeaveTheUrl_data() {
        QTest::addColumn<QString>("url");
        QTest::addColumn<QString>("shown");
        QTest::newRow("plain") << "http://h:8000" << "http://h:8000";
        QTest::newRow("user and password") << "https://u:p@h:8000/x" << "https://h:8000/x";
        QTest::newRow("@ in the path") << "http://h/a@b" << "http://h/a@b";
        QTest::newRow("@ in the password") << "http://u:p@ss@h:8000/v1" << "http://h:8000/v1";  // kept "ss@h" before
        QTest::newRow("@ in the query") << "http://h:8000?a=b@c" << "http://h:8000?a=b@c";
    }

    void credentialsLeaveTheUrl() {
        QFETCH(QString, url);
        QFETCH(QString, shown);
        QCOMPARE(QString::fromStdString(redacted_url(url.toStdString())), shown);
    }

    void prometheusText() {
        const auto s = parse_prometheus_text(
            "# HELP x y\nfoo 1\nbar{a=\"1\",b=\"q\\\"x\"} 2.5e3 1700000000\n  baz{} NaN\nbad line\nqux{a=\"1\" 3\ninf +Inf\r\n");
        QCOMPARE(s.size(), size_t(4));
        QCOMPARE(s[0].name, std::string("foo"));
        QCOMPARE(s[1].labels.at("b"), std::string("q\"x"));
        QCOMPARE(s[1].value, 2500.0);
        QVERIFY(std::isnan(s[2].value));
        QVERIFY(std::isinf(s[3].value));
    }

    // Each engine's page maps onto the same series; what an engine lacks stays empty.
    void familiesMap_data() {
        QTest::addColumn<QByteArray>("page");
        QTest::addColumn<QString>("engine");
        QTest::addColumn<double>("running");
        QTest::addColumn<double>("waiting");
        QTest::addColumn<double>("kv");
        QTest::addColumn<double>("prompt_total");
        QTest::addColumn<double>("generation_total");
        QTest::addColumn<bool>("has_preemptions");
        QTest::addColumn<bool>("has_prefix_counters");
        constexpr double none = -12345;
        QTest::newRow("vllm") << QByteArray(kVllmPage) << "vllm" << 5.0 << 4.0 << 0.375 << 5000.0 << 800.0 << true << true;
        QTest::newRow("sglang") << QByteArray(kSglangPage) << "sglang" << 6.0 << 1.0 << 0.28 << 8.128902e6 << 7.557572e6
                                << false << false;
        QTest::newRow("tgi") << QByteArray(kTgiPage) << "tgi" << 4.0 << 2.0 << none << 1500.0 << 640.0 << false << false;
        QTest::newRow("llama.cpp") << QByteArray(kLlamacppPage) << "llama.cpp" << 2.0 << 1.0 << 0.125 << 6886.0 << 3469.0
                                   << false << false;
        QTest::newRow("kvscope") << QByteArray(kKvscopePage) << "kvscope" << 1.0 << 0.0 << 0.75 << 300.0 << 90.0 << true
                                 << true;
    }
    // Newer versions' counters: SGLang's retractions are its preemptions; llama-server's cached prompt
    // tokens give the prefix-cache hit rate (its prompt_tokens_total counts only processed tokens).
    void newerFamiliesMap() {
        auto samples = parse_prometheus_text(std::string(kSglangPage) +
                                             "# TYPE sglang:num_retracted_requests_total counter\n"
                                             "sglang:num_retracted_requests_total{model_name=\"m\"} 7\n"
                                             "sglang:num_retracted_reqs{model_name=\"m\"} 2\n");
        ServerReading r = read_server_metrics(ServerEngine::SGLANG, samples);
        QCOMPARE(v(r.num_preemptions_total), 7.0);  // the counter, never the per-step gauge
        samples = parse_prometheus_text(std::string(kLlamacppPage) +
                                        "# TYPE llamacpp:prompt_tokens_cached_total counter\n"
                                        "llamacpp:prompt_tokens_cached_total 1114\n");
        r = read_server_metrics(ServerEngine::LLAMACPP, samples);
        QCOMPARE(v(r.prefix_cache_hits_total), 1114.0);
        QCOMPARE(v(r.prefix_cache_queries_total), 8000.0);  // 6886 processed + 1114 cached
        QVERIFY(!r.num_preemptions_total);
    }

    void familiesMap() {
        QFETCH(QByteArray, page);
        QFETCH(QString, engine);
        QFETCH(double, running);
        QFETCH(double, waiting);
        QFETCH(double, kv);
        QFETCH(double, prompt_total);
        QFETCH(double, generation_total);
        QFETCH(bool, has_preemptions);
        QFETCH(bool, has_prefix_counters);
        const auto samples = parse_prometheus_text(page.toStdString());
        const ServerEngine e = engine_of_metrics(samples);
        QCOMPARE(QString::fromUtf8(to_string(e).data(), int(to_string(e).size())), engine);
        const ServerReading r = read_server_metrics(e, samples);
        QCOMPARE(v(r.num_requests_running), running);
        QCOMPARE(v(r.num_requests_waiting), waiting);
        QCOMPARE(v(r.kv_cache_usage), kv);
        QCOMPARE(v(r.prompt_tokens_total), prompt_total);
        QCOMPARE(v(r.generation_tokens_total), generation_total);
        QCOMPARE(r.num_preemptions_total.has_value(), has_preemptions);
        QCOMPARE(r.prefix_cache_queries_total.has_value(), has_prefix_counters);
    }

    // Rates from counter differences, preemptions since the first scrape, the interval's hit rate.
    void samplesFromTwoScrapes() {
        ServerReading first, later;
        first.num_preemptions_total = 10;
        first.prefix_cache_queries_total = 100;
        first.prefix_cache_hits_total = 10;
        first.prompt_tokens_total = 1000;
        first.generation_tokens_total = 50;
        later = first;
        later.num_preemptions_total = 13;
        later.prefix_cache_queries_total = 300;
        later.prefix_cache_hits_total = 60;
        later.prompt_tokens_total = 1500;
        later.generation_tokens_total = 250;
        later.kv_cache_usage = 0.5;
        const ServerSample a = server_sample(1.0, first, nullptr, 0, first);
        QVERIFY(!a.prompt_tokens_per_s && !a.kv_cache_usage);
        QCOMPARE(v(a.num_preemptions), 0.0);
        const ServerSample b = server_sample(3.0, later, &first, 1.0, first);
        QCOMPARE(v(b.num_preemptions), 3.0);
        QCOMPARE(v(b.prefix_cache_hit_rate), 0.25);  // 50 hits of 200 queries
        QCOMPARE(v(b.prompt_tokens_per_s), 250.0);
        QCOMPARE(v(b.generation_tokens_per_s), 100.0);
        QCOMPARE(v(b.kv_cache_usage), 0.5);
    }

    // The export names the series an engine never reported.
    void unreportedSeriesAreNamed() {
        ServerSeries s;
        s.engine = ServerEngine::TGI;
        const auto samples = parse_prometheus_text(kTgiPage);
        const ServerReading r = read_server_metrics(ServerEngine::TGI, samples);
        s.samples.push_back(server_sample(0, r, nullptr, 0, r));
        s.samples.push_back(server_sample(1, r, &r, 0, r));
        const nlohmann::json j = server_series_to_json(s, 0);
        QCOMPARE(j["engine"].get<std::string>(), std::string("tgi"));
        QCOMPARE(j["unreported"], nlohmann::json({"kv_cache_usage", "num_preemptions", "prefix_cache_hit_rate"}));
        QCOMPARE(j["samples"][1][1].get<double>(), 4.0);
        QVERIFY(j["samples"][1][3].is_null());
        QCOMPARE(j["columns"].size(), j["samples"][0].size());
    }
};

QTEST_APPLESS_MAIN(TestRemoteProtocol)
#include "test_remote_protocol.moc"
