#include "openai_protocol.h"

#include "model/incremental_detokenizer.h"
#include "util/errors.h"
#include "util/json_number.h"
#include "util/utf8.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cmath>
#include <limits>

namespace kvscope::cli {

namespace {

using nlohmann::json;

// A user's value in an error message: short, and never walked recursively (a value may nest as deep as
// the parser allows, and may be megabytes long).
std::string shown(const json& value) {
    switch (value.type()) {
    case json::value_t::array: return "a list of " + std::to_string(value.size()) + " items";
    case json::value_t::object: return "an object of " + std::to_string(value.size()) + " fields";
    case json::value_t::string: {
        const std::string& text = value.get_ref<const std::string&>();
        if (text.size() <= 40) return dump(value);
        return dump(json(text.substr(0, 37))) + "... (" + std::to_string(text.size()) + " bytes)";
    }
    default: return dump(value);  // a number, a boolean or null: short
    }
}

// The field, or null when absent or JSON null (OpenAI clients send null for "use the default").
const json* field(const json& body, const char* name) {
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
}

// A sampling parameter, which the engine keeps as a float: a double past float's range is refused as such
// (1e308 became inf, then "must be >= 0, got inf"), and one too small for a float keeps its sign (top_p
// 1e-300 became 0, then "must be in (0, 1]").
float get_float(const json& body, const char* name, double fallback) {
    const json* f = field(body, name);
    if (!f) return static_cast<float>(fallback);
    if (!f->is_number()) throw ApiError(400, std::string(name) + " must be a number, got " + shown(*f), name);
    const double v = f->get<double>();
    if (!(std::fabs(v) <= std::numeric_limits<float>::max()))
        throw ApiError(400, std::string(name) + " is out of range: " + shown(*f), name);
    const float x = static_cast<float>(v);
    return x == 0 && v != 0 ? std::copysign(std::numeric_limits<float>::denorm_min(), static_cast<float>(v > 0 ? 1 : -1)) : x;
}

int64_t as_integer(const json& v, const std::string& name) {
    if (const auto n = json_integer(v)) return *n;
    if (v.is_number_unsigned()) throw ApiError(400, name + " is too large: " + shown(v), name);
    if (v.is_number_float()) {  // 20.0 from clients that only have doubles
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
        if (std::isfinite(d) && d == std::floor(d)) throw ApiError(400, name + " is out of range: " + shown(v), name);  // 1e30
    }
    throw ApiError(400, name + " must be an integer, got " + shown(v), name);
}

std::optional<int64_t> get_integer(const json& body, const char* name) {
    const json* f = field(body, name);
    if (!f) return std::nullopt;
    return as_integer(*f, name);
}

int get_int(const json& body, const char* name, int fallback) {
    const auto v = get_integer(body, name);
    if (!v) return fallback;
    if (*v < INT_MIN || *v > INT_MAX) throw ApiError(400, std::string(name) + " is out of range: " + std::to_string(*v), name);
    return static_cast<int>(*v);
}

bool get_bool(const json& body, const char* name, bool fallback) {
    const json* f = field(body, name);
    if (!f) return fallback;
    if (!f->is_boolean()) throw ApiError(400, std::string(name) + " must be true or false, got " + shown(*f), name);
    return f->get<bool>();
}

std::vector<std::string> get_stop(const json& body, const RequestLimits& limits) {
    const json* f = field(body, "stop");
    if (!f) return {};
    auto checked = [&](const json& s) {
        if (!s.is_string()) throw ApiError(400, "stop must be a string or a list of strings, got " + shown(s), "stop");
        const std::string& text = s.get_ref<const std::string&>();
        if (text.size() > static_cast<size_t>(limits.max_stop_bytes))
            throw ApiError(400, "a stop string has " + std::to_string(text.size()) + " bytes; at most " +
                                    std::to_string(limits.max_stop_bytes) + " are allowed (--max-stop-bytes)", "stop");
        return text;
    };
    if (f->is_string()) return {checked(*f)};
    if (!f->is_array()) throw ApiError(400, "stop must be a string or a list of strings, got " + shown(*f), "stop");
    // Every stop string is checked after every token of every choice: their number bounds that cost.
    if (f->size() > static_cast<size_t>(limits.max_stop))
        throw ApiError(400, "stop has " + std::to_string(f->size()) + " strings; at most " + std::to_string(limits.max_stop) +
                                " are allowed (--max-stop)", "stop");
    std::vector<std::string> out;
    for (const json& s : *f) out.push_back(checked(s));
    return out;
}

// logit_bias: {"token id": bias in [-100, 100], ...}, OpenAI's form.
std::vector<std::pair<int32_t, float>> get_logit_bias(const json& body, const Model& model, const RequestLimits& limits) {
    const json* f = field(body, "logit_bias");
    if (!f) return {};
    if (!f->is_object()) throw ApiError(400, "logit_bias must be an object of token id -> bias, got " + shown(*f), "logit_bias");
    if (f->size() > static_cast<size_t>(limits.max_logit_bias))
        throw ApiError(400, "logit_bias has " + std::to_string(f->size()) + " entries; at most " +
                                std::to_string(limits.max_logit_bias) + " are allowed (--max-logit-bias)", "logit_bias");
    std::vector<std::pair<int32_t, float>> out;
    for (const auto& [key, value] : f->items()) {
        char* end = nullptr;
        errno = 0;
        const long long id = std::strtoll(key.c_str(), &end, 10);
        const std::string at = "logit_bias[" + shown(json(key)) + "]";
        if (key.empty() || *end != '\0' || errno == ERANGE || id < 0 || id >= model.config.vocab_size)
            throw ApiError(400, at + ": keys must be token ids in [0, " + std::to_string(model.config.vocab_size) + ")",
                           "logit_bias");
        if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
            throw ApiError(400, at + ": the bias must be a number in [-100, 100], got " + shown(value), "logit_bias");
        out.emplace_back(static_cast<int32_t>(id), static_cast<float>(value.get<double>()));
    }
    return out;
}

// Chat: "logprobs": true with "top_logprobs": K (0 when absent; K without logprobs is an error, as at
// OpenAI). Completions: "logprobs": K. Range checked by SamplingParams::validate().
std::optional<int> get_logprobs(const json& body, Endpoint endpoint) {
    if (endpoint == Endpoint::CHAT) {
        const bool on = get_bool(body, "logprobs", false);
        const std::optional<int64_t> top = get_integer(body, "top_logprobs");
        if (top && !on) throw ApiError(400, "top_logprobs needs \"logprobs\": true", "top_logprobs");
        if (!on) return std::nullopt;
        if (top && (*top < 0 || *top > kMaxLogprobs))
            throw ApiError(400, "top_logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(*top),
                           "top_logprobs");
        return static_cast<int>(top.value_or(0));
    }
    const std::optional<int64_t> k = get_integer(body, "logprobs");
    if (!k) return std::nullopt;
    if (*k < 0 || *k > kMaxLogprobs)
        throw ApiError(400, "logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(*k), "logprobs");
    return static_cast<int>(*k);
}

void reject_unsupported(const json& body, Endpoint endpoint) {
    auto unsupported = [](const char* name) {
        throw ApiError(400, std::string(name) + " is not supported by kvscope serve", name);
    };
    // A field that asks for a shape of output (JSON, a choice, a grammar) is refused rather than ignored: the
    // answer would look fine and not be what was asked. vLLM's names as well as OpenAI's.
    if (const json* f = field(body, "response_format"); f && !(f->is_object() && f->value("type", "") == "text"))
        unsupported("response_format");
    for (const char* name : {"guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"})
        if (const json* f = field(body, name); f && !f->is_null()) unsupported(name);
    if (endpoint == Endpoint::COMPLETIONS) {
        if (const json* f = field(body, "suffix"); f && !(f->is_string() && f->get<std::string>().empty()))
            unsupported("suffix");
        if (const auto best_of = get_integer(body, "best_of"); best_of && *best_of != get_int(body, "n", 1))
            unsupported("best_of");
    } else {
        for (const char* name : {"tools", "functions"})
            if (const json* f = field(body, name); f && !(f->is_array() && f->empty())) unsupported(name);
        // Without tools, "none" and "auto" both mean a plain answer; "required" or a named function cannot be met.
        for (const char* name : {"tool_choice", "function_call"})
            if (const json* f = field(body, name); f && !f->is_null() && !(f->is_string() && (*f == "none" || *f == "auto")))
                throw ApiError(400, std::string(name) + " asks for a tool call, and kvscope serve supports no tools", name);
        // vLLM too refuses a template sent with the request unless its server trusts them.
        if (const json* f = field(body, "chat_template"); f && !f->is_null())
            throw ApiError(400, "chat_template in a request is not supported: the model's own template is used", "chat_template");
    }
}

std::vector<int32_t> token_ids(const json& list, const std::string& name, const Model& model, size_t max_len) {
    if (list.size() > max_len)
        throw ApiError(400, name + " has " + std::to_string(list.size()) + " token ids; at most " + std::to_string(max_len) +
                                " fit", name.substr(0, name.find('[')));
    std::vector<int32_t> ids;
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string at = name + "[" + std::to_string(i) + "]";
        const int64_t id = as_integer(list[i], at);
        if (id < 0 || id >= model.config.vocab_size)
            throw ApiError(400, at + ": token id " + std::to_string(id) + " is outside the vocabulary (" +
                                    std::to_string(model.config.vocab_size) + " tokens)", name.substr(0, name.find('[')));
        ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
}

std::vector<int32_t> encode_bounded(const std::string& text, const std::string& name, const Model& model,
                                    const PromptBounds& bounds) {
    if (static_cast<int64_t>(text.size()) > bounds.max_prompt_bytes)
        throw ApiError(400, name + " has " + std::to_string(text.size()) + " bytes, more than " +
                                std::to_string(bounds.max_model_len) + " tokens (max_model_len) can hold; at most " +
                                std::to_string(bounds.max_prompt_bytes) + " bytes are read (--max-prompt-bytes)",
                       name.substr(0, name.find('[')));
    return model.tokenizer.encode(text, true);
}

// prompt: a string, a list of token ids, a list of strings, or a list of token id lists. texts: each prompt's
// string, or nullopt for ids.
std::vector<std::vector<int32_t>> completion_prompts(const json& body, const Model& model, const PromptBounds& bounds,
                                                     std::vector<std::optional<std::string>>& texts) {
    const json* p = field(body, "prompt");
    if (!p) throw ApiError(400, "prompt is required", "prompt");
    const size_t max_ids = static_cast<size_t>(bounds.max_model_len);
    if (p->is_string()) {
        texts = {p->get<std::string>()};
        return {encode_bounded(*texts[0], "prompt", model, bounds)};
    }
    if (!p->is_array() || p->empty())
        throw ApiError(400, "prompt must be a string, a list of token ids, or a non-empty list of those", "prompt");
    if ((*p)[0].is_number()) {
        texts = {std::nullopt};
        return {token_ids(*p, "prompt", model, max_ids)};
    }
    std::vector<std::vector<int32_t>> prompts;
    texts.clear();
    for (size_t i = 0; i < p->size(); ++i) {
        const json& item = (*p)[i];
        const std::string at = "prompt[" + std::to_string(i) + "]";
        if (item.is_string()) {
            prompts.push_back(encode_bounded(item.get_ref<const std::string&>(), at, model, bounds));
            texts.push_back(item.get<std::string>());
        } else if (item.is_array()) {
            prompts.push_back(token_ids(item, at, model, max_ids));
            texts.push_back(std::nullopt);
        } else {
            throw ApiError(400, at + " must be a string or a list of token ids", "prompt");
        }
    }
    return prompts;
}

// A message's content: a string, or text parts joined by newlines as vLLM joins them. `at` names the
// message in errors.
std::string message_text(const json& c, const std::string& at) {
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) throw ApiError(400, at + ".content must be a string or a list of text parts", at + ".content");
    std::string content;
    for (size_t j = 0; j < c.size(); ++j) {
        const json& part = c[j];
        const std::string pat = at + ".content[" + std::to_string(j) + "]";
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
            throw ApiError(400, pat + " must be {\"type\": \"text\", \"text\": ...}; other parts are not supported", pat);
        if (j) content += "\n";
        content += part["text"].get<std::string>();
    }
    return content;
}

// What makes a body too costly to parse, before the parser sees it: arrays and objects nested deeper than
// the limit (the parser recurses), or more of them than the limit; "" when neither. Counted outside strings,
// in one pass over the bytes, before the parser builds anything: a body nested 100,000 deep is refused at
// once. (A parse callback did this before; nlohmann 3.11's callback parser then scans a container's
// elements again each time one of its objects ends, so a body of many small objects took quadratic time:
// 4 s of a core for 160,000 of them.) Malformed text is left to the parser, which names where it fails.
std::string json_shape_problem(std::string_view text, const RequestLimits& limits) {
    int depth = 0;
    int64_t containers = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;  // the escaped character cannot end the string
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limits.max_json_depth)
                return "the JSON body nests deeper than " + std::to_string(limits.max_json_depth) + " levels (--max-json-depth)";
            if (++containers > limits.max_json_containers)
                return "the JSON body has more than " + std::to_string(limits.max_json_containers) +
                       " arrays and objects (--max-json-containers)";
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return {};
}

}  // namespace

