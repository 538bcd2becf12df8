#include "http_frontend.h"

#include "openai_protocol.h"
#include "util/errors.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <arpa/inet.h>

namespace kvscope::cli {

namespace {

// What the worker thread is serving: the handlers' view of their connection.
thread_local HttpConnectionStream* t_stream = nullptr;
// Set when a route handler ran: the request was read whole, so the connection may carry another one.
thread_local bool t_handler_ran = false;

// Our on_accept() returns at once (the gate takes the socket), so httplib's accept loop needs no pool.
struct InlineTaskQueue final : httplib::TaskQueue {
    void enqueue(std::function<void()> fn) override { fn(); }
    void shutdown() override {}
};

void set_error(httplib::Response& res, int status, const std::string& message, const std::string& code = {}) {
    res.status = status;
    res.set_content(openai_error_body(status, message, {}, code), "application/json");
}

// A refusal before the body was read: the unread body rules out another request on the connection.
httplib::Server::HandlerResponse refuse(httplib::Response& res, int status, const std::string& message,
                                        const std::string& code = {}) {
    set_error(res, status, message, code);
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
}

std::string address_of(const sockaddr_storage& addr, int& port) {
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
        const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
        ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
        port = ntohs(a.sin_port);
    } else if (addr.ss_family == AF_INET6) {
        const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
        ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
        port = ntohs(a.sin6_port);
    }
    return text;
}

}  // namespace

// httplib's Server with its accept hook redirected to the gate, and its request parser reachable for
// the workers (process_request is protected; process_and_close_socket is its private virtual hook).
class HttpFrontend::Server final : public httplib::Server {
public:
    explicit Server(std::function<void(int)> on_accept) : on_accept_(std::move(on_accept)) {
        new_task_queue = [] { return new InlineTaskQueue; };
    }
    using httplib::Server::process_request;
    // httplib listens with a backlog of 5: a burst of clients connecting at once overflows it, and the
    // kernel then drops their handshakes, which stalls them for seconds. Listening again on the bound
    // socket raises the backlog (to the system's somaxconn).
    void widen_backlog() { ::listen(svr_sock_, SOMAXCONN); }

private:
    bool process_and_close_socket(socket_t sock) override {
        on_accept_(sock);
        return true;
    }
    std::function<void(int)> on_accept_;
};

HttpFrontend::HttpFrontend(HttpLimits limits)
    : limits_(limits),
      server_(std::make_unique<Server>([this](int fd) { on_accept(fd); })),
      gate_(limits_, [this](std::unique_ptr<HttpConnection> conn) { dispatch(std::move(conn)); }),
      control_pool_("control", 8),
      generation_pool_("generation", limits_.max_threads) {
    Server& s = *server_;
    s.set_payload_max_length(limits_.max_body_bytes);
    s.set_keep_alive_max_count(static_cast<size_t>(limits_.keep_alive_max_requests));
    s.set_keep_alive_timeout(static_cast<time_t>(limits_.keep_alive_timeout_s));
    // CORS as vLLM's server allows it by default (any origin, method and header, no credentials), so that
    // a web page can call the API: every response names the origin, and a preflight is answered here,
    // before the API key check (a browser sends no Authorization with it).
    s.set_default_headers({{"Access-Control-Allow-Origin", "*"}});
    // Before the body is read: refuse what would cost memory or time for nothing. A client that waits for
    // a 100 Continue before sending its body hears the refusal instead (httplib sends the 100 before
    // routing): told 413 up front, curl never uploads the gigabyte.
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) { return screen(req, res); });
    s.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
        return screen(req, res) == httplib::Server::HandlerResponse::Handled ? res.status : 100;
    });
    // Errors without a body of their own (no route, a malformed request) get OpenAI's error shape.
    s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        if (res.status == 404 && known_paths_.count(req.path)) {
            set_error(res, 405, "method " + req.method.substr(0, 16) + " is not allowed on " + req.path);
            res.set_header("Allow", control_paths_.count(req.path) ? "GET, HEAD" : "POST");  // RFC 9110: a 405 says which
        } else if (res.status == 404) {
            set_error(res, 404, "no route for " + req.method.substr(0, 16) + " " + req.path.substr(0, 200));
        } else if (t_stream && t_stream->over_budget()) {
            set_error(res, 413, "the request body is larger than this server takes (" + std::to_string(limits_.max_body_bytes) +
                                    " bytes, --max-request-bytes)");
            res.set_header("Connection", "close");  // the rest of the body is unread
        } else {
            set_error(res, res.status, "the request could not be read (HTTP " + std::to_string(res.status) + ")");
        }
    });
    // Last, after httplib added its own connection headers: a reply that closes the connection says so once
    // (httplib adds a second "Connection: close" beside ours where it closes too) and offers no Keep-Alive
    // (httplib offers it whenever it would keep the connection, not knowing that ours closes it).
    s.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
        if (res.get_header_value("Connection") != "close") return;
        res.headers.erase("Connection");
        res.headers.erase("Keep-Alive");
        res.set_header("Connection", "close");
    });
    s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        std::fprintf(stderr, "kvscope serve: a request failed: %s\n", what.c_str());
        set_error(res, 500, "internal error: " + what);
    });
}

