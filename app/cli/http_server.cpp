#include "http_server.h"

#include "util/errors.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace kvscope::cli {

namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

std::string trim(std::string_view s) {
    const auto b = s.find_first_not_of(" \t");
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(" \t");
    return std::string(s.substr(b, e - b + 1));
}

void set_timeout(int fd, int option, int ms) {
    timeval tv{};
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

// Reads and discards what the client still sends, for at most `ms`, so that closing a socket with
// unread input does not reset the connection before the client has read our answer.
void drain(int fd, int ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    char buf[16384];
    while (Clock::now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        const int left = static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
        if (::poll(&p, 1, std::max(left, 1)) <= 0) return;
        if (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) return;
    }
}

}  // namespace

std::string HttpRequest::header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
}

std::string_view http_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

std::string http_error_body(int status, std::string_view message, std::string_view param) {
    nlohmann::json e;
    e["message"] = message;
    e["type"] = status >= 500 ? "server_error" : "invalid_request_error";
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    e["code"] = status;
    return nlohmann::json{{"error", e}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// --- HttpConnection --------------------------------------------------------------------------------

bool HttpConnection::write_all(std::string_view bytes) {
    if (failed_) return false;
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {  // gone, reset, or SO_SNDTIMEO passed without progress
            failed_ = true;
            return false;
        }
        bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

bool HttpConnection::send_response(int status, std::string_view content_type, std::string_view body) {
    started_ = true;
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(http_reason(status)) + "\r\n";
    out += "Content-Type: " + std::string(content_type) + "\r\n";
    out += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    out += body;
    return write_all(out);
}

bool HttpConnection::begin_event_stream() {
    started_ = true;
    return write_all("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                     "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n");
}

bool HttpConnection::send_event(std::string_view data) {
    std::string out;
    out.reserve(data.size() + 8);
    out += "data: ";
    out += data;
    out += "\n\n";
    return write_all(out);
}

bool HttpConnection::peer_closed() {
    if (failed_) return true;
    pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// --- HttpServer ------------------------------------------------------------------------------------

HttpServer::HttpServer(const std::string& host, int port, HttpLimits limits, HttpHandler handler)
    : host_(host), limits_(limits), handler_(std::move(handler)) {
    const std::string where = "--host " + host + " --port " + std::to_string(port);
    if (port < 0 || port > 65535) throw BadInput(where + ": the port must be in [0, 65535]");
    if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
        throw std::system_error(errno, std::generic_category(), "pipe");

    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0)
        throw BadInput(where + ": cannot resolve the host: " + ::gai_strerror(rc));
    std::string last_error = "no address";
    for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last_error = std::strerror(errno);
            continue;
        }
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
            listen_fd_ = fd;
        } else {
            last_error = std::strerror(errno);
            ::close(fd);
        }
    }
    ::freeaddrinfo(found);
    if (listen_fd_ < 0) {
        ::close(wake_pipe_[0]);
        ::close(wake_pipe_[1]);
        throw BadInput(where + ": cannot listen: " + last_error);
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

HttpServer::~HttpServer() {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    ::close(wake_pipe_[0]);
    ::close(wake_pipe_[1]);
}

std::string HttpServer::url() const {
    const std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
    return "http://" + host + ":" + std::to_string(port_);
}

void HttpServer::request_stop() {
    const char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_pipe_[1], &byte, 1);
}

void HttpServer::run() {
    while (true) {
        pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
        const int r = ::poll(fds, 2, -1);
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (fds[1].revents) break;
        if (!(fds[0].revents & POLLIN)) continue;
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            // Out of descriptors: back off instead of spinning on a listen socket that stays readable.
            if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            continue;
        }
        set_timeout(fd, SO_SNDTIMEO, limits_.write_timeout_ms);
        bool busy = false;
        {
            std::lock_guard lock(mu_);
            if (num_active_ >= limits_.max_connections) {
                busy = true;
            } else {
                ++num_active_;
                open_fds_.insert(fd);
            }
        }
        if (busy) {
            reject_busy(fd);
            continue;
        }
        try {
            std::thread(&HttpServer::serve_connection, this, fd).detach();
        } catch (const std::system_error&) {
            {
                std::lock_guard lock(mu_);
                --num_active_;
                open_fds_.erase(fd);
            }
            reject_busy(fd);
        }
    }
    // Stop: no new connections; wake every connection thread (their reads and writes fail, their
    // handlers see the client gone and abort their requests) and wait until all have returned.
    stopping_ = true;
    std::unique_lock lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    idle_.wait(lock, [&] { return num_active_ == 0; });
}

void HttpServer::reject_busy(int fd) {
    char buf[16384];
    while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
    set_timeout(fd, SO_SNDTIMEO, 1000);
    HttpConnection conn(fd);
    conn.send_response(503, "application/json",
                       http_error_body(503, "the server is at its limit of " + std::to_string(limits_.max_connections) +
                                                " connections; retry later"));
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
}

void HttpServer::serve_connection(int fd) {
    HttpRequest request;
    std::string error;
    const int status = read_request(fd, request, error);
    {
        HttpConnection conn(fd);
        if (status == 0) {
            try {
                handler_(request, conn);
            } catch (const std::exception& e) {
                if (!conn.response_started())
                    conn.send_response(500, "application/json", http_error_body(500, e.what()));
            }
        } else if (status > 0) {
            conn.send_response(status, "application/json", http_error_body(status, error));
        }
    }
    if (status != 0) {  // input may be left unread: close gracefully
        ::shutdown(fd, SHUT_WR);
        drain(fd, 500);
    }
    std::unique_lock lock(mu_);
    open_fds_.erase(fd);  // before close(), so that stop never shuts down a reused descriptor
    ::close(fd);
    --num_active_;
    std::notify_all_at_thread_exit(idle_, std::move(lock));
}

int HttpServer::read_request(int fd, HttpRequest& request, std::string& error) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(limits_.read_timeout_ms);
    std::string buf;
    // 1: read some bytes; 0: the client closed; -1: timed out; -2: failed or stopping.
    auto fill = [&]() -> int {
        char tmp[16384];
        while (true) {
            if (stopping_) return -2;
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (left <= 0) return -1;
            pollfd p{fd, POLLIN, 0};
            const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 250)));
            if (r < 0 && errno != EINTR) return -2;
            if (r <= 0) continue;
            const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
            if (n > 0) {
                buf.append(tmp, static_cast<size_t>(n));
                return 1;
            }
            if (n == 0) return 0;
            if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return -2;
        }
    };
    auto fail_read = [&](int r) {
        if (r != -1) return -1;
        error = "timed out reading the request";
        return 408;
    };

    size_t header_end;
    while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (buf.size() > limits_.max_header_bytes) {
            error = "request headers exceed " + std::to_string(limits_.max_header_bytes) + " bytes";
            return 431;
        }
        if (const int r = fill(); r != 1) return fail_read(r);
    }
    if (header_end + 4 > limits_.max_header_bytes) {
        error = "request headers exceed " + std::to_string(limits_.max_header_bytes) + " bytes";
        return 431;
    }

    // Request line: METHOD SP target SP HTTP/1.x
    const std::string_view head(buf.data(), header_end);
    size_t line_end = head.find("\r\n");
    const std::string_view line = head.substr(0, line_end);
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1 || sp1 == 0) {
        error = "malformed request line";
        return 400;
    }
    request.method = std::string(line.substr(0, sp1));
    std::string target(line.substr(sp1 + 1, sp2 - sp1 - 1));
    const std::string_view version = line.substr(sp2 + 1);
    if (!version.starts_with("HTTP/1.")) {
        error = "unsupported protocol version '" + std::string(version) + "'";
        return version.starts_with("HTTP/") ? 505 : 400;
    }
    if (const size_t scheme = target.find("://"); scheme != std::string::npos && target[0] != '/') {
        const size_t slash = target.find('/', scheme + 3);  // absolute-form: keep the path only
        target = slash == std::string::npos ? "/" : target.substr(slash);
    }
    const size_t q = target.find('?');
    request.path = target.substr(0, q);
    if (q != std::string::npos) request.query = target.substr(q + 1);

    // Header fields.
    while (line_end != std::string_view::npos) {
        const size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        const std::string_view field = head.substr(start, line_end == std::string_view::npos ? head.npos : line_end - start);
        if (field.empty()) continue;
        const size_t colon = field.find(':');
        if (colon == std::string_view::npos || colon == 0) {
            error = "malformed header line '" + std::string(field.substr(0, 64)) + "'";
            return 400;
        }
        const std::string name = lower(std::string(field.substr(0, colon)));
        const std::string value = trim(field.substr(colon + 1));
        auto [it, inserted] = request.headers.emplace(name, value);
        if (!inserted) {
            if (name == "content-length" && it->second != value) {
                error = "conflicting Content-Length headers";
                return 400;
            }
            if (name != "content-length") it->second += ", " + value;
        }
    }

    if (!request.header("transfer-encoding").empty()) {
        error = "Transfer-Encoding is not supported: send the body with a Content-Length";
        return 411;
    }
    size_t length = 0;
    if (const std::string cl = request.header("content-length"); !cl.empty()) {
        if (cl.size() > 18 || !std::all_of(cl.begin(), cl.end(), [](unsigned char c) { return std::isdigit(c); })) {
            error = "invalid Content-Length '" + cl.substr(0, 32) + "'";
            return 400;
        }
        length = std::stoull(cl);
    }
    if (length > limits_.max_body_bytes) {
        error = "request body of " + std::to_string(length) + " bytes exceeds the limit of " +
                std::to_string(limits_.max_body_bytes) + " bytes";
        return 413;
    }
    buf.erase(0, header_end + 4);
    if (length > buf.size() && lower(request.header("expect")) == "100-continue") {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        if (::send(fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(kContinue.size()))
            return -1;
    }
    while (buf.size() < length)
        if (const int r = fill(); r != 1) return fail_read(r);
    buf.resize(length);  // anything after the body (a pipelined request) is not served
    request.body = std::move(buf);
    return 0;
}

}  // namespace kvscope::cli
