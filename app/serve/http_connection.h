// HttpConnection: one accepted client socket of kvscope-cli serve, and HttpConnectionStream, the
// httplib::Stream through which cpp-httplib reads its requests and writes its responses. The socket is
// non-blocking: HttpConnectionGate reads a request's head into `buffer` without a thread; then a worker
// runs httplib over the stream, which serves the buffered bytes first and waits for the rest with
// deadlines, so that a slow or silent client costs a bounded time and never a thread for long.
// With TLS (serve --ssl-certfile) the connection owns an OpenSSL session on the same non-blocking
// socket: the handshake and every read and write go through it, and `buffer` holds plaintext.
#pragma once

#include "serve_limits.h"

#include <chrono>
#include <cstddef>
#include <httplib.h>
#include <string>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace kvscope::cli {

using HttpClock = std::chrono::steady_clock;

inline HttpClock::time_point http_deadline(double seconds_from_now) {
    return HttpClock::now() +
           std::chrono::duration_cast<HttpClock::duration>(std::chrono::duration<double>(seconds_from_now));
}

// A whole response with an error in OpenAI's shape that closes the connection: for answers written on the
// socket directly, without httplib ("431 Request Header Fields Too Large").
std::string canned_error_response(const char* status_line, std::string_view message);

struct HttpConnection {
    explicit HttpConnection(int fd);
    ~HttpConnection();  // ends the TLS session (without waiting) and closes the socket
    HttpConnection(const HttpConnection&) = delete;
    HttpConnection& operator=(const HttpConnection&) = delete;

    // Bytes received and not consumed yet: buffer[read_pos, size()).
    size_t num_buffered() const { return buffer.size() - read_pos; }
    // Drops the consumed bytes (between requests).
    void compact();
    // True when the buffered bytes hold a whole request head (up to the blank line).
    bool has_whole_head() const;
    // With a whole head: the bytes of the whole request when it declares one Content-Length of at most
    // max_body (head + body), else the head's alone (a chunked or larger body, or one the client sends only
    // after a 100 Continue, is read by the worker).
    // 0 without a whole head.
    size_t request_bytes(size_t max_body) const;
    // With a whole head: what makes it malformed under RFC 9112, as a message naming it, or "" (a field
    // line without a colon, a field name that is not a token or has white space before its colon, control
    // characters in a value, a folded line, an HTTP/1.1 request without exactly one Host). httplib skips
    // or keeps such lines; behind a proxy that reads them otherwise, a request could hide another.
    std::string head_problem() const;
    // Receives what the socket has without blocking (at most `limit` buffered bytes); with TLS it
    // first advances the handshake. Returns false when the peer closed or the socket or TLS failed.
    bool receive_available(size_t limit);
    // Starts a server-side TLS session on the socket (the handshake advances as bytes arrive).
    void start_tls(SSL_CTX* ctx);
    // Decrypted bytes OpenSSL holds that `buffer` has not taken yet (the socket may look idle).
    bool has_pending() const;
    // Sends without blocking: bytes sent, 0 when the socket (or TLS) must wait (`want_read` says for
    // what), -1 when the connection failed.
    ssize_t send_some(const char* data, size_t size, bool& want_read);
    // Connections alive in this process (accepted and not yet closed).
    static int num_open();

    int fd = -1;
    std::string buffer;
    size_t read_pos = 0;
    std::string remote_ip;
    int remote_port = 0;
    std::string local_ip;
    int local_port = 0;
    int num_requests = 0;               // served on this connection so far
    HttpClock::time_point deadline{};   // while held by the gate: when to give up on it
    bool head_started = false;          // the gate saw a byte of the next request
    bool body_started = false;          // the gate has the head and waits for the body
    // Answered and closing with the client's bytes perhaps unread (a refused body): our end is shut and the
    // gate drops what still arrives until the client closes, so that the socket ends with a FIN, not a
    // reset that could discard the answer at the client (a lingering close, as Apache and nginx do).
    bool lingering = false;
    SSL* ssl = nullptr;                 // the TLS session, or null for plain HTTP
    std::string tls_error;              // why the TLS session failed (logged once)
};

class HttpConnectionStream final : public httplib::Stream {
public:
    HttpConnectionStream(HttpConnection& conn, const HttpLimits& limits);

    // Starts a request: its byte budget (head + body) and the deadline for the body's bytes.
    void begin_request();
    // A read or write failed (deadline, budget, peer gone): the connection must be closed.
    bool failed() const { return failed_; }
    // The request's body ran past its budget (a chunked one, which declares no length to refuse up front):
    // the read failed, and the client can still be answered 413.
    bool over_budget() const { return over_budget_; }
    // Without blocking: false once the client closed its end (a half-close counts) or the socket failed.
    bool peer_connected() const;

    bool is_readable() const override;
    bool is_writable() const override;
    ssize_t read(char* ptr, size_t size) override;
    ssize_t write(const char* ptr, size_t size) override;
    void get_remote_ip_and_port(std::string& ip, int& port) const override;
    void get_local_ip_and_port(std::string& ip, int& port) const override;
    socket_t socket() const override { return conn_.fd; }

private:
    // Waits for `events` until the deadline; false on timeout or error.
    bool wait_for(short events, HttpClock::time_point deadline) const;

    HttpConnection& conn_;
    const HttpLimits& limits_;
    size_t budget_ = 0;                  // bytes this request may still read
    HttpClock::time_point body_deadline_{};
    bool failed_ = false;
    bool over_budget_ = false;
};

}  // namespace kvscope::cli
