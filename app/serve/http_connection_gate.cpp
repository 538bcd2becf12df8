#include "http_connection_gate.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kvscope::cli {

namespace {

// How often held connections are checked against their deadlines.
constexpr int kSweepMs = 200;
// How long an answered connection that closes is drained (see HttpConnection::lingering): the client's
// bytes in flight arrive in a round trip or two, and a client that goes on sending is not waited for.
constexpr double kLingerSeconds = 2.0;

}  // namespace

HttpConnectionGate::HttpConnectionGate(const HttpLimits& limits, Dispatch dispatch)
    : limits_(limits), dispatch_(std::move(dispatch)) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) throw std::runtime_error(std::string("epoll/eventfd: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread(&HttpConnectionGate::run, this);
}

HttpConnectionGate::~HttpConnectionGate() {
    stop();
    ::close(epoll_fd_);
    ::close(wake_fd_);
}

void HttpConnectionGate::add(std::unique_ptr<HttpConnection> conn) {
    {
        std::lock_guard lock(mu_);
        if (stopping_) return;  // the connection closes here
        incoming_.push_back(std::move(conn));
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
}

void HttpConnectionGate::stop() {
    {
        std::lock_guard lock(mu_);
        if (stopping_) return;
        stopping_ = true;
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    if (thread_.joinable()) thread_.join();
}

void HttpConnectionGate::run() {
    std::vector<epoll_event> events(256);
    auto next_sweep = HttpClock::now();
    while (true) {
        const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), kSweepMs);
        {
            std::lock_guard lock(mu_);
            if (stopping_) break;
        }
        for (int i = 0; i < n; ++i) {
            if (events[i].data.fd == wake_fd_) {
                uint64_t count;
                (void)!::read(wake_fd_, &count, sizeof count);
                admit_incoming();
            } else {
                on_readable(events[i].data.fd);
            }
        }
        if (HttpClock::now() >= next_sweep) {
            expire();
            next_sweep = HttpClock::now() + std::chrono::milliseconds(kSweepMs);
        }
    }
    incoming_.clear();  // stopping_ is set: nobody adds any more
    while (!held_.empty()) release(held_.begin()->first);
}

void HttpConnectionGate::admit_incoming() {
    std::vector<std::unique_ptr<HttpConnection>> batch;
    {
        std::lock_guard lock(mu_);
        batch.swap(incoming_);
    }
    for (auto& conn : batch) {
        if (conn->lingering) {
            ::shutdown(conn->fd, SHUT_WR);  // the answer is out: the client sees its end, and closes
            conn->deadline = http_deadline(kLingerSeconds);
            watch(std::move(conn));
            continue;
        }
        // TLS may hold a pipelined request's bytes already decrypted, which epoll cannot see.
        if (conn->has_pending()) conn->receive_available(limits_.max_header_bytes + 1);
        if (const size_t need = conn->request_bytes(gate_body_bytes()); need && conn->num_buffered() >= need) {
            dispatch_(std::move(conn));  // a pipelined request: no need to wait
            continue;
        }
        conn->head_started = conn->num_buffered() > 0;
        conn->body_started = conn->has_whole_head();
        conn->deadline = http_deadline(conn->body_started   ? limits_.body_timeout_s
                                       : conn->head_started ? limits_.header_timeout_s
                                                            : limits_.keep_alive_timeout_s);
        watch(std::move(conn));
    }
}

void HttpConnectionGate::watch(std::unique_ptr<HttpConnection> conn) {
    const int fd = conn->fd;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        std::fprintf(stderr, "kvscope serve: cannot watch a connection: %s\n", std::strerror(errno));
        return;  // closes it
    }
    held_.emplace(fd, std::move(conn));
    num_held_ = static_cast<int>(held_.size());
}

void HttpConnectionGate::on_readable(int fd) {
    auto it = held_.find(fd);
    if (it == held_.end()) return;
    HttpConnection& conn = *it->second;
    if (conn.lingering) {  // what the client still sends is dropped; its close (or an error) ends it
        char scrap[16 * 1024];
        ssize_t n;
        while ((n = ::recv(fd, scrap, sizeof scrap, 0)) > 0) {
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) release(fd);
        return;
    }
    // One byte past the limit tells "too large" from "exactly full". With a whole head, what the request
    // declares: its body is read here too, so a client that sends a head and then trickles (or never
    // sends) its body holds a socket, never a generation worker (520 such clients stalled every
    // completion for --body-timeout seconds).
    size_t need = conn.request_bytes(gate_body_bytes());
    bool open = conn.receive_available(need ? need : limits_.max_header_bytes + 1);
    if (!need && (need = conn.request_bytes(gate_body_bytes())) && open && conn.num_buffered() < need)
        open = conn.receive_available(need);  // the head completed in this read: its body may be there too
    if (need && conn.num_buffered() >= need) {
        std::unique_ptr<HttpConnection> ready = std::move(it->second);
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
        held_.erase(it);
        num_held_ = static_cast<int>(held_.size());
        dispatch_(std::move(ready));
        return;
    }
    if (!open) {  // gone before a whole request: nothing to answer
        if (!conn.tls_error.empty()) std::fprintf(stderr, "kvscope serve: %s: %s\n", conn.remote_ip.c_str(), conn.tls_error.c_str());
        release(fd);
        return;
    }
    if (need) {
        if (!conn.body_started) {  // the body's clock starts with the whole head
            conn.body_started = true;
            conn.deadline = http_deadline(limits_.body_timeout_s);
        }
        return;
    }
    if (conn.num_buffered() > limits_.max_header_bytes) {
        reject(fd, "431 Request Header Fields Too Large", "the request line and headers are larger than --max-header-bytes");
        return;
    }
    if (!conn.head_started && conn.num_buffered() > 0) {
        // The clock for a whole head starts with its first byte, whatever the idle time before it.
        conn.head_started = true;
        conn.deadline = http_deadline(limits_.header_timeout_s);
    }
}

void HttpConnectionGate::expire() {
    const auto now = HttpClock::now();
    std::vector<int> late;
    for (const auto& [fd, conn] : held_)
        if (conn->deadline <= now) late.push_back(fd);
    for (int fd : late) {
        if (held_.at(fd)->lingering) release(fd);
        else if (held_.at(fd)->head_started || held_.at(fd)->body_started) reject(fd, "408 Request Timeout",
                   held_.at(fd)->body_started ? "the request body did not arrive within --body-timeout"
                                              : "the request head did not arrive within --header-timeout");
        else release(fd);  // an idle keep-alive connection: close it quietly
    }
}

void HttpConnectionGate::release(int fd) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    held_.erase(fd);  // closes the socket
    num_held_ = static_cast<int>(held_.size());
}

void HttpConnectionGate::reject(int fd, const char* status, const char* message) {
    // A fixed answer, best effort and without waiting: this client is not worth a thread.
    const std::string response = canned_error_response(status, message);
    bool want_read = false;
    auto it = held_.find(fd);
    if (it == held_.end()) return;
    (void)it->second->send_some(response.data(), response.size(), want_read);
    if (it->second->ssl) return release(fd);
    ::shutdown(fd, SHUT_WR);  // then drained a while, as a worker's refusals are (HttpConnection::lingering)
    it->second->lingering = true;
    it->second->deadline = http_deadline(kLingerSeconds);
}

}  // namespace kvscope::cli
