#include "remote/openai_stream.h"

#include "remote/http_client.h"
#include "util/errors.h"
#include "util/json_number.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>

namespace kvscope {

using nlohmann::json;

OpenAiApi openai_api_of_endpoint(const std::string& endpoint) {
    if (endpoint == "/v1/completions") return OpenAiApi::COMPLETIONS;
    if (endpoint == "/v1/chat/completions") return OpenAiApi::CHAT;
    throw BadInput("--endpoint: '" + endpoint + "' is not /v1/completions or /v1/chat/completions");
}

OpenAiApi openai_api_of_backend(const std::string& backend) {
    if (backend == "openai") return OpenAiApi::COMPLETIONS;
    if (backend == "openai-chat") return OpenAiApi::CHAT;
    throw BadInput("--backend: '" + backend + "' is not a remote backend (openai, openai-chat) and --base-url is given");
}

const char* default_endpoint(OpenAiApi api) {
    return api == OpenAiApi::CHAT ? "/v1/chat/completions" : "/v1/completions";
}

bool engine_takes_min_tokens(ServerEngine engine) {
    return engine == ServerEngine::VLLM || engine == ServerEngine::SGLANG || engine == ServerEngine::KVSCOPE;
}

std::string openai_request_body(const OpenAiRequest& r) {
    json body = {{"model", r.model}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
                 {"max_tokens", r.max_tokens}, {"temperature", r.temperature}};
    if (r.ignore_eos) body["ignore_eos"] = true;
    if (r.temperature > 0) body["seed"] = r.seed;
    if (r.min_tokens) body["min_tokens"] = r.max_tokens;
    if (r.top_p < 1) body["top_p"] = r.top_p;
    if (r.api == OpenAiApi::CHAT) {
        body["messages"] = json::array();
        for (const ChatMessage& m : r.messages) body["messages"].push_back({{"role", m.role}, {"content", m.content}});
        if (r.messages.empty()) body["messages"].push_back({{"role", "user"}, {"content", r.prompt_text}});
        body["max_completion_tokens"] = r.max_tokens;  // the newer name; servers take either
    } else if (!r.prompt_token_ids.empty()) {
        body["prompt"] = r.prompt_token_ids;
    } else {
        body["prompt"] = r.prompt_text;
    }
    // Invalid UTF-8 in a decoded prompt becomes U+FFFD rather than an exception.
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool OpenAiStreamReader::feed(int status, std::string_view bytes, double t) {
    if (!error_.empty()) return false;
    if (status != 200) {  // an error body: its start makes the message (finish()); the rest is not waited for
        error_body_.append(bytes.substr(0, 1000 - error_body_.size()));
        return error_body_.size() < 1000;
    }
    if (last_progress_t_ < 0) last_progress_t_ = t;
    for (const std::string& data : sse_.feed(bytes))
        if (!take_event(data, t)) return false;
    if (sse_.overflowed()) {
        error_ = "malformed SSE: an event longer than " + std::to_string(SseParser::kMaxEventBytes >> 20) + " MiB";
        return false;
    }
    if (stall_s_ > 0 && t - last_progress_t_ > stall_s_) {
        error_ = "timed out: bytes but no token for " + request_timeout_text(stall_s_);
        return false;
    }
    return true;
}

bool OpenAiStreamReader::take_event(const std::string& data, double t) {
    if (done_) {
        error_ = "malformed SSE: an event after [DONE]";
        return false;
    }
    if (data == "[DONE]") return done_ = true;
    json chunk = json::parse(data, nullptr, false);
    if (chunk.is_discarded() || !chunk.is_object()) {
        error_ = "malformed SSE event (not a JSON object): " + body_excerpt(data, 120);
        return false;
    }
    if (chunk.contains("error")) {  // vLLM and others report a failure inside the stream
        const json& e = chunk["error"];
        error_ = "error event: " + (e.is_object() && e.contains("message") && e["message"].is_string()
                                        ? e["message"].get<std::string>()
                                        : body_excerpt(e.dump(), 200));
        return false;
    }
    if (const auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) {
        // Counts a server could not have meant are not believed (the chunks are counted instead): past
        // int, negative, or more completion tokens than were asked for (2^40 prompt tokens read as 0, and
        // 10^6 completion tokens for 8 chunks, before).
        const auto count = [](const json& obj, const char* key, int64_t most) -> int {
            const auto v = obj.find(key);
            const auto n = v == obj.end() ? std::nullopt : json_integer_in(*v, 0, most);
            return n ? static_cast<int>(*n) : -1;
        };
        prompt_tokens_ = std::max(prompt_tokens_, count(*u, "prompt_tokens", INT32_MAX));
        completion_tokens_ = std::max(completion_tokens_, count(*u, "completion_tokens", max_tokens_ > 0 ? max_tokens_ : INT32_MAX));
        if (const auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object())
            cached_tokens_ = std::max(cached_tokens_, count(*d, "cached_tokens", INT32_MAX));
    }
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return true;
    const json& c = (*choices)[0];
    if (!c.is_object()) {
        error_ = "malformed SSE event (choices[0] is not an object): " + body_excerpt(data, 120);
        return false;
    }
    // A chunk counts as a token event when it carries text or ends the choice (vLLM's benchmark counts
    // chunks; a server sends no chunk for a token whose text is still incomplete UTF-8, and its last
    // one may carry only the finish reason). The role chunk a chat stream opens with is neither and
    // says nothing about the first token.
    // A reasoning model's thinking arrives beside the content, as delta.reasoning_content (llama-server,
    // SGLang, vLLM before 0.10) or delta.reasoning (vLLM since): its chunks are tokens too (vLLM's
    // benchmark times every chunk), though not the answer's text.
    const json* text = nullptr;
    bool reasoning = false;
    if (api_ == OpenAiApi::CHAT) {
        if (c.contains("delta") && c["delta"].is_object()) {
            const json& delta = c["delta"];
            if (delta.contains("content")) text = &delta["content"];
            for (const char* key : {"reasoning_content", "reasoning"})
                reasoning = reasoning || (delta.contains(key) && delta[key].is_string() &&
                                          !delta[key].get_ref<const std::string&>().empty());
        }
    } else if (c.contains("text")) {
        text = &c["text"];
    }
    if (text && !text->is_string() && !text->is_null()) {
        error_ = std::string("malformed SSE event (") + (api_ == OpenAiApi::CHAT ? "delta.content" : "text") +
                 " is not a string): " + body_excerpt(data, 120);
        return false;
    }
    const bool has_text = text && text->is_string() && !text->get_ref<const std::string&>().empty();
    const bool finishes = c.contains("finish_reason") && c["finish_reason"].is_string();
    if (has_text) text_ += text->get_ref<const std::string&>();
    if (has_text || reasoning || finishes) {
        chunk_times_.push_back(t);
        last_progress_t_ = t;
    }
    if (finishes) finish_reason_ = c["finish_reason"];
    // One event per token at most, and one more that only finishes: past that the stream is not this
    // request's answer (an endless one kept a benchmark, and its memory, going past any timeout).
    if (max_tokens_ > 0 && chunk_times_.size() > static_cast<size_t>(max_tokens_) + 1) {
        error_ = "the server streamed more than max_tokens (" + std::to_string(max_tokens_) + ") token events";
        return false;
    }
    return true;
}

void OpenAiStreamReader::finish(int status, const std::string& transport_error) {
    if (!error_.empty()) return;
    if (status != 0 && status != 200) {
        error_ = http_status_text(status, error_body_);
        return;
    }
    if (!transport_error.empty()) {
        error_ = transport_error;
        return;
    }
    if (!done_)
        error_ = sse_.has_partial_event() ? "the stream ended in the middle of an event, without [DONE]"
                                          : "the stream ended without [DONE]";
    else if (chunk_times_.empty())  // every event lacked text (no choices, no data: lines): nothing to time
        error_ = "the stream ended with [DONE] but carried no token (no choices[0] text or finish_reason)";
}

}  // namespace kvscope
