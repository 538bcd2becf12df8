#include "http_connection.h"

#include "openai_protocol.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <poll.h>
#include <strings.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace kvscope::cli {

namespace {

constexpr size_t kReceiveChunk = 16 * 1024;
// Chunked bodies carry size lines and CRLFs besides the payload.
constexpr size_t kFramingSlack = 64 * 1024;

int remaining_ms(HttpClock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - HttpClock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 60'000));
}

std::atomic<int> g_num_open{0};

}  // namespace

std::string canned_error_response(const char* status_line, std::string_view message) {
    const std::string body = openai_error_body(std::atoi(status_line), message);
    return std::string("HTTP/1.1 ") + status_line + "\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

HttpConnection::HttpConnection(int fd) : fd(fd) { ++g_num_open; }

HttpConnection::~HttpConnection() {
    if (ssl) {
        if (SSL_is_init_finished(ssl)) SSL_shutdown(ssl);  // close_notify, best effort: never waits
        SSL_free(ssl);
    }
    if (fd >= 0) ::close(fd);
    --g_num_open;
}

void HttpConnection::start_tls(SSL_CTX* ctx) {
    ssl = SSL_new(ctx);
    if (!ssl || SSL_set_fd(ssl, fd) != 1) throw std::runtime_error("TLS: cannot start a session");
    SSL_set_accept_state(ssl);
}

bool HttpConnection::has_pending() const { return ssl && SSL_pending(ssl) > 0; }

namespace {
// The OpenSSL error queue as one line (and emptied, so that the next call starts clean).
std::string ssl_errors() {
    std::string out;
    while (const unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        out += (out.empty() ? "" : "; ") + std::string(buf);
    }
    return out.empty() ? "connection closed" : out;
}
}  // namespace

ssize_t HttpConnection::send_some(const char* data, size_t size, bool& want_read) {
    want_read = false;
    if (!ssl) {
        const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
        if (n >= 0) return n;
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -1;
    }
    ERR_clear_error();
    const int n = SSL_write(ssl, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    if (n > 0) return n;
    const int err = SSL_get_error(ssl, n);
    if (err == SSL_ERROR_WANT_WRITE) return 0;
    if (err == SSL_ERROR_WANT_READ) return want_read = true, 0;
    tls_error = ssl_errors();
    return -1;
}

int HttpConnection::num_open() { return g_num_open.load(); }

void HttpConnection::compact() {
    buffer.erase(0, read_pos);
    read_pos = 0;
}

bool HttpConnection::has_whole_head() const {
    return std::string_view(buffer).substr(read_pos).find("\r\n\r\n") != std::string_view::npos;
}

size_t HttpConnection::request_bytes(size_t max_body) const {
    const std::string_view pending = std::string_view(buffer).substr(read_pos);
    const size_t end = pending.find("\r\n\r\n");
    if (end == std::string_view::npos) return 0;
    const size_t head = end + 4;
    // The one Content-Length line, by a case-insensitive search; anything unusual (two of them, no digits)
    // is the worker's to refuse, with the head alone.
    std::string lower(pending.substr(0, head));
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    // A client that sent Expect: 100-continue (curl, for bodies past 1 KB) waits for the worker's 100 before
    // sending its body: held here for the body, it would stall a second.
    if (lower.find("\r\nexpect:") != std::string::npos) return head;
    const size_t at = lower.find("\r\ncontent-length:");
    if (at == std::string::npos || lower.find("\r\ncontent-length:", at + 1) != std::string::npos) return head;
    size_t i = at + 17;
    while (i < lower.size() && (lower[i] == ' ' || lower[i] == '\t')) ++i;
    size_t length = 0, digits = 0;
    for (; i < lower.size() && std::isdigit(static_cast<unsigned char>(lower[i])) && digits < 12; ++i, ++digits)
        length = length * 10 + static_cast<size_t>(lower[i] - '0');
    if (digits == 0 || length > max_body) return head;
    return head + length;
}

std::string HttpConnection::head_problem() const {
    const std::string_view pending = std::string_view(buffer).substr(read_pos);
    const size_t end = pending.find("\r\n\r\n");
    if (end == std::string_view::npos) return {};
    const std::string_view head = pending.substr(0, end + 2);  // each line with its CRLF
    const size_t first = head.find("\r\n");
    const bool http11 = head.substr(0, first).ends_with(" HTTP/1.1");
    auto is_tchar = [](unsigned char c) { return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr; };
    auto shown = [](std::string_view name) {  // a client's bytes in a message: short, printable
        std::string out;
        for (const unsigned char c : name.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
        return out;
    };
    int hosts = 0;
    for (size_t at = first + 2; at < head.size();) {
        const size_t eol = head.find("\r\n", at);
        const std::string_view line = head.substr(at, eol - at);
        at = eol + 2;
        if (line.front() == ' ' || line.front() == '\t') return "a header line is folded onto the one before it (obsolete)";
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos) return "the header line '" + shown(line) + "' has no colon";
        const std::string_view name = line.substr(0, colon);
        if (name.empty() || !std::all_of(name.begin(), name.end(), is_tchar))
            return "the header name '" + shown(name) + "' is not a token (no white space before the colon)";
        const std::string_view value = line.substr(colon + 1);
        if (std::any_of(value.begin(), value.end(), [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }))
            return "the value of header '" + shown(name) + "' holds a control character";
        if (name.size() == 4 && strncasecmp(name.data(), "host", 4) == 0) ++hosts;
    }
    if (http11 && hosts != 1) return hosts == 0 ? "an HTTP/1.1 request needs a Host header" : "a request may carry one Host header";
    return {};
}

bool HttpConnection::receive_available(size_t limit) {
    char chunk[kReceiveChunk];
    if (ssl) {
        ERR_clear_error();
        if (!SSL_is_init_finished(ssl)) {
            const int r = SSL_do_handshake(ssl);
            if (r != 1) {
                const int err = SSL_get_error(ssl, r);
                if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;  // more bytes to come
                tls_error = "TLS handshake: " + ssl_errors();
                return false;
            }
        }
        while (num_buffered() < limit) {
            const int n = SSL_read(ssl, chunk, static_cast<int>(std::min(sizeof chunk, limit - num_buffered())));
            if (n > 0) {
                buffer.append(chunk, static_cast<size_t>(n));
                continue;
            }
            const int err = SSL_get_error(ssl, n);
            if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;
            if (err != SSL_ERROR_ZERO_RETURN) tls_error = ssl_errors();
            return false;  // close_notify, or the session failed
        }
        return true;
    }
    while (num_buffered() < limit) {
        const ssize_t n = ::recv(fd, chunk, std::min(sizeof chunk, limit - num_buffered()), 0);
        if (n > 0) {
            buffer.append(chunk, static_cast<size_t>(n));
            continue;
        }
        if (n == 0) return false;  // the peer closed
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    return true;
}

HttpConnectionStream::HttpConnectionStream(HttpConnection& conn, const HttpLimits& limits)
    : conn_(conn), limits_(limits) {}

void HttpConnectionStream::begin_request() {
    budget_ = limits_.max_header_bytes + limits_.max_body_bytes + kFramingSlack;
    over_budget_ = false;
    body_deadline_ = http_deadline(limits_.body_timeout_s);
}

bool HttpConnectionStream::wait_for(short events, HttpClock::time_point deadline) const {
    while (true) {
        pollfd p{conn_.fd, events, 0};
        const int r = ::poll(&p, 1, remaining_ms(deadline));
        if (r > 0) return (p.revents & events) != 0 || (p.revents & (POLLHUP | POLLERR)) == 0;
        if (r == 0) {
            if (HttpClock::now() >= deadline) return false;
            continue;
        }
        if (errno != EINTR) return false;
    }
}

bool HttpConnectionStream::peer_connected() const {
    pollfd p{conn_.fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
    if (::poll(&p, 1, 0) < 0) return errno == EINTR;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return false;
    if (p.revents & POLLIN) {  // data (a pipelined request) or an orderly close
        char byte;
        const ssize_t n = ::recv(conn_.fd, &byte, 1, MSG_PEEK);
        if (n == 0) return false;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    }
    return true;
}

bool HttpConnectionStream::is_readable() const {
    return conn_.num_buffered() > 0 || conn_.has_pending() || wait_for(POLLIN, body_deadline_);
}

bool HttpConnectionStream::is_writable() const { return !failed_ && peer_connected(); }

ssize_t HttpConnectionStream::read(char* ptr, size_t size) {
    if (failed_) return -1;
    if (conn_.num_buffered() == 0) {
        if (budget_ == 0) {  // a body past every limit (a chunked one has no length to refuse up front)
            over_budget_ = true;  // not failed: the client is there to read its 413
            return -1;
        }
        conn_.compact();
        while (conn_.num_buffered() == 0) {
            if (!conn_.has_pending() && !wait_for(POLLIN, body_deadline_)) {
                failed_ = true;
                return -1;
            }
            if (!conn_.receive_available(std::min(budget_, kReceiveChunk)) && conn_.num_buffered() == 0) {
                failed_ = true;  // closed before the request was whole
                return -1;
            }
        }
    }
    const size_t n = std::min({size, conn_.num_buffered(), budget_ > 0 ? budget_ : conn_.num_buffered()});
    std::memcpy(ptr, conn_.buffer.data() + conn_.read_pos, n);
    conn_.read_pos += n;
    budget_ -= std::min(budget_, n);
    return static_cast<ssize_t>(n);
}

ssize_t HttpConnectionStream::write(const char* ptr, size_t size) {
    if (failed_) return -1;
    size_t sent = 0;
    auto deadline = http_deadline(limits_.write_timeout_s);
    while (sent < size) {
        bool want_read = false;
        const ssize_t n = conn_.send_some(ptr + sent, size - sent, want_read);
        if (n > 0) {
            sent += static_cast<size_t>(n);
            // The timeout counts silence, not the whole body: a client reading a 67 MB response at 1 MB/s
            // was cut off after 30 s with a 200 and half its JSON.
            deadline = http_deadline(limits_.write_timeout_s);
            continue;
        }
        if (n == 0 && wait_for(want_read ? POLLIN : POLLOUT, deadline)) continue;
        failed_ = true;  // the client went away, or reads nothing
        return -1;
    }
    return static_cast<ssize_t>(sent);
}

void HttpConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
    ip = conn_.remote_ip;
    port = conn_.remote_port;
}

void HttpConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
    ip = conn_.local_ip;
    port = conn_.local_port;
}

}  // namespace kvscope::cli
