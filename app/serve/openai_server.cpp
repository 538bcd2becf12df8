#include "openai_server.h"

#include "metrics/export.h"
#include "tokenize_protocol.h"
#include "util/errors.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>

namespace kvscope::cli {

namespace {

using nlohmann::json;

// How long a request thread waits for outputs before it looks whether its client is still there.
constexpr std::chrono::milliseconds kPollInterval{50};

void send_json(httplib::Response& res, int status, const ResponseJson& body) {
    res.status = status;
    res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {}) {
    res.status = status;
    res.set_content(openai_error_body(status, message, param), "application/json");
}

// Runs a route, answering the errors it raises in OpenAI's shape.
template <class Fn>
void answering_errors(httplib::Response& res, Fn&& fn) {
    try {
        fn();
    } catch (const ApiError& e) {
        send_error(res, e.status, e.what(), e.param);
    } catch (const BadInput& e) {  // the engine rejected the request
        send_error(res, 400, e.what());
    } catch (const ServerStopping& e) {
        send_error(res, 503, e.what());
    }
}

// Compares without an early exit, so that the time taken says nothing about how much of the key matched.
bool same_secret(std::string_view given, std::string_view key) {
    if (given.size() != key.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
    return diff == 0;
}

// What one generation request is waiting for: its choices, filled from the engine's outputs.
struct Generation {
    Endpoint endpoint;
    ResponseHead head;
    bool include_usage = false;
    bool continuous_usage = false;
    bool usage_details = false;  // --enable-prompt-tokens-details
    ResponseShape shape;
    int64_t prompt_tokens = 0;
    std::vector<int64_t> prompt_lengths;  // tokens of each prompt
    std::vector<size_t> prompt_of;  // choice -> prompt
    std::shared_ptr<OutputStream> stream;
    std::vector<std::string> ids;            // choice i's engine request id
    std::map<std::string, size_t> index_of;  // engine request id -> choice index
    std::vector<ChoiceState> choices;
    std::vector<int64_t> token_chars;  // per choice: text_offset past the tokens whose logprobs were streamed
    std::vector<char> streamed;        // per choice: its first chunk went out (with echo, the prompt in it)
    size_t remaining = 0;

    // Takes the outputs that arrived (waiting up to `timeout`); calls on_output(choice, delta) for each.
    template <class OnOutput>
    void collect(std::chrono::milliseconds timeout, OnOutput&& on_output) {
        for (RequestOutput& o : stream->wait(timeout)) {
            auto it = index_of.find(o.request_id);
            if (it == index_of.end()) continue;
            ChoiceState& c = choices[it->second];
            c.text += o.text_delta;
            c.num_cached_tokens = std::max(c.num_cached_tokens, o.num_cached_tokens);
            c.num_tokens += static_cast<int>(o.new_token_ids.size());
            c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
            if (o.prompt_logprobs) c.prompt_logprobs = *o.prompt_logprobs;
            if (o.finished && !c.finished) {
                c.finished = true;
                c.finish_reason = o.finish_reason;
                if (o.stop_string) c.stop_reason = *o.stop_string;
                else if (o.stop_token) c.stop_reason = *o.stop_token;
                --remaining;
            }
            on_output(it->second, o);
        }
    }

    Usage usage() const {
        Usage u;
        u.prompt_tokens = prompt_tokens;
        for (const ChoiceState& c : choices) u.completion_tokens += c.num_tokens;
        if (usage_details) {
            // Each prompt counts once, as in prompt_tokens: its first sample's hits (the others of n share
            // the prompt's blocks that the first computed).
            u.cached_tokens = 0;
            for (size_t i = 0; i < choices.size(); ++i)
                if (i == 0 || prompt_of[i] != prompt_of[i - 1]) *u.cached_tokens += choices[i].num_cached_tokens;
        }
        return u;
    }
};

std::string sse(const std::string& data) { return "data: " + data + "\n\n"; }

}  // namespace

OpenAiServer::OpenAiServer(const Model& model, OpenAiServerOptions options, EngineLoop& loop, const ServeMetrics& metrics)
    : model_(model), options_(std::move(options)),
      prompt_byte_cap_(max_prompt_bytes(options_.limits, model.tokenizer, options_.max_model_len)), loop_(loop),
      metrics_(metrics), created_(static_cast<int64_t>(std::time(nullptr))), id_salt_(std::random_device{}()) {}

std::string OpenAiServer::next_id(const char* prefix) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%08llx%08llx", prefix, static_cast<unsigned long long>(id_salt_ & 0xffffffffu),
                  static_cast<unsigned long long>(next_id_++));
    return buf;
}

std::string OpenAiServer::authorize(const httplib::Request& req) const {
    if (options_.api_key.empty() || !req.path.starts_with("/v1")) return "";
    const std::string& header = req.get_header_value("Authorization");
    if (header.empty()) return "no API key: send the header 'Authorization: Bearer <key>'";
    if (!header.starts_with("Bearer ") || !same_secret(header.substr(7), options_.api_key)) return "incorrect API key";
    return "";
}

