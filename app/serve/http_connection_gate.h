// HttpConnectionGate: where kvscope-cli serve keeps client connections that have no whole request yet:
// new ones, and kept-alive ones between requests. One thread watches them all with epoll and hands a
// connection to `dispatch` once its buffered bytes hold a whole request: the head, and the body where it
// declares a Content-Length of up to 1 MiB (chunked and larger bodies are read by the worker). A
// connection that sends nothing for keep_alive_timeout_s, whose head takes longer than header_timeout_s
// or grows past max_header_bytes, or whose body takes longer than body_timeout_s, is answered (408 / 431)
// and closed. So idle and one-byte-a-second clients cost a socket and the bytes they sent, never a worker
// thread: they cannot starve /health or generation. Connections answered and closing with the client's
// bytes perhaps unread come back here to be drained a moment (HttpConnection::lingering).
#pragma once

#include "http_connection.h"
#include "serve_limits.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kvscope::cli {

class HttpConnectionGate {
public:
    using Dispatch = std::function<void(std::unique_ptr<HttpConnection>)>;

    HttpConnectionGate(const HttpLimits& limits, Dispatch dispatch);
    ~HttpConnectionGate();  // stop()
    HttpConnectionGate(const HttpConnectionGate&) = delete;
    HttpConnectionGate& operator=(const HttpConnectionGate&) = delete;

    // Any thread. A connection that already holds a whole head is dispatched at once by the gate thread.
    void add(std::unique_ptr<HttpConnection> conn);
    // Closes every held connection and joins the thread; later add() calls close their connection.
    void stop();

    // Connections held now (the gate's own count, for tests and /metrics).
    int num_held() const { return num_held_.load(); }

private:
    void run();
    void admit_incoming();
    void on_readable(int fd);
    void expire();
    void watch(std::unique_ptr<HttpConnection> conn);  // hold it, and wake on its bytes
    void release(int fd);                     // stop watching and close
    void reject(int fd, const char* status, const char* message);  // a canned error response, then a lingering close
    // Bodies up to this size are read by the gate before a worker gets the request (larger and chunked ones
    // by the worker, under --body-timeout): what one held connection may buffer.
    size_t gate_body_bytes() const { return std::min<size_t>(limits_.max_body_bytes, 1 << 20); }

    const HttpLimits& limits_;
    Dispatch dispatch_;
    int epoll_fd_ = -1;
    int wake_fd_ = -1;  // an eventfd: add() and stop() wake the thread
    std::thread thread_;

    std::mutex mu_;
    std::vector<std::unique_ptr<HttpConnection>> incoming_;  // guarded by mu_
    bool stopping_ = false;                                  // guarded by mu_

    std::unordered_map<int, std::unique_ptr<HttpConnection>> held_;  // gate thread only
    std::atomic<int> num_held_{0};
};

}  // namespace kvscope::cli
