// HttpStreamPool: streaming HTTP(S) POSTs on one libcurl multi handle driven by its own thread, so any
// number of responses stream at once with no thread per request, and finished connections are reused
// by later requests (the multi handle's connection cache). post() returns at once: the transfer starts
// on the pool's thread, which calls the handlers as bytes arrive and when the transfer ends. No
// retries. A transfer that receives nothing for request_timeout_s fails (a server that hangs
// mid-stream); connecting is bounded by connect_timeout_s.
// Thread: post() from any thread; handlers run on the pool's thread and must not call post().
#pragma once

#include "remote/http_client.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kvscope {

struct StreamHandlers {
    // Body bytes as they arrive, with the response's HTTP status; return false to end the transfer.
    std::function<bool(int status, std::string_view bytes)> on_data;
    // Called once: `error` is "" when the response ended normally, else why the transfer failed
    // (refused, timed out, ended by on_data, cancelled when the pool closed).
    std::function<void(int status, const std::string& error)> on_done;
};

class HttpStreamPool {
public:
    explicit HttpStreamPool(HttpEndpoint endpoint);
    // Ends what still runs (on_done with "cancelled") and joins the thread.
    ~HttpStreamPool();
    HttpStreamPool(const HttpStreamPool&) = delete;
    HttpStreamPool& operator=(const HttpStreamPool&) = delete;

    // POSTs `body` (JSON) to `path` and streams the response to `handlers`.
    void post(const std::string& path, std::string body, StreamHandlers handlers);
    // New connections the finished transfers opened (the rest reused one): shows connection reuse.
    long connections_opened() const { return connections_opened_.load(); }

    struct Transfer;  // one request in flight (http_stream_pool.cpp)

private:
    void run();

    HttpEndpoint endpoint_;
    void* multi_ = nullptr;  // CURLM*
    std::mutex mutex_;
    std::vector<std::unique_ptr<Transfer>> pending_;  // posted, not yet added to the multi handle
    bool stopping_ = false;
    std::atomic<long> connections_opened_{0};
    std::thread thread_;
};

}  // namespace kvscope