HttpFrontend::~HttpFrontend() {
    request_stop();
    gate_.stop();
    shutdown();
    if (tls_) SSL_CTX_free(tls_);  // the sessions (each holds a reference) are gone with the connections
}

httplib::Server::HandlerResponse HttpFrontend::screen(const httplib::Request& req, httplib::Response& res) const {
    if (req.method == "OPTIONS") {
        res.status = 204;
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        const std::string& asked = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers", asked.empty() ? "*" : asked.substr(0, 1024));
        res.set_header("Access-Control-Max-Age", "600");
        return httplib::Server::HandlerResponse::Handled;
    }
    // Range is ignored, as vLLM's server ignores it: httplib would answer a POST with a slice of its
    // JSON, and 1024 ranges of /metrics with a 29 MB multipart reply that a client never reading it
    // holds a control worker with (eight such clients starved /health). req is the object httplib's
    // process_request owns and routes, non-const there.
    const_cast<httplib::Request&>(req).ranges.clear();
    // Framing as RFC 9112 section 6 asks of a server, refused before the body is read: a body is either
    // chunked or of one Content-Length, never both, and a method that carries a body says which (without
    // either, httplib read until the client closed, and answered nothing for --body-timeout seconds).
    // Behind a proxy that frames differently, any leniency here lets one request smuggle another.
    const size_t lengths = req.get_header_value_count("Content-Length");
    const size_t codings = req.get_header_value_count("Transfer-Encoding");
    if (codings > 0) {
        std::string coding = req.get_header_value("Transfer-Encoding");
        std::transform(coding.begin(), coding.end(), coding.begin(), [](unsigned char c) { return std::tolower(c); });
        if (codings > 1) return refuse(res, 400, "a request may carry one Transfer-Encoding header");
        if (coding != "chunked")
            return refuse(res, 501, "Transfer-Encoding '" + coding.substr(0, 32) + "' is not accepted (chunked only)");
        if (lengths > 0) return refuse(res, 400, "a request may not carry both Content-Length and Transfer-Encoding");
    } else if (lengths == 0 && (req.method == "POST" || req.method == "PUT" || req.method == "PATCH")) {
        return refuse(res, 411, "a " + req.method + " request needs Content-Length (or Transfer-Encoding: chunked)");
    }
    if (lengths > 1) return refuse(res, 400, "a request may carry one Content-Length header");
    if (lengths == 1) {
        const std::string& value = req.get_header_value("Content-Length");
        char* end = nullptr;
        errno = 0;
        const unsigned long long length = std::strtoull(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno == ERANGE ||
            !std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); }))
            return refuse(res, 400, "invalid Content-Length");
        if (length > limits_.max_body_bytes)
            return refuse(res, 413, "the request body has " + std::to_string(length) +
                                        " bytes; this server takes at most " + std::to_string(limits_.max_body_bytes) +
                                        " (--max-request-bytes)");
    }
    if (const std::string& enc = req.get_header_value("Content-Encoding"); !enc.empty() && enc != "identity") {
        // A compressed body can inflate past every limit; clients of OpenAI APIs do not send one.
        return refuse(res, 415, "Content-Encoding '" + enc.substr(0, 32) + "' is not accepted; send the body uncompressed");
    }
    if (authorizer_) {
        if (std::string refusal = authorizer_(req); !refusal.empty()) {
            res.set_header("WWW-Authenticate", "Bearer");
            return refuse(res, 401, refusal, "invalid_api_key");
        }
    }
    return httplib::Server::HandlerResponse::Unhandled;
}