std::vector<int32_t> chat_prompt(const json& body, const Model& model, const PromptBounds& bounds) {
    ChatRenderOptions options;
    options.add_generation_prompt = get_bool(body, "add_generation_prompt", true);
    options.continue_final_message = get_bool(body, "continue_final_message", false);
    if (options.continue_final_message && options.add_generation_prompt)
        throw ApiError(400, "continue_final_message needs \"add_generation_prompt\": false (both cannot be true)",
                       "continue_final_message");
    // Other template variables are ignored, as by templates that do not read them.
    if (const json* kwargs = field(body, "chat_template_kwargs")) {
        if (!kwargs->is_object()) throw ApiError(400, "chat_template_kwargs must be an object", "chat_template_kwargs");
        if (field(*kwargs, "enable_thinking")) options.enable_thinking = get_bool(*kwargs, "enable_thinking", true);
    }
    const json* m = field(body, "messages");
    if (!m || !m->is_array() || m->empty()) throw ApiError(400, "messages must be a non-empty list", "messages");
    std::vector<ChatMessage> messages;
    int64_t content_bytes = 0;
    for (size_t i = 0; i < m->size(); ++i) {
        const std::string at = "messages[" + std::to_string(i) + "]";
        const json& msg = (*m)[i];
        if (!msg.is_object()) throw ApiError(400, at + " must be an object", at);
        const json* role = field(msg, "role");
        if (!role || !role->is_string()) throw ApiError(400, at + ".role must be a string", at + ".role");
        std::string r = role->get<std::string>();
        if (r == "developer") r = "system";
        if (r != "system" && r != "user" && r != "assistant")
            throw ApiError(400, at + ".role " + shown(*role) + " is not supported (system, user, assistant)", at + ".role");
        const json* c = field(msg, "content");
        if (!c && r != "assistant") throw ApiError(400, at + ".content is required", at + ".content");
        std::string content = c ? message_text(*c, at) : std::string();
        content_bytes += static_cast<int64_t>(content.size());
        if (content_bytes > bounds.max_prompt_bytes)  // before the template copies it all again
            throw ApiError(400, "messages have more than " + std::to_string(bounds.max_prompt_bytes) + " bytes of content, more than " +
                                    std::to_string(bounds.max_model_len) + " tokens (max_model_len) can hold (--max-prompt-bytes)",
                           "messages");
        messages.push_back({r, std::move(content)});
    }
    std::string text;
    try {
        text = model.chat_template.render(messages, options);
    } catch (const BadInput& e) {
        throw ApiError(400, e.what(), "continue_final_message");
    }
    if (static_cast<int64_t>(text.size()) > bounds.max_prompt_bytes)
        throw ApiError(400, "the rendered conversation has " + std::to_string(text.size()) + " bytes, more than " +
                                std::to_string(bounds.max_model_len) + " tokens (max_model_len) can hold (--max-prompt-bytes)",
                       "messages");
    return model.tokenizer.encode(text, !model.chat_template.renders_bos());
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string dump(const ResponseJson& j) { return j.dump(-1, ' ', false, ResponseJson::error_handler_t::replace); }

json parse_json_body(std::string_view body, const RequestLimits& limits) {
    if (const std::string problem = json_shape_problem(body, limits); !problem.empty()) throw ApiError(400, problem);
    try {
        return json::parse(body);
    } catch (const json::exception& e) {  // a syntax error, or a number past double's range (1e400)
        // The library's message quotes the token it stopped at, which may be megabytes long.
        std::string what = e.what();
        // Without the library's tag ("[json.exception.parse_error.101] "): the client needs where and why.
        if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos) what.erase(0, what.find("] ") + 2);
        if (what.size() > 200) what = what.substr(0, 197) + "...";
        throw ApiError(400, "invalid JSON body: " + what);  // invalid UTF-8 in it is replaced when the error is written
    }
}

