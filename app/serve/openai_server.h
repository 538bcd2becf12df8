// OpenAiServer: the routes of kvscope-cli serve. Control routes (/health, /version, /v1/models,
// /metrics) answer from a small pool of their own; /v1/completions and /v1/chat/completions parse and
// validate a request (openai_protocol), submit it to the EngineLoop and answer with JSON or an SSE
// stream. A client that goes away mid-request has its requests aborted (their KV blocks freed). With
// an API key, every /v1 route wants `Authorization: Bearer KEY`; /health, /version and /metrics stay open,
// as in vLLM.
#pragma once

#include "http_frontend.h"
#include "openai_protocol.h"
#include "serve_engine_loop.h"
#include "serve_limits.h"
#include "serve_metrics.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace kvscope::cli {

struct OpenAiServerOptions {
    std::string served_name;  // what /v1/models lists and responses carry as "model"
    int max_model_len = 0;
    std::string api_key;      // "" = no authentication
    RequestLimits limits;
    bool enable_prompt_tokens_details = false;  // usage.prompt_tokens_details.cached_tokens (vLLM's flag)
};

class OpenAiServer {
public:
    OpenAiServer(const Model& model, OpenAiServerOptions options, EngineLoop& loop, const ServeMetrics& metrics);

    // Registers the routes and the API key check.
    void install(HttpFrontend& frontend);

private:
    void generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
    std::string authorize(const httplib::Request& req) const;
    std::string next_id(const char* prefix);

    const Model& model_;
    OpenAiServerOptions options_;
    int64_t prompt_byte_cap_;
    EngineLoop& loop_;
    const ServeMetrics& metrics_;
    int64_t created_;             // unix seconds when the server started
    uint64_t id_salt_;            // random per process, so ids differ across restarts
    std::atomic<uint64_t> next_id_{0};
};

}  // namespace kvscope::cli
