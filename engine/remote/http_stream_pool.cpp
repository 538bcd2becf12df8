#include "remote/http_stream_pool.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <map>

namespace kvscope {

struct HttpStreamPool::Transfer {
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    std::string url, body, auth;
    StreamHandlers handlers;
    bool stopped_by_reader = false;
    char error_buffer[CURL_ERROR_SIZE] = {};
    std::chrono::steady_clock::time_point last_data;  // when the last body bytes came (or the transfer started)

    ~Transfer() {
        curl_slist_free_all(headers);
        curl_easy_cleanup(easy);
    }
    int status() const {
        long s = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &s);
        return static_cast<int>(s);
    }
};

namespace {

size_t on_bytes(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<HttpStreamPool::Transfer*>(user);
    t->last_data = std::chrono::steady_clock::now();
    if (!t->handlers.on_data(t->status(), std::string_view(data, size * n))) {
        t->stopped_by_reader = true;
        return 0;  // libcurl ends the transfer with CURLE_WRITE_ERROR
    }
    return size * n;
}

}  // namespace

HttpStreamPool::HttpStreamPool(HttpEndpoint endpoint) : endpoint_(std::move(endpoint)) {
    init_curl_once();
    multi_ = curl_multi_init();
    // No cap per host: --max-concurrency is the driver's, and a queue in here would hide it.
    curl_multi_setopt(static_cast<CURLM*>(multi_), CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    thread_ = std::thread([this] { run(); });
}

HttpStreamPool::~HttpStreamPool() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    curl_multi_wakeup(static_cast<CURLM*>(multi_));
    thread_.join();
    curl_multi_cleanup(static_cast<CURLM*>(multi_));
}

void HttpStreamPool::post(const std::string& path, std::string body, StreamHandlers handlers) {
    auto t = std::make_unique<Transfer>();
    t->url = endpoint_.url(path);
    t->body = std::move(body);
    t->handlers = std::move(handlers);
    t->easy = curl_easy_init();
    CURL* e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, t->url.c_str());
    set_transfer_options(e, endpoint_, t->error_buffer);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body.c_str());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(t->body.size()));
    t->headers = curl_slist_append(t->headers, "Content-Type: application/json");
    t->headers = curl_slist_append(t->headers, "Accept: text/event-stream");
    if (!endpoint_.api_key.empty()) {
        t->auth = "Authorization: Bearer " + endpoint_.api_key;
        t->headers = curl_slist_append(t->headers, t->auth.c_str());
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_bytes);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    {
        std::lock_guard lock(mutex_);
        pending_.push_back(std::move(t));
    }
    curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

void HttpStreamPool::run() {
    CURLM* multi = static_cast<CURLM*>(multi_);
    std::map<CURL*, std::unique_ptr<Transfer>> active;
    // A stream that stalls, before or after its first byte, is ended here: curl's low-speed check
    // averages over about 5 s and counts whole seconds, so --request-timeout 1 fired after 6 s.
    using Clock = std::chrono::steady_clock;
    const auto timeout = std::chrono::duration<double>(endpoint_.request_timeout_s);
    const std::string timed_out = "timed out: no data for " + request_timeout_text(endpoint_.request_timeout_s);
    // How often the stalls are looked for: a tenth of the timeout, 10 ms to 1 s.
    const int check_ms = static_cast<int>(std::clamp(endpoint_.request_timeout_s * 100, 10.0, 1000.0));
    auto finish = [&](CURL* easy, const std::string& error) {
        auto it = active.find(easy);
        if (it == active.end()) return;
        std::unique_ptr<Transfer> t = std::move(it->second);
        active.erase(it);
        curl_multi_remove_handle(multi, easy);
        long opened = 0;
        curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &opened);
        connections_opened_ += opened;
        t->handlers.on_done(t->status(), error);
    };
    for (;;) {
        std::vector<std::unique_ptr<Transfer>> added;
        bool stopping = false;
        {
            std::lock_guard lock(mutex_);
            added.swap(pending_);
            stopping = stopping_;
        }
        for (auto& t : added) {
            CURL* e = t->easy;
            t->last_data = Clock::now();
            active[e] = std::move(t);
            curl_multi_add_handle(multi, e);
        }
        if (stopping) {
            while (!active.empty()) finish(active.begin()->first, "cancelled: the benchmark target was closed");
            return;
        }
        int running = 0;
        curl_multi_perform(multi, &running);
        int left = 0;
        while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
            if (msg->msg != CURLMSG_DONE) continue;
            CURL* e = msg->easy_handle;
            const CURLcode rc = msg->data.result;
            std::string error;
            auto it = active.find(e);
            if (rc == CURLE_OK || it == active.end()) {
            } else if (it->second->stopped_by_reader) {
                error = "ended by the reader";
            } else {
                error = redacted_url(it->second->url) + ": " + curl_error_text(rc, it->second->error_buffer);
            }
            finish(e, error);
        }
        const auto now = Clock::now();
        std::vector<CURL*> stalled;
        for (const auto& [e, t] : active)
            if (now - t->last_data > timeout) stalled.push_back(e);
        for (CURL* e : stalled) finish(e, timed_out);
        curl_multi_poll(multi, nullptr, 0, check_ms, nullptr);
    }
}

}  // namespace kvscope