int64_t max_prompt_bytes(const RequestLimits& limits, const Tokenizer& tokenizer, int max_model_len) {
    if (limits.max_prompt_bytes > 0) return limits.max_prompt_bytes;
    size_t longest = 1;
    for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
        longest = std::max({longest, tokenizer.token_to_bytes(id).size(), tokenizer.piece(id).size()});
    return static_cast<int64_t>(max_model_len) * static_cast<int64_t>(longest) * 2;
}

std::string openai_error_body(int status, std::string_view message, std::string_view param, std::string_view code) {
    ResponseJson e;  // OpenAI's order
    e["message"] = message;
    e["type"] = status >= 500 ? "server_error" : "invalid_request_error";
    e["param"] = param.empty() ? ResponseJson(nullptr) : ResponseJson(param);
    e["code"] = code.empty() ? ResponseJson(status) : ResponseJson(code);
    return dump(ResponseJson{{"error", e}});
}

GenerationJob parse_generation_request(Endpoint endpoint, const json& body, const Model& model, int max_model_len,
                                       const RequestLimits& limits, int64_t prompt_byte_cap) {
    if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
    GenerationJob job;
    job.endpoint = endpoint;
    const bool chat = endpoint == Endpoint::CHAT;
    if (const json* m = field(body, "model")) {
        if (!m->is_string()) throw ApiError(400, "model must be a string", "model");
        job.model = m->get<std::string>();
    }
    reject_unsupported(body, endpoint);

    SamplingParams& p = job.params;
    p.temperature = get_float(body, "temperature", 1.0);
    p.top_p = get_float(body, "top_p", 1.0);
    p.top_k = get_int(body, "top_k", 0);
    if (p.top_k == -1) p.top_k = 0;  // vLLM: -1 disables top-k
    p.min_p = get_float(body, "min_p", 0.0);
    p.presence_penalty = get_float(body, "presence_penalty", 0.0);
    p.frequency_penalty = get_float(body, "frequency_penalty", 0.0);
    p.repetition_penalty = get_float(body, "repetition_penalty", 1.0);
    if (const auto seed = get_integer(body, "seed")) p.seed = static_cast<uint64_t>(*seed);
    p.stop = get_stop(body, limits);
    p.logit_bias = get_logit_bias(body, model, limits);
    if (const json* ids = field(body, "stop_token_ids")) {
        if (!ids->is_array()) throw ApiError(400, "stop_token_ids must be a list of token ids", "stop_token_ids");
        p.stop_token_ids = token_ids(*ids, "stop_token_ids", model, static_cast<size_t>(limits.max_logit_bias));
    }
    p.ignore_eos = get_bool(body, "ignore_eos", false);
    p.include_stop_str_in_output = get_bool(body, "include_stop_str_in_output", false);
    p.min_tokens = get_int(body, "min_tokens", 0);
    p.n = get_int(body, "n", 1);
    p.logprobs = get_logprobs(body, endpoint);
    // Chat's prompt is the rendered template's token ids: its log-probabilities come the same way.
    if (const int k = get_int(body, "prompt_logprobs", -1); k != -1) job.prompt_logprobs = k;  // -1: off
    p.prompt_logprobs = job.prompt_logprobs;
    job.echo = get_bool(body, "echo", false);
    if (!chat && job.echo && p.logprobs) p.prompt_logprobs = std::max(p.prompt_logprobs.value_or(0), *p.logprobs);
    job.priority = get_int(body, "priority", 0);
    // vLLM's cache_salt: requests share prefix-cache blocks only with requests of the same salt.
    if (const json* salt = field(body, "cache_salt"); salt && !salt->is_null()) {
        if (!salt->is_string() || salt->get_ref<const std::string&>().empty())
            throw ApiError(400, "cache_salt must be a non-empty string", "cache_salt");
        if (salt->get_ref<const std::string&>().size() > kMaxCacheSaltBytes)
            throw ApiError(400, "cache_salt has more than " + std::to_string(kMaxCacheSaltBytes) + " bytes", "cache_salt");
        job.cache_salt = salt->get<std::string>();
    }
    job.stream = get_bool(body, "stream", false);
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) throw ApiError(400, "stream_options must be an object", "stream_options");
        // As OpenAI and vLLM refuse it: the options say how to stream, so without a stream they are a mistake.
        if (!job.stream) throw ApiError(400, "stream_options can only be set with \"stream\": true", "stream_options");
        job.include_usage = get_bool(*so, "include_usage", false);
        job.continuous_usage = job.include_usage && get_bool(*so, "continuous_usage_stats", false);  // as vLLM
    }

    // The choices bound first: it is known before any prompt is tokenized.
    const json* prompt_list = chat ? nullptr : field(body, "prompt");
    const size_t num_prompts =
        prompt_list && prompt_list->is_array() && !prompt_list->empty() && !(*prompt_list)[0].is_number() ? prompt_list->size() : 1;
    if (p.n >= 1 && num_prompts * static_cast<size_t>(p.n) > static_cast<size_t>(limits.max_choices))
        throw ApiError(400, "too many choices: " + std::to_string(num_prompts) + " prompts x n " + std::to_string(p.n) +
                                " exceeds " + std::to_string(limits.max_choices) + " (--max-choices)", "n");

    const PromptBounds bounds{max_model_len, prompt_byte_cap};
    if (chat) {
        job.prompts.push_back(chat_prompt(body, model, bounds));
        // vLLM's chat echo: an answer opens with the last message where that is the assistant's (the one
        // continue_final_message goes on with).
        const json& last = body["messages"].back();
        const json* content = field(last, "content");
        if (job.echo && last["role"] == "assistant" && content)
            job.prompt_texts.push_back(message_text(*content, "messages[" + std::to_string(body["messages"].size() - 1) + "]"));
    } else {
        job.prompts = completion_prompts(body, model, bounds, job.prompt_texts);
    }
    const char* prompt_field = chat ? "messages" : "prompt";
    size_t longest = 0;
    for (const auto& prompt : job.prompts) {
        if (prompt.empty()) throw ApiError(400, std::string(prompt_field) + " is empty (no tokens)", prompt_field);
        longest = std::max(longest, prompt.size());
    }
    if (longest >= static_cast<size_t>(max_model_len))
        throw ApiError(400, "this model's maximum context length is " + std::to_string(max_model_len) +
                                " tokens, but the " + (chat ? "conversation" : "prompt") + " has " + std::to_string(longest) +
                                " tokens (at least one token must be generated)", prompt_field);

    // max_tokens: completions default to 16 (OpenAI); chat to whatever still fits the context.
    const char* max_field = "max_tokens";
    std::optional<int64_t> max_tokens = get_integer(body, "max_tokens");
    if (chat && field(body, "max_completion_tokens")) {
        max_field = "max_completion_tokens";
        max_tokens = get_integer(body, "max_completion_tokens");
    }
    if (!max_tokens) max_tokens = chat ? max_model_len - static_cast<int64_t>(longest) : 16;
    // vLLM's prompt scoring (lm-eval's loglikelihood asks it so): completions with echo and max_tokens 0
    // return the prompt alone, with its logprobs; one token is generated and not shown.
    if (!chat && job.echo && *max_tokens == 0) {
        job.echo_only = true;
        max_tokens = 1;
    }
    if (*max_tokens < 1) throw ApiError(400, std::string(max_field) + " must be >= 1, got " + std::to_string(*max_tokens), max_field);
    if (static_cast<int64_t>(longest) + *max_tokens > max_model_len)
        throw ApiError(400, "this model's maximum context length is " + std::to_string(max_model_len) + " tokens, but " +
                                std::to_string(longest + *max_tokens) + " were requested (" + std::to_string(longest) +
                                " in the " + prompt_field + ", " + std::to_string(*max_tokens) + " in " + max_field +
                                "); lower " + max_field, max_field);
    p.max_tokens = static_cast<int>(*max_tokens);

    try {
        p.validate();
    } catch (const BadInput& e) {
        // "invalid sampling parameter: top_p must be in (0, 1], got 2": the field is the first word.
        std::string message = e.what();
        const std::string prefix = "invalid sampling parameter: ";
        std::string param;
        if (message.starts_with(prefix)) param = message.substr(prefix.size(), message.find(' ', prefix.size()) - prefix.size());
        throw ApiError(400, message, param);
    }
    return job;
}

