#include "soak_client.h"

#include "raw_socket.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <thread>

namespace kvscope::soak {

namespace {

using nlohmann::json;

RequestResult error(int status, std::string detail) { return {Outcome::ERROR, status, std::move(detail)}; }

std::string excerpt(std::string_view text) {
    std::string out(text.substr(0, 200));
    for (char& c : out)
        if (c == '\r' || c == '\n') c = ' ';
    return text.size() > 200 ? out + "..." : out;
}

bool is_done_reason(const json& reason) {
    return reason.is_string() && (reason == "stop" || reason == "length");
}

// A 200 without streaming: one choice per prompt x n, each finished with stop or length.
RequestResult judge_response(const SoakRequest& r, const test::HttpReply& reply) {
    const json j = json::parse(reply.body, nullptr, false);
    if (j.is_discarded() || !j.contains("choices") || !j["choices"].is_array())
        return error(reply.status, "a 200 without a choices list: " + excerpt(reply.body));
    if (j["choices"].size() != r.num_choices)
        return error(reply.status, std::to_string(j["choices"].size()) + " choices, expected " + std::to_string(r.num_choices));
    for (const json& c : j["choices"])
        if (!is_done_reason(c.value("finish_reason", json())))
            return error(reply.status, "a choice ended with finish_reason " + c.value("finish_reason", json()).dump());
    const int64_t tokens = j["usage"].value("completion_tokens", int64_t{-1});
    if (tokens < 0 || tokens > static_cast<int64_t>(r.num_choices) * r.max_tokens)
        return error(reply.status, "usage.completion_tokens " + std::to_string(tokens) + " for " +
                                       std::to_string(r.num_choices) + " choices of at most " + std::to_string(r.max_tokens));
    return {Outcome::COMPLETED, reply.status, ""};
}

// A 200 stream: events for each choice, a finish reason for every one, the usage chunk when asked for,
// and [DONE] last.
RequestResult judge_stream(const SoakRequest& r, const test::HttpReply& reply) {
    const std::vector<std::string> events = test::sse_data(reply.body);
    if (events.empty() || events.back() != "[DONE]")
        return error(reply.status, "the stream did not end with [DONE] (" + std::to_string(events.size()) + " events)");
    std::set<size_t> finished;
    bool usage = false;
    for (size_t e = 0; e + 1 < events.size(); ++e) {
        const json j = json::parse(events[e], nullptr, false);
        if (j.is_discarded() || !j.contains("choices")) return error(reply.status, "a malformed event: " + excerpt(events[e]));
        if (j["choices"].empty() && j.contains("usage")) {
            usage = true;
            continue;
        }
        for (const json& c : j["choices"]) {
            const size_t index = c.value("index", size_t{0});
            if (index >= r.num_choices) return error(reply.status, "an event for choice " + std::to_string(index));
            const json reason = c.value("finish_reason", json());
            if (reason.is_null()) continue;
            if (!is_done_reason(reason)) return error(reply.status, "a choice ended with finish_reason " + reason.dump());
            if (!finished.insert(index).second) return error(reply.status, "choice " + std::to_string(index) + " finished twice");
        }
    }
    if (finished.size() != r.num_choices)
        return error(reply.status, std::to_string(finished.size()) + " of " + std::to_string(r.num_choices) + " choices finished");
    if (r.include_usage && !usage) return error(reply.status, "no usage chunk although include_usage was set");
    return {Outcome::COMPLETED, reply.status, ""};
}

RequestResult judge(const SoakRequest& r, const std::string& raw) {
    const auto reply = test::parse_reply(raw);
    if (!reply) return error(0, raw.empty() ? "no reply" : "not an HTTP reply: " + excerpt(raw));
    if (reply->status >= 400 && reply->status < 500) {
        const json j = json::parse(reply->body, nullptr, false);
        if (j.is_discarded() || !j.contains("error") || !j["error"].value("message", json()).is_string() ||
            j["error"]["message"].get<std::string>().empty())
            return error(reply->status, "a " + std::to_string(reply->status) + " without OpenAI's error body: " + excerpt(reply->body));
        return {Outcome::REFUSED_4XX, reply->status, j["error"]["message"].get<std::string>()};
    }
    if (reply->status >= 500) return error(reply->status, "HTTP " + std::to_string(reply->status) + ": " + excerpt(reply->body));
    if (!r.valid) return error(reply->status, "an invalid request was answered HTTP " + std::to_string(reply->status));
    if (reply->status != 200) return error(reply->status, "HTTP " + std::to_string(reply->status));
    if (!reply->complete) return error(reply->status, "the reply was cut short (" + std::to_string(reply->body.size()) + " body bytes)");
    return r.stream ? judge_stream(r, *reply) : judge_response(r, *reply);
}

}  // namespace

void KeptConnection::reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

namespace {

// Sends a keep-alive request and reads exactly its reply. Nothing when the connection was one kept from
// before and the server had closed it without a byte of reply (its keep-alive timeout): a client sends
// again on a new connection then, as HTTP clients do.
std::optional<RequestResult> run_kept_alive(int port, const SoakRequest& r, double timeout_s, KeptConnection& kept) {
    const int reused = kept.take();
    const int fd = reused >= 0 ? reused : test::connect_loopback(port);
    if (fd < 0) return error(0, "cannot connect to the server");
    std::string raw;
    test::ReceiveEnd end = test::ReceiveEnd::FAILED;
    if (test::send_all(fd, r.bytes)) {
        const auto whole_reply = [](const std::string& data) {
            const auto reply = test::parse_reply(data);
            return reply && reply->complete;
        };
        end = test::receive_until(fd, raw, whole_reply, timeout_s);
    }
    if (reused >= 0 && raw.empty() && end != test::ReceiveEnd::TIMEOUT) {
        ::close(fd);
        return std::nullopt;
    }
    if (end == test::ReceiveEnd::TIMEOUT) {
        ::close(fd);
        return error(test::status_of(raw), "the request did not end within " + std::to_string(static_cast<int>(timeout_s)) + " s");
    }
    RequestResult result = judge(r, raw);
    result.reused_connection = reused >= 0;
    const auto reply = test::parse_reply(raw);
    const bool server_keeps = end == test::ReceiveEnd::DONE && reply &&
                              test::header_value(reply->head, "Connection").value_or("") != "close";
    if (server_keeps && result.outcome != Outcome::ERROR) kept.keep(fd);
    else ::close(fd);
    return result;
}

}  // namespace

RequestResult run_request(int port, const SoakRequest& r, double timeout_s, KeptConnection& kept) {
    if (r.keep_alive) {
        if (auto result = run_kept_alive(port, r, timeout_s, kept)) return *result;
        return *run_kept_alive(port, r, timeout_s, kept);  // on a new connection: never nothing
    }
    const int fd = test::connect_loopback(port);
    if (fd < 0) return error(0, "cannot connect to the server");
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    if (!test::send_all(fd, r.bytes) && r.valid && r.disconnect == Disconnect::NONE)
        return error(0, "the server closed the connection while the request was sent");

    std::string raw;
    if (r.disconnect == Disconnect::MID_REQUEST) {
        std::this_thread::sleep_for(std::chrono::milliseconds(r.disconnect_after_ms));
        return {Outcome::ABORTED, 0, ""};  // the closer closes: the server must abort what is left
    }
    if (r.disconnect == Disconnect::AFTER_FIRST_EVENT) {
        // Until the head says 200 and one whole event has arrived; any other reply is read to its end.
        const auto first_event = [](const std::string& data) {
            const size_t head_end = data.find("\r\n\r\n");
            if (head_end == std::string::npos || test::status_of(data) != 200) return false;
            const size_t event = data.find("data: ", head_end);
            return event != std::string::npos && data.find("\n\n", event) != std::string::npos;
        };
        const test::ReceiveEnd end = test::receive_until(fd, raw, first_event, timeout_s);
        if (end == test::ReceiveEnd::DONE) return {Outcome::ABORTED, 200, ""};
        if (end == test::ReceiveEnd::TIMEOUT)
            return error(test::status_of(raw), "no first event within " + std::to_string(static_cast<int>(timeout_s)) + " s");
        return judge(r, raw);
    }
    const test::ReceiveEnd end = test::receive_until(fd, raw, nullptr, timeout_s);
    if (end == test::ReceiveEnd::TIMEOUT)
        return error(test::status_of(raw), "the request did not end within " + std::to_string(static_cast<int>(timeout_s)) +
                                               " s (" + std::to_string(raw.size()) + " bytes so far)");
    // FAILED (a reset) after a whole reply is still judged by the reply: a server that refuses before
    // reading the body closes with the body unread, which may reset the connection.
    return judge(r, raw);
}

}  // namespace kvscope::soak
