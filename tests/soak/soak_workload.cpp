#include "soak_workload.h"

#include "raw_socket.h"

#include <algorithm>

namespace kvscope::soak {

namespace {

using nlohmann::json;

// Shared prompt prefixes: most prompts start with one of these, so that full blocks of them are found
// in the prefix cache (when it is on) by later requests.
const char* const kPrefixes[] = {
    "Once upon a time, there was a little girl named Lily. She loved to play in the park with her big red ball.",
    "One day, a boy named Tom went to the beach with his mom and dad. The sun was hot and the sky was blue.",
    "There was a small dog who lived in a house near the forest. Every morning he ran to the river to drink.",
    "The cat sat on the mat and looked at the bird in the tree. It wanted to play, but the bird flew away.",
};

const char* const kWords[] = {"the",  "a",     "little", "dog",   "cat",  "girl",   "boy",  "ran",   "saw",
                              "happy", "big",  "tree",   "park",  "sun",  "played", "with", "ball",  "and",
                              "friend", "home", "said",  "mom",   "day",  "very",   "red",  "jumped", "sky"};

const char* const kStops[] = {".", " the", "\n", "and", "!", "Lily"};

bool chance(std::mt19937_64& rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

int uniform(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

template <class T, size_t N>
const T& pick(std::mt19937_64& rng, const T (&items)[N]) {
    return items[static_cast<size_t>(uniform(rng, 0, static_cast<int>(N) - 1))];
}

}  // namespace

Workload::Workload(const Model& model, std::string served_name, int max_model_len, uint64_t seed, WorkloadMix mix)
    : model_(model), served_name_(std::move(served_name)), max_model_len_(max_model_len), seed_(seed), mix_(mix) {
    for (const char* p : kPrefixes) prefix_ids_.push_back(model_.tokenizer.encode(p, true));
}

std::string Workload::words(std::mt19937_64& rng, int min_words, int max_words) const {
    std::string out;
    const int n = uniform(rng, min_words, max_words);
    for (int i = 0; i < n; ++i) out += (i ? " " : "") + std::string(pick(rng, kWords));
    return out;
}

std::string Workload::prompt_text(std::mt19937_64& rng) const {
    if (chance(rng, 0.8)) return std::string(pick(rng, kPrefixes)) + " " + words(rng, 1, 12);
    return words(rng, 2, 20);
}

int Workload::chat_prompt_tokens(const json& messages) const {
    // As the server tokenizes a conversation (app/serve/openai_protocol.cpp chat_prompt).
    std::vector<ChatMessage> list;
    for (const json& m : messages) {
        std::string content;
        const json& c = m["content"];
        if (c.is_string()) {
            content = c.get<std::string>();
        } else {
            for (size_t j = 0; j < c.size(); ++j) content += (j ? "\n" : "") + c[j]["text"].get<std::string>();
        }
        list.push_back({m["role"].get<std::string>(), content});
    }
    const std::string text = model_.chat_template.render(list, true);
    return static_cast<int>(model_.tokenizer.encode(text, !model_.chat_template.renders_bos()).size());
}

SoakRequest Workload::make(uint64_t index) const {
    std::seed_seq seq{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32), static_cast<uint32_t>(index),
                      static_cast<uint32_t>(index >> 32)};
    std::mt19937_64 rng(seq);
    SoakRequest r = chance(rng, mix_.invalid) ? invalid_request(rng) : valid_request(rng);
    r.index = index;
    r.label = "#" + std::to_string(index) + " " + r.label;
    return r;
}

SoakRequest Workload::valid_request(std::mt19937_64& rng) const {
    SoakRequest r;
    const bool chat = chance(rng, mix_.chat);
    r.stream = chance(rng, mix_.stream);
    json body = json::object();
    if (chance(rng, 0.5)) body["model"] = served_name_;

    // The prompt(s), and the longest one's tokens as the server will count them.
    size_t num_prompts = 1;
    int prompt_tokens = 0;
    std::string kind;
    for (int attempt = 0;; ++attempt) {
        const bool short_only = attempt > 0;  // a small max_model_len: fall back to a few words
        if (chat) {
            json messages = json::array();
            if (!short_only && chance(rng, 0.8)) messages.push_back({{"role", "system"}, {"content", pick(rng, kPrefixes)}});
            if (!short_only && chance(rng, 0.2)) {
                messages.push_back({{"role", "user"}, {"content", words(rng, 1, 6)}});
                messages.push_back({{"role", "assistant"}, {"content", words(rng, 1, 6)}});
            }
            if (chance(rng, 0.2))  // content as a list of text parts
                messages.push_back({{"role", "user"},
                                    {"content", json::array({{{"type", "text"}, {"text", words(rng, 1, 4)}},
                                                             {{"type", "text"}, {"text", words(rng, 1, 4)}}})}});
            else
                messages.push_back({{"role", "user"}, {"content", words(rng, 1, short_only ? 3 : 10)}});
            body["messages"] = messages;
            prompt_tokens = chat_prompt_tokens(messages);
            kind = "chat";
        } else {
            const int form = uniform(rng, 0, 9);
            if (short_only) {
                const std::string text = words(rng, 1, 3);
                body["prompt"] = text;
                prompt_tokens = static_cast<int>(model_.tokenizer.encode(text, true).size());
                kind = "completion";
            } else if (form <= 5) {
                const std::string text = prompt_text(rng);
                body["prompt"] = text;
                prompt_tokens = static_cast<int>(model_.tokenizer.encode(text, true).size());
                kind = "completion";
            } else if (form <= 7) {  // token ids: a shared prefix's ids, then random ones
                std::vector<int32_t> ids = prefix_ids_[static_cast<size_t>(uniform(rng, 0, static_cast<int>(prefix_ids_.size()) - 1))];
                const int extra = uniform(rng, 1, 20);
                for (int i = 0; i < extra; ++i) ids.push_back(uniform(rng, 3, model_.config.vocab_size - 1));
                body["prompt"] = ids;
                prompt_tokens = static_cast<int>(ids.size());
                kind = "completion (token ids)";
            } else {  // a batch of prompts: choices = prompts x n
                json list = json::array();
                num_prompts = static_cast<size_t>(uniform(rng, 2, 3));
                prompt_tokens = 0;
                for (size_t p = 0; p < num_prompts; ++p) {
                    const std::string text = prompt_text(rng);
                    list.push_back(text);
                    prompt_tokens = std::max(prompt_tokens, static_cast<int>(model_.tokenizer.encode(text, true).size()));
                }
                body["prompt"] = list;
                kind = "completion x" + std::to_string(num_prompts);
            }
        }
        if (prompt_tokens + 1 < max_model_len_ || attempt >= 1) break;
        body.erase("messages");
        body.erase("prompt");
        num_prompts = 1;
    }

    // max_tokens: mostly short answers, some long ones; prompt + max_tokens within max_model_len.
    const int room = std::max(1, max_model_len_ - prompt_tokens);
    const double roll = std::uniform_real_distribution<double>(0, 1)(rng);
    int max_tokens = roll < 0.3 ? uniform(rng, 1, 4)
                                : roll < 0.8 ? uniform(rng, 5, std::max(5, mix_.max_output_tokens / 2))
                                             : uniform(rng, 1, std::max(1, mix_.max_output_tokens));
    max_tokens = std::min(max_tokens, room);
    body[chat && chance(rng, 0.3) ? "max_completion_tokens" : "max_tokens"] = max_tokens;
    r.max_tokens = max_tokens;

    // Sampling: greedy or random, with the filters and penalties in random mixes.
    if (chance(rng, 0.25)) body["temperature"] = 0;
    else if (chance(rng, 0.7)) body["temperature"] = std::vector<double>{0.5, 0.8, 1.0, 1.3}[static_cast<size_t>(uniform(rng, 0, 3))];
    if (chance(rng, 0.3)) body["top_p"] = std::vector<double>{0.5, 0.9, 0.95}[static_cast<size_t>(uniform(rng, 0, 2))];
    if (chance(rng, 0.3)) body["top_k"] = std::vector<int>{-1, 1, 5, 40}[static_cast<size_t>(uniform(rng, 0, 3))];
    if (chance(rng, 0.1)) body["min_p"] = 0.05;
    if (chance(rng, 0.4)) body["seed"] = uniform(rng, 0, 1 << 30);
    if (chance(rng, 0.1)) body["presence_penalty"] = 0.5;
    if (chance(rng, 0.1)) body["frequency_penalty"] = -0.5;
    if (chance(rng, 0.1)) body["repetition_penalty"] = 1.1;
    if (chance(rng, 0.1)) body["logit_bias"] = {{std::to_string(uniform(rng, 0, model_.config.vocab_size - 1)), uniform(rng, -100, 100)}};
    if (chance(rng, 0.15)) body["ignore_eos"] = true;
    if (chance(rng, 0.1)) body["min_tokens"] = uniform(rng, 0, std::min(4, max_tokens));
    if (chance(rng, 0.3)) {
        json stops = json::array();
        const int n = uniform(rng, 1, 3);
        for (int i = 0; i < n; ++i) stops.push_back(pick(rng, kStops));
        body["stop"] = n == 1 && chance(rng, 0.5) ? stops[0] : stops;
    }
    const double n_roll = std::uniform_real_distribution<double>(0, 1)(rng);
    const int n = n_roll < 0.7 ? 1 : n_roll < 0.85 ? 2 : n_roll < 0.95 ? 3 : 4;
    if (n > 1 || chance(rng, 0.2)) body["n"] = n;
    if (chance(rng, 0.4)) body["priority"] = std::vector<int>{-5, 0, 1, 10}[static_cast<size_t>(uniform(rng, 0, 3))];
    if (r.stream) {
        body["stream"] = true;
        if (chance(rng, 0.5)) {
            body["stream_options"] = {{"include_usage", true}};
            r.include_usage = true;
        }
    }
    r.num_choices = num_prompts * static_cast<size_t>(n);

    if (chance(rng, mix_.disconnect)) {
        r.disconnect = r.stream ? Disconnect::AFTER_FIRST_EVENT : Disconnect::MID_REQUEST;
        r.disconnect_after_ms = uniform(rng, 0, 300);
    }
    r.label = kind + (r.stream ? " stream" : "") + " n=" + std::to_string(n) + " max_tokens=" + std::to_string(max_tokens) +
              (r.disconnect == Disconnect::AFTER_FIRST_EVENT ? " (client leaves after the first event)"
               : r.disconnect == Disconnect::MID_REQUEST ? " (client leaves after " + std::to_string(r.disconnect_after_ms) + " ms)"
                                                         : "");
    r.bytes = test::http_request("POST", chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
    if (r.disconnect == Disconnect::NONE && chance(rng, mix_.keep_alive)) {
        r.keep_alive = true;
        r.bytes.replace(r.bytes.find("Connection: close"), 17, "Connection: keep-alive");
        r.label += " (kept alive)";
    }
    return r;
}

SoakRequest Workload::invalid_request(std::mt19937_64& rng) const {
    SoakRequest r;
    r.valid = false;
    const json base = {{"prompt", words(rng, 1, 5)}, {"max_tokens", 4}};
    auto with = [&](const char* key, json value) {
        json b = base;
        b[key] = std::move(value);
        return b.dump();
    };
    const std::string completions = "/v1/completions";
    std::string path = completions;
    std::string body;
    switch (uniform(rng, 0, 21)) {
    case 0: r.label = "malformed JSON"; body = R"({"prompt": "x", "max_tokens": )"; break;
    case 1: r.label = "temperature -1"; body = with("temperature", -1); break;
    case 2: r.label = "top_p 2"; body = with("top_p", 2); break;
    case 3: r.label = "n 0"; body = with("n", 0); break;
    case 4: r.label = "max_tokens 0"; body = with("max_tokens", 0); break;
    case 5: r.label = "prompt + max_tokens over max_model_len"; body = with("max_tokens", max_model_len_); break;
    case 6: r.label = "token id outside the vocabulary"; body = with("prompt", json::array({1, model_.config.vocab_size + 5})); break;
    case 7:
        r.label = "chat role tool";
        path = "/v1/chat/completions";
        body = json{{"messages", json::array({{{"role", "tool"}, {"content", "x"}}})}, {"max_tokens", 2}}.dump();
        break;
    case 8: r.label = "logprobs (unsupported)"; body = with("logprobs", true); break;
    case 9: r.label = "unknown model"; body = with("model", "no-such-model"); break;
    case 10: r.label = "empty messages"; path = "/v1/chat/completions"; body = R"({"messages": [], "max_tokens": 2})"; break;
    case 11: {
        r.label = "65 stop strings";
        json stops = json::array();
        for (int i = 0; i < 65; ++i) stops.push_back("s" + std::to_string(i));
        body = with("stop", stops);
        break;
    }
    case 12: r.label = "body is a list"; body = "[1, 2, 3]"; break;
    case 13: r.label = "prompt of max_model_len token ids"; body = with("prompt", std::vector<int>(static_cast<size_t>(max_model_len_), 5)); break;
    case 14: r.label = "n 300 (too many choices)"; body = with("n", 300); break;
    case 15: r.label = "stream \"yes\""; body = with("stream", "yes"); break;
    case 16: r.label = "top_k -5"; body = with("top_k", -5); break;
    case 17: r.label = "min_tokens over max_tokens"; body = with("min_tokens", 10); break;
    case 18: r.label = "empty stop string"; body = with("stop", json::array({""})); break;
    case 19: r.label = "GET on a POST route"; r.bytes = test::http_request("GET", completions); break;
    case 20: r.label = "unknown route"; r.bytes = test::http_request("POST", "/v1/nothing", base.dump()); break;
    default:
        if (chance(rng, 0.5)) {
            r.label = "Content-Length over the body limit";
            r.bytes = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                      "Content-Type: application/json\r\nContent-Length: 999999999999\r\n\r\n";
        } else {
            r.label = "gzip body";
            r.bytes = test::http_request("POST", completions, base.dump(), "Content-Encoding: gzip\r\n");
        }
    }
    r.label = "invalid: " + r.label;
    if (r.bytes.empty()) r.bytes = test::http_request("POST", path, body);
    return r;
}

}  // namespace kvscope::soak