HttpFrontend::Handler HttpFrontend::wrap(Handler handler) {
    return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
        t_handler_ran = true;
        handler(req, res);
    };
}

void HttpFrontend::control_get(const std::string& path, Handler handler) {
    control_paths_.insert(path);
    known_paths_.insert(path);
    server_->Get(path, wrap(std::move(handler)));
}

void HttpFrontend::post(const std::string& path, Handler handler) {
    known_paths_.insert(path);
    server_->Post(path, wrap(std::move(handler)));
}

void HttpFrontend::set_authorizer(Authorizer authorizer) { authorizer_ = std::move(authorizer); }

void HttpFrontend::bind(const std::string& host, int port) {
    host_ = host;
    if (port == 0) {
        port_ = server_->bind_to_any_port(host);
        if (port_ < 0) throw BadInput("cannot listen on " + host + " (any port)");
    } else {
        if (!server_->bind_to_port(host, port))
            throw BadInput("cannot listen on " + host + ":" + std::to_string(port) + " (in use, or not an address of this machine)");
        port_ = port;
    }
    server_->widen_backlog();
}

std::string HttpFrontend::url() const {
    const bool v6 = host_.find(':') != std::string::npos;
    return (tls_ ? "https://" : "http://") + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

void HttpFrontend::run() {
    server_->listen_after_bind();  // returns once stop() closed the listening socket
    gate_.stop();
}

void HttpFrontend::request_stop() {
    if (stopping_.exchange(true)) return;
    server_->stop();
}

void HttpFrontend::shutdown() {
    stopping_ = true;
    {
        std::lock_guard lock(active_mu_);
        for (int fd : active_fds_) ::shutdown(fd, SHUT_RD);  // a body read in progress fails now
    }
    control_pool_.shutdown();
    generation_pool_.shutdown();
}

bool HttpFrontend::client_connected() { return !t_stream || t_stream->peer_connected(); }

void HttpFrontend::enable_tls(const std::string& certfile, const std::string& keyfile) {
    std::string detail;  // OpenSSL's last error: the most specific
    const auto take_errors = [&detail] {
        while (const unsigned long e = ERR_get_error()) {
            char buf[256];
            ERR_error_string_n(e, buf, sizeof buf);
            detail = buf;
        }
    };
    const auto fail = [&](const std::string& what) {
        take_errors();
        throw BadInput(what + (detail.empty() ? "" : " (" + detail + ")"));
    };
    ERR_clear_error();
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) fail("TLS: cannot create a context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    // Partial writes: a response chunk leaves as the socket takes it, like a plain send().
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (SSL_CTX_use_certificate_chain_file(ctx, certfile.c_str()) != 1) {
        SSL_CTX_free(ctx);
        fail("--ssl-certfile " + certfile + ": not a readable PEM certificate");
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, keyfile.c_str(), SSL_FILETYPE_PEM) != 1) {
        SSL_CTX_free(ctx);
        take_errors();  // a key that loads but belongs to another certificate fails here too
        fail("--ssl-keyfile " + keyfile + (detail.find("mismatch") != std::string::npos
                                               ? ": does not match the certificate in " + certfile
                                               : ": not a readable PEM private key"));
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        SSL_CTX_free(ctx);
        fail("--ssl-keyfile " + keyfile + ": does not match the certificate in " + certfile);
    }
    if (tls_) SSL_CTX_free(tls_);
    tls_ = ctx;
}

