// HttpClient: blocking HTTP(S) GET and POST on libcurl for the small calls to a remote engine
// (/version, /v1/models, /tokenize, /metrics). One easy handle per client, so consecutive calls reuse
// the connection. Not thread-safe: one client per thread. HttpEndpoint is what every remote call
// shares (base URL, API key, timeouts); the key only ever goes into the Authorization header.
#pragma once

#include <string>

namespace kvscope {

struct HttpEndpoint {
    std::string base_url;      // "http://127.0.0.1:8000", no trailing slash needed
    std::string api_key;       // sent as "Authorization: Bearer KEY" when not empty
    double connect_timeout_s = 10;
    double request_timeout_s = 600;  // a request that receives no byte for this long fails
    // HTTPS: the server's certificate and name are verified (libcurl's default) against the system's
    // CA store, or against ca_file (PEM bundle, curl's CAINFO) when given; insecure turns both checks
    // off (curl's --insecure).
    std::string ca_file;
    bool insecure = false;

    // base_url joined with a path that starts with '/'.
    std::string url(const std::string& path) const;
    // The same for messages: without user:password@ (redacted_url).
    std::string shown_url(const std::string& path) const;
};

// The most a GET or POST answer may hold (a /metrics page, a model list, a /tokenize answer are far
// smaller): a server that sends more, or never ends, is refused instead of filling memory.
inline constexpr size_t kMaxResponseBytes = 16u << 20;

struct HttpResponse {
    int status = 0;     // 0 when no response came
    std::string body;
    std::string error;  // the transport error ("" when a response came, whatever its status)
    bool ok() const { return error.empty() && status >= 200 && status < 300; }
    // "HTTP 404: <start of the body>" or the transport error, for messages.
    std::string describe() const;
};

// curl_global_init, once per process, before any handle (thread-safe).
void init_curl_once();
// What every easy handle to the endpoint shares (`curl` is a CURL*): TLS verification, the connect
// timeout, no signals, redirects, and curl's detailed error text into error_buffer (CURL_ERROR_SIZE
// bytes, curl_error_text). Redirects are followed as vLLM's benchmark (aiohttp) and curl -L follow them
// (a moved path, a proxy's http -> https), at most 5, over http(s) only and never from https to http, and
// a POST stays a POST whatever the code: a 301 that turned a completion into a GET would only fail there,
// with a 405. The API key is not sent past the first scheme, host and port.
void set_transfer_options(void* curl, const HttpEndpoint& endpoint, char* error_buffer);
inline constexpr size_t kCurlErrorBytes = 256;  // CURL_ERROR_SIZE, without curl.h here
// curl's message for a failed transfer: the error buffer's detail ("SSL certificate problem: self-signed
// certificate", "Failed to connect to host port 1: Connection refused") where it has one, else the code's text.
std::string curl_error_text(int code, const char* error_buffer);
// Throws BadInput "<flag>'URL' ..." unless url is an http:// or https:// URL with a host and a valid port
// (libcurl's URL parser), so that "http://" or a port of 99999 is bad input, not a failed connection.
void check_base_url(const std::string& url, const std::string& flag = "");
// The base URL as shown and exported: without user:password@ (credentials never go into a result file).
std::string redacted_url(const std::string& url);
// "HTTP 404: <the server's error message>" (its JSON error body's message where it has one, else the
// start of the body), for messages.
std::string http_status_text(int status, const std::string& body);
// "0.5 s (--request-timeout)": the end of the messages of a request the timeout ended (the pool's silence,
// the reader's bytes without a token), the seconds as given.
std::string request_timeout_text(double seconds);
// The part of a response body worth putting in a message: at most `max` bytes, one line.
std::string body_excerpt(const std::string& body, size_t max = 200);

class HttpClient {
public:
    explicit HttpClient(HttpEndpoint endpoint);
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    // timeout_s bounds the whole call (0 = the endpoint's request_timeout_s).
    HttpResponse get(const std::string& path, double timeout_s = 0);
    HttpResponse post_json(const std::string& path, const std::string& body, double timeout_s = 0);
    const HttpEndpoint& endpoint() const { return endpoint_; }

private:
    HttpResponse perform(const std::string& path, const std::string* body, double timeout_s);

    HttpEndpoint endpoint_;
    void* curl_ = nullptr;  // CURL*, kept for connection reuse
};

}  // namespace kvscope
