// OpenAiServer: the HTTP routes of kvscope-cli serve (/health, /v1/models, /metrics,
// /v1/completions, /v1/chat/completions). Runs on the connection threads: parses and validates a
// request, submits it to the EngineLoop, waits for its outputs and answers with JSON or an SSE
// stream. A client that goes away mid-request has its requests aborted (their KV blocks freed).
#pragma once

#include "http_server.h"
#include "openai_protocol.h"
#include "serve_engine_loop.h"
#include "serve_metrics.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace kvscope::cli {

class OpenAiServer {
public:
    // served_name: what /v1/models lists and responses carry as "model".
    OpenAiServer(const Model& model, std::string served_name, int max_model_len, EngineLoop& loop,
                 const ServeMetrics& metrics);

    void handle(const HttpRequest& request, HttpConnection& conn);

private:
    void route(const HttpRequest& request, HttpConnection& conn);
    void generate(Endpoint endpoint, const HttpRequest& request, HttpConnection& conn);
    std::string next_id(const char* prefix);

    const Model& model_;
    std::string served_name_;
    int max_model_len_;
    EngineLoop& loop_;
    const ServeMetrics& metrics_;
    int64_t created_;             // unix seconds when the server started
    uint64_t id_salt_;            // random per process, so ids differ across restarts
    std::atomic<uint64_t> next_id_{0};
};

}  // namespace kvscope::cli
