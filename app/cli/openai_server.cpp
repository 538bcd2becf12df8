#include "openai_server.h"

#include "util/errors.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>

namespace kvscope::cli {

namespace {

using nlohmann::json;

// How long a connection thread waits for outputs before it looks whether its client is still there.
constexpr std::chrono::milliseconds kPollInterval{50};

void send_json(HttpConnection& conn, int status, const json& body) {
    conn.send_response(status, "application/json", dump(body));
}

void send_error(HttpConnection& conn, int status, const std::string& message, const std::string& param = {}) {
    conn.send_response(status, "application/json", http_error_body(status, message, param));
}

}  // namespace

OpenAiServer::OpenAiServer(const Model& model, std::string served_name, int max_model_len, EngineLoop& loop,
                           const ServeMetrics& metrics)
    : model_(model), served_name_(std::move(served_name)), max_model_len_(max_model_len), loop_(loop),
      metrics_(metrics), created_(static_cast<int64_t>(std::time(nullptr))), id_salt_(std::random_device{}()) {}

std::string OpenAiServer::next_id(const char* prefix) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%08llx%08llx", prefix, static_cast<unsigned long long>(id_salt_ & 0xffffffffu),
                  static_cast<unsigned long long>(next_id_++));
    return buf;
}

void OpenAiServer::handle(const HttpRequest& request, HttpConnection& conn) {
    try {
        route(request, conn);
    } catch (const ApiError& e) {
        send_error(conn, e.status, e.what(), e.param);
    } catch (const BadInput& e) {  // the engine rejected the request
        send_error(conn, 400, e.what());
    } catch (const ServerStopping& e) {
        send_error(conn, 503, e.what());
    }
}

void OpenAiServer::route(const HttpRequest& request, HttpConnection& conn) {
    const std::string& path = request.path;
    const bool get = request.method == "GET";
    auto require = [&](bool ok, const char* allowed) {
        if (!ok) throw ApiError(405, "method " + request.method + " is not allowed on " + path + " (use " + allowed + ")");
    };
    if (path == "/health") {
        require(get || request.method == "HEAD", "GET");  // the body is empty either way
        conn.send_response(200, "text/plain; charset=utf-8", "");
    } else if (path == "/v1/models") {
        require(get, "GET");
        json card = {{"id", served_name_},   {"object", "model"}, {"created", created_}, {"owned_by", "kvscope"},
                     {"root", model_.source}, {"parent", nullptr}, {"max_model_len", max_model_len_}};
        send_json(conn, 200, {{"object", "list"}, {"data", json::array({card})}});
    } else if (path == "/metrics") {
        require(get, "GET");
        conn.send_response(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.render_prometheus());
    } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
        require(request.method == "POST", "POST");
        generate(path == "/v1/completions" ? Endpoint::COMPLETIONS : Endpoint::CHAT, request, conn);
    } else {
        throw ApiError(404, "no route for " + request.method + " " + path);
    }
}

void OpenAiServer::generate(Endpoint endpoint, const HttpRequest& request, HttpConnection& conn) {
    json body;
    try {
        body = json::parse(request.body);
    } catch (const json::parse_error& e) {
        throw ApiError(400, std::string("invalid JSON body: ") + e.what());
    }
    const GenerationJob job = parse_generation_request(endpoint, body, model_, max_model_len_);
    if (!job.model.empty() && job.model != served_name_ && job.model != model_.name && job.model != model_.source)
        throw ApiError(404, "the model '" + job.model + "' does not exist (this server has '" + served_name_ + "')", "model");

    const ResponseHead head{next_id(endpoint == Endpoint::CHAT ? "chatcmpl-" : "cmpl-"),
                            static_cast<int64_t>(std::time(nullptr)), served_name_};
    std::vector<NewRequest> requests;
    int64_t prompt_tokens = 0;
    for (size_t p = 0; p < job.prompts.size(); ++p) {
        requests.push_back({head.id + "-" + std::to_string(p), job.prompts[p], job.params, job.priority, ""});
        prompt_tokens += static_cast<int64_t>(job.prompts[p].size());
    }
    auto stream = std::make_shared<OutputStream>();
    const auto ids = loop_.submit(std::move(requests), stream);  // BadInput -> 400

    // Choice i = prompt p, sample j, in that order (OpenAI's index for a batch of prompts with n).
    std::map<std::string, size_t> index_of;
    std::vector<std::string> all_ids;
    for (const auto& list : ids)
        for (const std::string& id : list) {
            index_of[id] = all_ids.size();
            all_ids.push_back(id);
        }
    std::vector<ChoiceState> choices(all_ids.size());
    size_t remaining = choices.size();

    if (job.stream) {
        conn.begin_event_stream();
        if (endpoint == Endpoint::CHAT)
            for (size_t i = 0; i < choices.size(); ++i)
                conn.send_event(dump(stream_chunk(endpoint, head, i, "", choices[i], true)));
    }
    while (remaining > 0) {
        for (RequestOutput& o : stream->wait(kPollInterval)) {
            auto it = index_of.find(o.request_id);
            if (it == index_of.end()) continue;
            ChoiceState& c = choices[it->second];
            c.text += o.text_delta;
            c.num_tokens += static_cast<int>(o.new_token_ids.size());
            if (o.finished) {
                c.finished = true;
                c.finish_reason = o.finish_reason;
                --remaining;
            }
            if (job.stream && (!o.text_delta.empty() || o.finished))
                conn.send_event(dump(stream_chunk(endpoint, head, it->second, o.text_delta, c)));
        }
        // A client that went away (or a write that failed) frees its requests' KV blocks now.
        if (remaining > 0 && conn.peer_closed()) {
            loop_.abort(all_ids);
            return;
        }
    }
    if (job.stream) {
        if (job.include_usage) {
            int64_t completion_tokens = 0;
            for (const ChoiceState& c : choices) completion_tokens += c.num_tokens;
            conn.send_event(dump(stream_usage_chunk(endpoint, head, prompt_tokens, completion_tokens)));
        }
        conn.send_event("[DONE]");
        return;
    }
    send_json(conn, 200, generation_response(endpoint, head, choices, prompt_tokens));
}

}  // namespace kvscope::cli
