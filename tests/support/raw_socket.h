// Plain POSIX sockets to a server on loopback, for tests that must send exactly the bytes they choose
// (a partial head, a wrong length, a thousand idle connections) or use many threads; and the little of
// HTTP/1.1 and SSE that such a client needs to read a reply (status, head, chunked body, events).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::test {

// A blocking socket connected to 127.0.0.1:port, or -1; receive_buffer > 0 sets SO_RCVBUF before the
// connection (a small window makes a slow reader's server wait on its writes).
inline int connect_loopback(int port, int receive_buffer = 0) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (receive_buffer > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

inline bool send_all(int fd, const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return false;
        sent += static_cast<size_t>(n);
    }
    return true;
}

// Everything the server sends until it closes (or `timeout_s` passes without a byte).
inline std::string receive_until_close(int fd, int timeout_s = 30) {
    timeval tv{timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string data;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) data.append(buf, static_cast<size_t>(n));
    return data;
}

// The status code of an HTTP/1.1 response, 0 when `response` is not one.
inline int status_of(const std::string& response) {
    if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
    return std::atoi(response.c_str() + 9);
}

// How receive_until stopped.
enum class ReceiveEnd { DONE, CLOSED, TIMEOUT, FAILED };

// Appends what arrives to `data` until done(data) is true, the server closes, the connection fails, or
// `timeout_s` passes in all (not per byte: a server that trickles bytes still times out).
inline ReceiveEnd receive_until(int fd, std::string& data, const std::function<bool(const std::string&)>& done,
                                double timeout_s) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
    char buf[16384];
    while (true) {
        if (done && done(data)) return ReceiveEnd::DONE;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
        if (left <= 0) return ReceiveEnd::TIMEOUT;
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
        if (ready < 0) return ReceiveEnd::FAILED;
        if (ready == 0) continue;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n == 0) return ReceiveEnd::CLOSED;
        if (n < 0) return ReceiveEnd::FAILED;
        data.append(buf, static_cast<size_t>(n));
    }
}

// A request with `Connection: close`, and a JSON body when `body` is not empty.
inline std::string http_request(const std::string& method, const std::string& path, const std::string& body = {},
                                const std::string& extra_headers = {}) {
    std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers;
    if (!body.empty()) r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    return r + "\r\n" + body;
}

// A response as read off the socket: the status, the head (status line and headers) and the body, with a
// chunked body already joined. `complete` is false when the bytes stop before the body's end.
struct HttpReply {
    int status = 0;
    std::string head;
    std::string body;
    bool complete = false;
};

// The value of header `name` in a response head (case-insensitive name), or nothing.
inline std::optional<std::string> header_value(std::string_view head, std::string_view name) {
    for (size_t at = head.find("\r\n"); at != std::string_view::npos && at + 2 < head.size();) {
        const size_t end = std::min(head.find("\r\n", at + 2), head.size());
        const std::string_view line = head.substr(at + 2, end - at - 2);
        const size_t colon = line.find(':');
        if (colon == name.size() && std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
                return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
            })) {
            std::string_view value = line.substr(colon + 1);
            while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
            while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
            return std::string(value);
        }
        at = end;
    }
    return std::nullopt;
}

// Joins a chunked body; nothing when it is malformed. `complete` says whether the last chunk arrived.
inline std::optional<std::string> dechunk(std::string_view raw, bool& complete) {
    std::string out;
    complete = false;
    size_t at = 0;
    while (true) {
        const size_t line_end = raw.find("\r\n", at);
        if (line_end == std::string_view::npos) return out;  // cut short
        char* end = nullptr;
        const std::string size_text(raw.substr(at, line_end - at));
        const unsigned long long size = std::strtoull(size_text.c_str(), &end, 16);
        if (size_text.empty() || (*end != '\0' && *end != ';')) return std::nullopt;
        at = line_end + 2;
        if (size == 0) {
            complete = raw.find("\r\n", at) != std::string_view::npos;  // the (empty) trailer's end
            return out;
        }
        if (raw.size() < at + size + 2) return out;  // cut short
        out.append(raw.substr(at, size));
        if (raw.substr(at + size, 2) != "\r\n") return std::nullopt;
        at += size + 2;
    }
}

// Splits a response into status, head and body; nothing when `raw` does not start like an HTTP/1.1
// response (or its chunked body is malformed).
inline std::optional<HttpReply> parse_reply(std::string_view raw) {
    const size_t head_end = raw.find("\r\n\r\n");
    if (head_end == std::string_view::npos) return std::nullopt;
    HttpReply r;
    r.head = std::string(raw.substr(0, head_end));
    r.status = status_of(r.head);
    if (r.status == 0) return std::nullopt;
    const std::string_view body = raw.substr(head_end + 4);
    const auto encoding = header_value(r.head, "Transfer-Encoding");
    if (encoding && encoding->find("chunked") != std::string::npos) {
        auto joined = dechunk(body, r.complete);
        if (!joined) return std::nullopt;
        r.body = std::move(*joined);
    } else if (const auto length = header_value(r.head, "Content-Length")) {
        const size_t n = std::strtoull(length->c_str(), nullptr, 10);
        r.complete = body.size() >= n;
        r.body = std::string(body.substr(0, n));
    } else {
        r.body = std::string(body);
        r.complete = true;  // ends at close
    }
    return r;
}

// The data of each Server-Sent Event in `body` ("data: X\n\n" -> "X"), in order.
inline std::vector<std::string> sse_data(std::string_view body) {
    std::vector<std::string> out;
    size_t at = 0;
    while (true) {
        const size_t end = body.find("\n\n", at);
        if (end == std::string_view::npos) return out;
        std::string_view event = body.substr(at, end - at);
        if (event.starts_with("data: ")) out.emplace_back(event.substr(6));
        at = end + 2;
    }
}

}  // namespace kvscope::test
