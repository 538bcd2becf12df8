#include "remote/http_client.h"

#include "util/errors.h"

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <mutex>

namespace kvscope {

std::string HttpEndpoint::url(const std::string& path) const {
    std::string base = base_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    return base + path;
}

std::string HttpResponse::describe() const {
    if (!error.empty()) return error;
    return http_status_text(status, body);
}

std::string http_status_text(int status, const std::string& body) {
    std::string why = body;
    // The servers' error bodies: OpenAI's {"error": {"message"}} (vLLM, llama-server, kvscope), {"error":
    // "..."} (TGI), {"detail": "..."} (FastAPI), {"message": "..."}: the message, not the JSON around it.
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object()) {
        const auto error = j.find("error");
        if (error != j.end() && error->is_object() && error->contains("message") && (*error)["message"].is_string())
            why = (*error)["message"];
        else if (error != j.end() && error->is_string())
            why = *error;
        else
            for (const char* key : {"detail", "message"})
                if (j.contains(key) && j[key].is_string()) {
                    why = j[key];
                    break;
                }
    }
    return "HTTP " + std::to_string(status) + (why.empty() ? "" : ": " + body_excerpt(why));
}

static_assert(kCurlErrorBytes == CURL_ERROR_SIZE);

void set_transfer_options(void* curl, const HttpEndpoint& endpoint, char* error_buffer) {
    CURL* c = static_cast<CURL*>(curl);
    if (!endpoint.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, endpoint.ca_file.c_str());
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, endpoint.insecure ? 0L : 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, endpoint.insecure ? 0L : 2L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(endpoint.connect_timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_POSTREDIR, static_cast<long>(CURL_REDIR_POST_ALL));
    // An https endpoint is never redirected to plain http, where prompts and answers would travel in clear.
    const bool tls = endpoint.base_url.rfind("https:", 0) == 0;
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85: the string form (the bitmask one is deprecated there)
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, tls ? "https" : "http,https");
#else
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, tls ? CURLPROTO_HTTPS : CURLPROTO_HTTP | CURLPROTO_HTTPS);
#endif
    // The Authorization header goes to the first scheme, host and port only (libcurl's rule for custom
    // headers): a redirect elsewhere, http -> https included, does not carry the API key, and a server
    // that wants one answers 401 there.
    error_buffer[0] = '\0';
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
}

std::string curl_error_text(int code, const char* error_buffer) {
    return error_buffer && error_buffer[0] ? std::string(error_buffer) : curl_easy_strerror(static_cast<CURLcode>(code));
}

void init_curl_once() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string HttpEndpoint::shown_url(const std::string& path) const { return redacted_url(url(path)); }

std::string redacted_url(const std::string& url) {
    const size_t scheme = url.find("://");
    const size_t start = scheme == std::string::npos ? 0 : scheme + 3;
    // The authority ends at the first / ? or #; its userinfo at the last @ before that ("user:p@ss@host"
    // kept "ss@host" when cut at the first one).
    const size_t end = std::min(url.find_first_of("/?#", start), url.size());
    const size_t at = url.rfind('@', end == 0 ? 0 : end - 1);
    if (at == std::string::npos || at < start) return url;
    return url.substr(0, start) + url.substr(at + 1);
}

void check_base_url(const std::string& url, const std::string& flag) {
    const std::string shown = flag + "'" + redacted_url(url) + "'";
    if (!url.starts_with("http://") && !url.starts_with("https://")) throw BadInput(shown + " must start with http:// or https://");
    CURLU* parsed = curl_url();
    if (!parsed) throw std::bad_alloc();
    const CURLUcode code = curl_url_set(parsed, CURLUPART_URL, url.c_str(), 0);
    char* host = nullptr;
    const bool has_host = code == CURLUE_OK && curl_url_get(parsed, CURLUPART_HOST, &host, 0) == CURLUE_OK && host && *host;
    curl_free(host);
    curl_url_cleanup(parsed);
    if (code != CURLUE_OK) throw BadInput(shown + " is not a valid URL: " + curl_url_strerror(code));
    if (!has_host) throw BadInput(shown + " has no host");
}

std::string request_timeout_text(double seconds) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", seconds);
    return std::string(text) + " s (--request-timeout)";
}

std::string body_excerpt(const std::string& body, size_t max) {
    std::string s = body.substr(0, max);
    std::replace(s.begin(), s.end(), '\n', ' ');
    std::replace(s.begin(), s.end(), '\r', ' ');
    return body.size() > max ? s + "..." : s;
}

namespace {

size_t append_body(char* data, size_t size, size_t n, void* user) {
    auto* body = static_cast<std::string*>(user);
    if (body->size() + size * n > kMaxResponseBytes) return 0;  // libcurl ends the transfer (CURLE_WRITE_ERROR)
    body->append(data, size * n);
    return size * n;
}

}  // namespace

HttpClient::HttpClient(HttpEndpoint endpoint) : endpoint_(std::move(endpoint)) {
    init_curl_once();
    curl_ = curl_easy_init();
}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpResponse HttpClient::get(const std::string& path, double timeout_s) { return perform(path, nullptr, timeout_s); }

HttpResponse HttpClient::post_json(const std::string& path, const std::string& body, double timeout_s) {
    return perform(path, &body, timeout_s);
}

HttpResponse HttpClient::perform(const std::string& path, const std::string* body, double timeout_s) {
    HttpResponse r;
    CURL* c = static_cast<CURL*>(curl_);
    if (!c) return r.error = "libcurl: cannot create a handle", r;
    curl_easy_reset(c);  // keeps the connection cache
    const std::string url = endpoint_.url(path);
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    char error_buffer[kCurlErrorBytes];
    set_transfer_options(c, endpoint_, error_buffer);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                     static_cast<long>((timeout_s > 0 ? timeout_s : endpoint_.request_timeout_s) * 1000));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_slist* headers = nullptr;
    const std::string auth = "Authorization: Bearer " + endpoint_.api_key;
    if (!endpoint_.api_key.empty()) headers = curl_slist_append(headers, auth.c_str());
    if (body) {
        headers = curl_slist_append(headers, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->c_str());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body->size()));
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    const CURLcode rc = curl_easy_perform(c);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);  // the buffer ends with this call
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) {
        r.error = rc == CURLE_WRITE_ERROR ? "the answer is larger than " + std::to_string(kMaxResponseBytes >> 20) + " MiB"
                                          : curl_error_text(rc, error_buffer);  // callers name the URL
        return r;
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    r.status = static_cast<int>(status);
    return r;
}

}  // namespace kvscope
