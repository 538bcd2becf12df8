// A small HTTP/1.1 server on POSIX sockets for kvscope-cli serve: one accept loop, one thread per
// connection (bounded: beyond max_connections a client is answered 503), one request per connection
// (every response carries Connection: close). Requests are read with limits on header and body size
// and a read timeout; only Content-Length bodies are accepted. The handler runs on the connection's
// thread and answers through its HttpConnection.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

namespace kvscope::cli {

struct HttpLimits {
    size_t max_header_bytes = 64 * 1024;
    size_t max_body_bytes = 8 * 1024 * 1024;
    int read_timeout_ms = 30000;   // for the whole request (headers and body)
    int write_timeout_ms = 30000;  // per send() that makes no progress
    int max_connections = 64;
};

struct HttpRequest {
    std::string method;
    std::string path;   // the target without its query string
    std::string query;  // after '?', undecoded
    std::map<std::string, std::string> headers;  // names lower-cased, values trimmed
    std::string body;

    std::string header(const std::string& lower_name) const;
};

// One accepted client socket, used by its connection thread only. Writes never raise SIGPIPE: a
// client that went away makes them return false, and failed() stays true from then on.
class HttpConnection {
public:
    explicit HttpConnection(int fd) : fd_(fd) {}
    HttpConnection(const HttpConnection&) = delete;
    HttpConnection& operator=(const HttpConnection&) = delete;

    // A whole response with Content-Length.
    bool send_response(int status, std::string_view content_type, std::string_view body);
    // The head of a Server-Sent Events stream; then one send_event() per event. The stream ends when
    // the connection closes.
    bool begin_event_stream();
    bool send_event(std::string_view data);  // "data: <data>\n\n"
    // Without blocking: true when the client closed its end (a half-close after the request counts
    // too: HTTP/1.1 clients keep their side open until they have the response) or the socket failed.
    bool peer_closed();
    bool failed() const { return failed_; }
    bool response_started() const { return started_; }

private:
    bool write_all(std::string_view bytes);

    int fd_;
    bool failed_ = false;
    bool started_ = false;
};

std::string_view http_reason(int status);
// {"error": {"message", "type", "param", "code"}}: OpenAI's error shape, used for every error body.
std::string http_error_body(int status, std::string_view message, std::string_view param = {});

using HttpHandler = std::function<void(const HttpRequest&, HttpConnection&)>;

class HttpServer {
public:
    // Binds host:port (port 0 = any free port) and listens. Throws BadInput naming host and port when
    // that fails.
    HttpServer(const std::string& host, int port, HttpLimits limits, HttpHandler handler);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    int port() const { return port_; }
    std::string url() const;

    // Accepts connections until request_stop(); then shuts every open connection down and waits for
    // the connection threads to finish.
    void run();
    // Async-signal-safe (a write to a pipe): a signal handler may call it.
    void request_stop();

private:
    void serve_connection(int fd);
    // 0 when a whole request was read; -1 when the client went away; otherwise the HTTP status to
    // answer with, and `error` says why.
    int read_request(int fd, HttpRequest& request, std::string& error);
    void reject_busy(int fd);

    std::string host_;
    int port_ = 0;
    HttpLimits limits_;
    HttpHandler handler_;
    int listen_fd_ = -1;
    int wake_pipe_[2] = {-1, -1};
    std::atomic<bool> stopping_{false};

    std::mutex mu_;
    std::condition_variable idle_;
    int num_active_ = 0;        // connection threads alive (guarded by mu_)
    std::set<int> open_fds_;    // their sockets, shut down on stop (guarded by mu_)
};

}  // namespace kvscope::cli