void OpenAiServer::install(HttpFrontend& frontend) {
    frontend.set_authorizer([this](const httplib::Request& req) { return authorize(req); });
    frontend.control_get("/health", [](const httplib::Request&, httplib::Response& res) {
        res.status = 200;
        res.set_content("", "text/plain; charset=utf-8");
    });
    frontend.control_get("/version", [](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, {{"version", kvscope_version()}, {"engine", "kvscope"}});
    });
    frontend.control_get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics_.render_prometheus(), "text/plain; version=0.0.4; charset=utf-8");
    });
    frontend.control_get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        // The served name only: the model's path on this machine is none of a client's business.
        const json card = {{"id", options_.served_name}, {"object", "model"},   {"created", created_},
                           {"owned_by", "kvscope"},       {"root", options_.served_name}, {"parent", nullptr},
                           {"max_model_len", options_.max_model_len}};
        send_json(res, 200, {{"object", "list"}, {"data", json::array({card})}});
    });
    frontend.post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
        answering_errors(res, [&] { generate(Endpoint::COMPLETIONS, req, res); });
    });
    frontend.post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        answering_errors(res, [&] { generate(Endpoint::CHAT, req, res); });
    });
    // vLLM's tokenizer routes, so that a remote benchmark builds exact prompts without the model's files.
    frontend.post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
        answering_errors(res, [&] {
            const json body = parse_json_body(req.body, options_.limits);
            send_json(res, 200, tokenize_response(body, model_, options_.max_model_len, prompt_byte_cap_));
        });
    });
    frontend.post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
        answering_errors(res, [&] {
            const json body = parse_json_body(req.body, options_.limits);
            send_json(res, 200, detokenize_response(body, model_, options_.max_model_len));
        });
    });
}

