// HttpFrontend: the HTTP side of kvscope-cli serve, on cpp-httplib. httplib accepts connections,
// parses requests, routes them and writes responses (chunked for SSE); kvscope decides which thread
// does that work and when:
// - HttpConnectionGate holds connections until a whole request head has arrived (no thread per idle
//   or slow client), with a header deadline and size limit;
// - two HttpWorkerPools run requests: a small one for the control routes (health, metrics, model
//   list), so that they answer even when generation requests fill every generation worker, and a
//   large one for everything else;
// - before a body is read, the pre-routing check refuses what is too large, encoded, or unauthorized;
// - between requests a kept-alive connection goes back to the gate.
// Thread-safe: handlers run on pool threads; request_stop() may be called from any thread.
#pragma once

#include "http_connection.h"
#include "http_connection_gate.h"
#include "http_worker_pool.h"
#include "serve_limits.h"

#include <atomic>
#include <functional>
#include <httplib.h>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace kvscope::cli {

class HttpFrontend {
public:
    using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
    // Returns an error message when the request may not proceed (answered 401), "" when it may.
    using Authorizer = std::function<std::string(const httplib::Request&)>;

    explicit HttpFrontend(HttpLimits limits);
    ~HttpFrontend();
    HttpFrontend(const HttpFrontend&) = delete;
    HttpFrontend& operator=(const HttpFrontend&) = delete;

    // Routes, by exact path. Control routes run on the control pool and take no body; any other
    // method on a known path is answered 405.
    void control_get(const std::string& path, Handler handler);
    void post(const std::string& path, Handler handler);
    // Checked before a request body is read (every route).
    void set_authorizer(Authorizer authorizer);

    // Serves HTTPS from now on (vLLM's --ssl-certfile / --ssl-keyfile: PEM files, the certificate file
    // may hold its chain). Throws BadInput naming the file that cannot be used.
    void enable_tls(const std::string& certfile, const std::string& keyfile);
    // Binds host:port (0 = any free port); throws BadInput naming them when that fails.
    void bind(const std::string& host, int port);
    int port() const { return port_; }
    std::string url() const;

    // Serves until request_stop(); then stops accepting and closes idle connections. Requests in
    // flight keep their threads until shutdown().
    void run();
    void request_stop();
    // Ends the connections in flight (their reads fail, so handlers finish) and joins every worker.
    void shutdown();

    // On a handler's thread: false once the client of the request being handled has gone away.
    static bool client_connected();

private:
    class Server;

    void on_accept(int fd);
    void dispatch(std::unique_ptr<HttpConnection> conn);
    void serve(std::unique_ptr<HttpConnection> conn);
    bool is_control(const HttpConnection& conn) const;
    Handler wrap(Handler handler);
    // What is refused before a body is read (framing, size, encoding, the API key), and CORS preflights:
    // Handled with res filled in, or Unhandled.
    httplib::Server::HandlerResponse screen(const httplib::Request& req, httplib::Response& res) const;

    HttpLimits limits_;
    std::unique_ptr<Server> server_;
    HttpConnectionGate gate_;
    HttpWorkerPool control_pool_;
    HttpWorkerPool generation_pool_;
    Authorizer authorizer_;
    std::set<std::string> control_paths_;
    std::set<std::string> known_paths_;
    std::string host_;
    int port_ = 0;
    SSL_CTX* tls_ = nullptr;  // owned; null for plain HTTP
    std::atomic<bool> stopping_{false};

    std::mutex active_mu_;
    std::set<int> active_fds_;  // sockets of requests on worker threads (guarded by active_mu_)
};

}  // namespace kvscope::cli