ResponseJson finish_reason_json(const ChoiceState& choice) {
    if (!choice.finished) return nullptr;
    return std::string(to_string(choice.finish_reason));
}

ResponseJson usage_json(const Usage& usage) {
    ResponseJson out = {{"prompt_tokens", usage.prompt_tokens},
                        {"completion_tokens", usage.completion_tokens},
                        {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
    if (usage.cached_tokens) out["prompt_tokens_details"] = {{"cached_tokens", *usage.cached_tokens}};
    return out;
}

namespace {

// JSON numbers have no -inf: a banned token's log-probability goes out as the lowest float (vLLM's choice).
float logprob_number(float lp) { return std::isfinite(lp) ? lp : std::numeric_limits<float>::lowest(); }

// A completions top_logprobs entry as vLLM makes it: the token itself, then the top K best first (so K + 1
// entries where the token is not among them; logprobs 0 gives the token alone).
ResponseJson completion_top(const Tokenizer& tokenizer, int32_t token, float logprob,
                            std::span<const std::pair<int32_t, float>> top) {
    ResponseJson out = ResponseJson::object();
    out[tokenizer.token_to_bytes(token)] = logprob_number(logprob);
    for (const auto& [id, lp] : top)
        if (const std::string& key = tokenizer.token_to_bytes(id); !out.contains(key)) out[key] = logprob_number(lp);
    return out;
}

ResponseJson head_json(const ResponseHead& head, const char* object) {
    return {{"id", head.id}, {"object", object}, {"created", head.created}, {"model", head.model}};
}

}  // namespace

int64_t text_offset_length(std::string_view text) {
    int64_t n = 0;
    for (size_t pos = 0; pos < text.size(); pos += utf8_scan(text, pos).length) ++n;
    return n;
}

ResponseJson logprobs_json(Endpoint endpoint, const Tokenizer& tokenizer, std::span<const TokenLogprobs> logprobs,
                   int64_t text_offset) {
    auto bytes = [](const std::string& b) {
        ResponseJson a = ResponseJson::array();
        for (unsigned char c : b) a.push_back(static_cast<int>(c));
        return a;
    };
    auto number = logprob_number;
    if (endpoint == Endpoint::CHAT) {
        ResponseJson content = ResponseJson::array();
        for (const TokenLogprobs& l : logprobs) {
            const std::string& b = tokenizer.token_to_bytes(l.token_id);
            ResponseJson top = ResponseJson::array();
            for (const auto& [id, lp] : l.top) {
                const std::string& tb = tokenizer.token_to_bytes(id);
                top.push_back({{"token", tb}, {"logprob", number(lp)}, {"bytes", bytes(tb)}});
            }
            content.push_back({{"token", b}, {"logprob", number(l.logprob)}, {"bytes", bytes(b)}, {"top_logprobs", std::move(top)}});
        }
        return {{"content", std::move(content)}, {"refusal", nullptr}};
    }
    ResponseJson tokens = ResponseJson::array(), token_logprobs = ResponseJson::array(), top_logprobs = ResponseJson::array(), offsets = ResponseJson::array();
    for (const TokenLogprobs& l : logprobs) {
        const std::string& b = tokenizer.token_to_bytes(l.token_id);
        tokens.push_back(b);
        token_logprobs.push_back(number(l.logprob));
        top_logprobs.push_back(completion_top(tokenizer, l.token_id, l.logprob, l.top));
        offsets.push_back(text_offset);
        text_offset += text_offset_length(b);
    }
    return {{"tokens", std::move(tokens)},
            {"token_logprobs", std::move(token_logprobs)},
            {"top_logprobs", std::move(top_logprobs)},
            {"text_offset", std::move(offsets)}};
}

ResponseShape response_shape(const GenerationJob& job) {
    return {job.params.logprobs, job.prompt_logprobs, job.echo, job.echo_only};
}

EchoedPrompt echo_prompt(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                         std::span<const TokenLogprobs> prompt_logprobs, std::optional<int> num_top,
                         const std::optional<std::string>& prompt_text) {
    EchoedPrompt out;
    IncrementalDetokenizer detokenizer(tokenizer);
    ResponseJson tokens = ResponseJson::array(), token_logprobs = ResponseJson::array(), top_logprobs = ResponseJson::array(), offsets = ResponseJson::array();
    for (size_t j = 0; j < prompt.size(); ++j) {
        tokens.push_back(tokenizer.token_to_bytes(prompt[j]));
        offsets.push_back(text_offset_length(out.text));  // characters of the text so far
        out.text += detokenizer.push(prompt[j]);
        if (j == 0 || j > prompt_logprobs.size() || !num_top) {
            token_logprobs.push_back(nullptr);
            top_logprobs.push_back(nullptr);
            continue;
        }
        const TokenLogprobs& l = prompt_logprobs[j - 1];
        token_logprobs.push_back(logprob_number(l.logprob));
        top_logprobs.push_back(completion_top(tokenizer, prompt[j], l.logprob,
                                              std::span(l.top).first(std::min(l.top.size(), static_cast<size_t>(*num_top)))));
    }
    out.text += detokenizer.flush();
    if (prompt_text) out.text = *prompt_text;
    out.text_offset_end = text_offset_length(out.text);
    if (num_top)
        out.logprobs = {{"tokens", std::move(tokens)},
                        {"token_logprobs", std::move(token_logprobs)},
                        {"top_logprobs", std::move(top_logprobs)},
                        {"text_offset", std::move(offsets)}};
    return out;
}

void append_logprobs(ResponseJson& into, const ResponseJson& more) {
    for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
        for (const ResponseJson& v : more.at(key)) into[key].push_back(v);
}

ResponseJson prompt_logprobs_json(const Tokenizer& tokenizer, std::span<const TokenLogprobs> prompt_logprobs, int num_top) {
    ResponseJson out = ResponseJson::array({nullptr});
    for (const TokenLogprobs& l : prompt_logprobs) {
        ResponseJson entry = ResponseJson::object();
        auto add = [&](int32_t id, float lp, int rank) {
            entry[std::to_string(id)] = {{"logprob", logprob_number(lp)}, {"rank", rank},
                                         {"decoded_token", tokenizer.token_to_bytes(id)}};
        };
        for (size_t k = 0; k < l.top.size() && k < static_cast<size_t>(num_top); ++k)
            add(l.top[k].first, l.top[k].second, static_cast<int>(k) + 1);
        add(l.token_id, l.logprob, l.rank);
        out.push_back(std::move(entry));
    }
    return out;
}

ResponseJson& prompt_logprobs_place(Endpoint endpoint, ResponseJson& response, ResponseJson& choice) {
    return endpoint == Endpoint::CHAT ? response["prompt_logprobs"] : choice["prompt_logprobs"];
}

ResponseJson generation_response(Endpoint endpoint, const ResponseHead& head, const std::vector<ChoiceState>& choices,
                         const Usage& usage, const Tokenizer& tokenizer, const ResponseShape& shape) {
    const bool chat = endpoint == Endpoint::CHAT;
    ResponseJson out = head_json(head, chat ? "chat.completion" : "text_completion");
    ResponseJson list = ResponseJson::array();
    for (size_t i = 0; i < choices.size(); ++i) {
        const ChoiceState& c = choices[i];
        ResponseJson choice = {{"index", i}};
        if (chat) choice["message"] = {{"role", "assistant"}, {"content", (shape.echo ? c.prompt_text.value_or("") : "") + c.text}};
        ResponseJson logprobs = nullptr;
        if (shape.echo && !chat) {
            EchoedPrompt echo = echo_prompt(tokenizer, c.prompt_token_ids, c.prompt_logprobs, shape.logprobs, c.prompt_text);
            choice["text"] = echo.text + (shape.echo_only ? "" : c.text);
            logprobs = std::move(echo.logprobs);
            if (shape.logprobs && !shape.echo_only)
                append_logprobs(logprobs, logprobs_json(endpoint, tokenizer, c.logprobs, echo.text_offset_end));
        } else {
            if (!chat) choice["text"] = c.text;
            if (shape.logprobs) logprobs = logprobs_json(endpoint, tokenizer, c.logprobs);
        }
        choice["logprobs"] = std::move(logprobs);
        if (shape.prompt_logprobs && (!chat || i == 0))  // chat's choices share one prompt: the response has it once
            prompt_logprobs_place(endpoint, out, choice) =
                prompt_logprobs_json(tokenizer, c.prompt_logprobs, *shape.prompt_logprobs);
        choice["finish_reason"] = finish_reason_json(c);
        choice["stop_reason"] = c.stop_reason;
        list.push_back(std::move(choice));
    }
    out["choices"] = std::move(list);
    out["usage"] = usage_json(usage);
    return out;
}

ResponseJson stream_chunk(Endpoint endpoint, const ResponseHead& head, size_t index, const std::string& delta,
                  const ChoiceState& choice, bool role_only, ResponseJson logprobs) {
    const bool chat = endpoint == Endpoint::CHAT;
    ResponseJson out = head_json(head, chat ? "chat.completion.chunk" : "text_completion");
    ResponseJson c = {{"index", index}};
    if (chat) {
        ResponseJson d = ResponseJson::object();
        if (role_only) {
            d["role"] = "assistant";
            d["content"] = "";
        } else if (!delta.empty()) {
            d["content"] = delta;
        }
        c["delta"] = std::move(d);
    } else {
        c["text"] = delta;
    }
    c["logprobs"] = std::move(logprobs);
    c["finish_reason"] = role_only ? ResponseJson(nullptr) : finish_reason_json(choice);
    if (!role_only && choice.finished) c["stop_reason"] = choice.stop_reason;
    out["choices"] = ResponseJson::array({std::move(c)});
    return out;
}

ResponseJson stream_usage_chunk(Endpoint endpoint, const ResponseHead& head, const Usage& usage) {
    ResponseJson out = head_json(head, endpoint == Endpoint::CHAT ? "chat.completion.chunk" : "text_completion");
    out["choices"] = ResponseJson::array();
    out["usage"] = usage_json(usage);
    return out;
}

}  // namespace kvscope::cli