void OpenAiServer::generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_json_body(req.body, options_.limits);
    const GenerationJob job =
        parse_generation_request(endpoint, body, model_, options_.max_model_len, options_.limits, prompt_byte_cap_);
    if (!job.model.empty() && job.model != options_.served_name && job.model != model_.name)
        throw ApiError(404, "the model " + dump(nlohmann::json(job.model.substr(0, 100))) + " does not exist (this server has '" +
                                options_.served_name + "')", "model");

    auto gen = std::make_shared<Generation>();
    gen->endpoint = endpoint;
    gen->head = {next_id(endpoint == Endpoint::CHAT ? "chatcmpl-" : "cmpl-"), static_cast<int64_t>(std::time(nullptr)),
                 options_.served_name};
    gen->include_usage = job.include_usage;
    gen->continuous_usage = job.continuous_usage;
    gen->usage_details = options_.enable_prompt_tokens_details;
    gen->shape = response_shape(job);
    gen->stream = std::make_shared<OutputStream>();
    std::vector<NewRequest> requests;
    for (size_t p = 0; p < job.prompts.size(); ++p) {
        requests.push_back({gen->head.id + "-" + std::to_string(p), job.prompts[p], job.params, job.priority, job.cache_salt});
        gen->prompt_lengths.push_back(static_cast<int64_t>(job.prompts[p].size()));
        gen->prompt_tokens += gen->prompt_lengths.back();
    }
    // Choice i = prompt p, sample j, in that order (OpenAI's index for a batch of prompts with n).
    std::vector<size_t>& prompt_of = gen->prompt_of;
    const auto lists = loop_.submit(std::move(requests), gen->stream);  // BadInput -> 400
    for (size_t p = 0; p < lists.size(); ++p)
        for (const std::string& id : lists[p]) {
            gen->index_of[id] = gen->ids.size();
            gen->ids.push_back(id);
            prompt_of.push_back(p);
        }
    gen->choices.resize(gen->ids.size());
    if (gen->shape.echo || gen->shape.prompt_logprobs)
        for (size_t i = 0; i < gen->choices.size(); ++i) {
            gen->choices[i].prompt_token_ids = job.prompts[prompt_of[i]];
            if (prompt_of[i] < job.prompt_texts.size()) gen->choices[i].prompt_text = job.prompt_texts[prompt_of[i]];
        }
    gen->token_chars.resize(gen->ids.size());
    gen->streamed.resize(gen->ids.size());
    gen->remaining = gen->choices.size();

    if (!job.stream) {
        while (gen->remaining > 0) {
            gen->collect(kPollInterval, [](size_t, const RequestOutput&) {});
            // A client that went away frees its requests' KV blocks now.
            if (gen->remaining > 0 && !HttpFrontend::client_connected()) {
                loop_.abort(gen->ids);
                send_error(res, 499, "the client closed the connection");
                return;
            }
        }
        send_json(res, 200,
                  generation_response(endpoint, gen->head, gen->choices, gen->usage(), model_.tokenizer, gen->shape));
        return;
    }

    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");  // proxies: pass events on as they come
    auto opened = std::make_shared<bool>(false);
    httplib::ContentProviderWithoutLength events = [this, gen, opened](size_t, httplib::DataSink& sink) {
        auto write = [&](const ResponseJson& chunk) {
            const std::string event = sse(dump(chunk));
            return sink.write(event.data(), event.size());
        };
        if (!*opened) {
            *opened = true;
            if (gen->endpoint == Endpoint::CHAT)
                for (size_t i = 0; i < gen->choices.size(); ++i) {
                    ResponseJson role = stream_chunk(gen->endpoint, gen->head, i, "", gen->choices[i], true);
                    if (gen->continuous_usage) role["usage"] = usage_json({gen->prompt_lengths[gen->prompt_of[i]], 0, std::nullopt});
                    if (!write(role)) return false;
                }
        }
        bool ok = true;
        gen->collect(kPollInterval, [&](size_t i, const RequestOutput& o) {
            // With echo, the choice's first chunk opens with the prompt (and its logprobs), as in vLLM.
            const ResponseShape& shape = gen->shape;
            const ChoiceState& c = gen->choices[i];
            const bool echo = shape.echo && !gen->streamed[i];
            // Echo with max_tokens 0: the prompt alone; the one generated token is neither text nor logprobs.
            const std::string_view text_delta = shape.echo_only ? std::string_view() : std::string_view(o.text_delta);
            const std::span<const TokenLogprobs> token_logprobs =
                shape.echo_only ? std::span<const TokenLogprobs>() : std::span<const TokenLogprobs>(o.logprobs);
            if (!ok || (!echo && text_delta.empty() && !o.finished && token_logprobs.empty() && !o.prompt_logprobs)) return;
            gen->streamed[i] = true;
            const Tokenizer& tokenizer = model_.tokenizer;
            EchoedPrompt echoed;
            if (echo && gen->endpoint == Endpoint::CHAT) echoed.text = c.prompt_text.value_or("");  // the text alone
            else if (echo) echoed = echo_prompt(tokenizer, c.prompt_token_ids, c.prompt_logprobs, shape.logprobs, c.prompt_text);
            ResponseJson logprobs = nullptr;
            if (shape.logprobs) {
                // Offsets continue from the characters of the choice's earlier tokens.
                int64_t& offset = gen->token_chars[i];
                const bool echo_logprobs = echo && gen->endpoint == Endpoint::COMPLETIONS;  // chat echoes text only
                if (echo_logprobs) offset = echoed.text_offset_end;
                logprobs = logprobs_json(gen->endpoint, tokenizer, token_logprobs, offset);
                if (echo_logprobs) {  // the prompt's entries first
                    append_logprobs(echoed.logprobs, logprobs);
                    logprobs = std::move(echoed.logprobs);
                }
                for (const TokenLogprobs& l : token_logprobs) offset += text_offset_length(tokenizer.token_to_bytes(l.token_id));
            }
            const std::string delta = (echo ? echoed.text : std::string()) + std::string(text_delta);
            ResponseJson chunk = stream_chunk(gen->endpoint, gen->head, i, delta, c, false, std::move(logprobs));
            if (o.prompt_logprobs && shape.prompt_logprobs)
                prompt_logprobs_place(gen->endpoint, chunk, chunk["choices"][0]) =
                    prompt_logprobs_json(tokenizer, *o.prompt_logprobs, *shape.prompt_logprobs);
            // vLLM's continuous_usage_stats: the choice's own prompt and completion tokens so far.
            if (gen->continuous_usage)
                chunk["usage"] = usage_json({gen->prompt_lengths[gen->prompt_of[i]], c.num_tokens, std::nullopt});
            ok = write(chunk);
        });
        if (!ok || !sink.is_writable()) return false;  // the releaser aborts what is left
        if (gen->remaining == 0) {
            if (gen->include_usage && !write(stream_usage_chunk(gen->endpoint, gen->head, gen->usage())))
                return false;
            const std::string done = sse("[DONE]");
            if (!sink.write(done.data(), done.size())) return false;
            sink.done();
        }
        return true;
    };
    // A stream that ended early (client gone, write failed): free its requests' KV blocks.
    httplib::ContentProviderResourceReleaser release = [this, gen](bool success) {
        if (!success && gen->remaining > 0) loop_.abort(gen->ids);
    };
    // HTTP/1.0 has no chunked coding (RFC 9112 section 6.1): its clients get the events unframed, ended by
    // the server closing the connection, as vLLM's server answers them.
    if (req.version == "HTTP/1.0")
        res.set_content_provider("text/event-stream; charset=utf-8", std::move(events), std::move(release));
    else
        res.set_chunked_content_provider("text/event-stream; charset=utf-8", std::move(events), std::move(release));
}

}  // namespace kvscope::cli
