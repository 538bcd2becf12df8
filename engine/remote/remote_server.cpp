#include "remote/remote_server.h"

#include "remote/prometheus_text.h"
#include "remote/server_metrics.h"
#include "util/errors.h"
#include "util/json_number.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <set>

namespace kvscope {

using nlohmann::json;

namespace {

constexpr double kProbeTimeout = 10;  // seconds; these calls come before the run

json json_of(const HttpResponse& r) {
    if (!r.ok()) return json();
    json j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json() : j;
}

ServerEngine engine_of_name(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (s.find("kvscope") != std::string::npos) return ServerEngine::KVSCOPE;
    if (s.find("vllm") != std::string::npos) return ServerEngine::VLLM;
    if (s.find("sglang") != std::string::npos) return ServerEngine::SGLANG;
    if (s.find("llamacpp") != std::string::npos || s.find("llama.cpp") != std::string::npos) return ServerEngine::LLAMACPP;
    if (s.find("tgi") != std::string::npos || s.find("text-generation") != std::string::npos) return ServerEngine::TGI;
    return ServerEngine::UNKNOWN;
}

}  // namespace

ServerEngine detect_remote_engine(HttpClient& client) {
    const json version = json_of(client.get("/version", kProbeTimeout));
    if (version.is_object() && version.contains("engine") && version["engine"].is_string())
        if (ServerEngine e = engine_of_name(version["engine"]); e != ServerEngine::UNKNOWN) return e;
    const json models = json_of(client.get("/v1/models", kProbeTimeout));
    if (models.is_object() && models.contains("data") && models["data"].is_array())
        for (const json& card : models["data"])
            if (card.is_object() && card.contains("owned_by") && card["owned_by"].is_string())
                if (ServerEngine e = engine_of_name(card["owned_by"]); e != ServerEngine::UNKNOWN) return e;
    const HttpResponse metrics = client.get("/metrics", kProbeTimeout);
    return metrics.ok() ? engine_of_metrics(parse_prometheus_text(metrics.body)) : ServerEngine::UNKNOWN;
}

std::vector<std::string> served_model_names(HttpClient& client) {
    std::vector<std::string> names;
    const json models = json_of(client.get("/v1/models", kProbeTimeout));
    if (models.is_object() && models.contains("data") && models["data"].is_array())
        for (const json& card : models["data"])
            if (card.is_object() && card.contains("id") && card["id"].is_string()) names.push_back(card["id"]);
    return names;
}

std::vector<std::string> list_served_models(HttpClient& client) {
    const HttpResponse r = client.get("/v1/models", kProbeTimeout);
    const std::string url = client.endpoint().shown_url("/v1/models");
    if (r.status == 0) throw Unreachable(url + ": " + r.describe());  // no answer: not the input's fault
    if (!r.ok()) {
        std::string why = r.describe();
        if (r.status == 401 || r.status == 403) why += " (the API key is missing or wrong)";
        else if (r.status == 404) why += " (not an OpenAI-compatible server, or the URL has an extra path)";
        throw BadInput(url + ": " + why);
    }
    const json models = json_of(r);
    if (!models.is_object() || !models.contains("data") || !models["data"].is_array())
        throw BadInput(url + ": the answer is not an OpenAI model list: " + body_excerpt(r.body, 120));
    std::vector<std::string> names;
    for (const json& card : models["data"])
        if (card.is_object() && card.contains("id") && card["id"].is_string()) names.push_back(card["id"]);
    if (names.empty()) throw BadInput(url + ": the server lists no model");
    return names;
}

std::string check_served_model(HttpClient& client, const std::string& model, std::vector<std::string>* names) {
    std::vector<std::string> served = list_served_models(client);
    const std::string chosen = model.empty() ? served.front() : model;
    if (std::find(served.begin(), served.end(), chosen) == served.end()) {
        std::string list;
        for (const std::string& n : served) list += (list.empty() ? "" : ", ") + n;
        throw BadInput(client.endpoint().shown_url("/v1/models") + ": the server does not serve '" + chosen + "' (it serves " +
                       list + ")");
    }
    if (names) *names = std::move(served);
    return chosen;
}

std::vector<int32_t> ServerTokenizer::tokenize(const std::string& text) {
    // vLLM and SGLang read "prompt" and add_special_tokens; llama-server reads "content" (and adds no
    // special tokens unless asked). Each ignores the other's field.
    const json body = {{"model", model_}, {"prompt", text}, {"content", text}, {"add_special_tokens", false}};
    const HttpResponse r = client_.post_json("/tokenize", body.dump(), kProbeTimeout);
    const json j = json_of(r);
    if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
        throw BadInput(client_.endpoint().shown_url("/tokenize") + ": the server cannot tokenize (" +
                       (r.ok() ? std::string("no \"tokens\" in the answer") : r.describe()) +
                       "); give a local tokenizer with --tokenizer DIR|FILE");
    std::vector<int32_t> ids;
    for (const json& t : j["tokens"]) {
        // llama-server may answer {"id", "piece"} objects when asked for pieces; plain ids otherwise.
        const json& id = t.is_object() && t.contains("id") ? t["id"] : t;
        if (!id.is_number_integer()) continue;
        // An id no vocabulary has (negative, past int: 2^40 was cut to 0) would go out as a prompt token.
        const auto n = json_integer_in(id, 0, INT32_MAX);
        if (!n)
            throw BadInput(client_.endpoint().shown_url("/tokenize") + ": the server answered token id " + id.dump() +
                           ", which no vocabulary has; give a local tokenizer with --tokenizer DIR|FILE");
        ids.push_back(static_cast<int32_t>(*n));
    }
    return ids;
}

std::string ServerTokenizer::detokenize(const std::vector<int32_t>& ids) {
    const json body = {{"model", model_}, {"tokens", ids}};
    const HttpResponse r = client_.post_json("/detokenize", body.dump(), kProbeTimeout);
    const json j = json_of(r);
    for (const char* key : {"prompt", "content"})  // vLLM, llama-server
        if (j.is_object() && j.contains(key) && j[key].is_string()) return j[key];
    throw BadInput(client_.endpoint().shown_url("/detokenize") + ": the server cannot detokenize (" +
                   (r.ok() ? std::string("no \"prompt\" in the answer") : r.describe()) +
                   "); give a local tokenizer with --tokenizer DIR|FILE");
}

std::vector<int32_t> server_vocabulary_sample(ServerTokenizer& tokenizer) {
    // Common English words and punctuation: any tokenizer splits them into ordinary tokens.
    static const char* const kText =
        "the of and to in is was that for it with as his on be at by he had this not are but from or have an "
        "they which one you were her all she there would their we him been has when who will more no if out so "
        "said what up its about into than them can only other new some could time these two may then do first "
        "any my now such like our over man me even most made after also did many before must through back years "
        "where much your way well down should because each just those people how too little state good very make "
        "world still own see men work long get here between both life being under never day same another know "
        "while last might us great old year off come since against go came right used take three, small. large; "
        "house: (light) water? number! 1 2 3 4 5 6 7 8 9 10 100 story once upon a girl boy dog cat tree sun happy";
    std::vector<int32_t> ids = tokenizer.tokenize(kText);
    std::set<int32_t> distinct(ids.begin(), ids.end());
    if (distinct.empty()) throw BadInput("/tokenize: the server returned no tokens for an English sample text");
    return {distinct.begin(), distinct.end()};
}

}  // namespace kvscope