void HttpFrontend::on_accept(int fd) {
    auto conn = std::make_unique<HttpConnection>(fd);
    if (HttpConnection::num_open() > limits_.max_connections) {
        static const std::string busy =
            canned_error_response("503 Service Unavailable", "the server holds --max-connections connections; try again later");
        (void)!::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        return;  // closes it
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // SSE tokens leave at once
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) conn->remote_ip = address_of(addr, conn->remote_port);
    len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) conn->local_ip = address_of(addr, conn->local_port);
    if (tls_) conn->start_tls(tls_);
    gate_.add(std::move(conn));
}

bool HttpFrontend::is_control(const HttpConnection& conn) const {
    // Only to pick a thread pool: the request target, the second word of the request line. httplib
    // parses the request itself.
    std::string_view head = std::string_view(conn.buffer).substr(conn.read_pos);
    head = head.substr(0, head.find("\r\n"));
    const size_t a = head.find(' ');
    if (a == std::string_view::npos || head.substr(0, a) != "GET") return false;
    std::string_view target = head.substr(a + 1);
    target = target.substr(0, std::min(target.find(' '), target.find('?')));
    return control_paths_.count(std::string(target)) > 0;
}

void HttpFrontend::dispatch(std::unique_ptr<HttpConnection> conn) {
    HttpWorkerPool& pool = is_control(*conn) ? control_pool_ : generation_pool_;
    // std::function needs a copyable callable: hand the connection over through a shared_ptr.
    auto holder = std::make_shared<std::unique_ptr<HttpConnection>>(std::move(conn));
    pool.submit([this, holder] { serve(std::move(*holder)); });
}

void HttpFrontend::serve(std::unique_ptr<HttpConnection> conn) {
    {
        std::lock_guard lock(active_mu_);
        active_fds_.insert(conn->fd);
    }
    HttpConnectionStream stream(*conn, limits_);
    t_stream = &stream;
    bool keep = true;
    while (keep) {
        ++conn->num_requests;
        const bool last = stopping_ || conn->num_requests >= limits_.keep_alive_max_requests;
        bool client_closes = false;
        t_handler_ran = false;
        stream.begin_request();
        if (const std::string problem = conn->head_problem(); !problem.empty()) {  // before httplib reads it
            const std::string response = canned_error_response("400 Bad Request", problem);
            (void)stream.write(response.data(), response.size());
            keep = false;
            break;
        }
        const bool written = server_->process_request(stream, last, client_closes, nullptr);
        // A request that no handler took (refused before its body, or malformed) may have left body
        // bytes unread: the connection cannot carry another request.
        keep = written && !stream.failed() && !client_closes && !last && t_handler_ran && !stopping_;
        if (keep && !conn->has_whole_head()) break;  // wait for the next request in the gate
    }
    t_stream = nullptr;
    {
        std::lock_guard lock(active_mu_);
        active_fds_.erase(conn->fd);
    }
    if (keep) {
        conn->compact();
        gate_.add(std::move(conn));
    } else if (!t_handler_ran && !stream.failed() && !stopping_ && !conn->ssl) {
        // Refused before its body was read (413, 401, a bad head): closed with the body's bytes unread, the
        // socket would send a reset, which can throw the answer away before the client reads it. The gate
        // drains it a while after our end is shut (TLS connections close at once, after close_notify).
        conn->lingering = true;
        gate_.add(std::move(conn));
    }
    // else: the connection closes here
}

}  // namespace kvscope::cli
