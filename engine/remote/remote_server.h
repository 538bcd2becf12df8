// What a benchmark asks a remote engine before it runs: which engine it is (/version, /v1/models, the
// metric families of /metrics) and, when no local tokenizer is given, the server's own tokenizer
// (vLLM's POST /tokenize and /detokenize, which kvscope serve, SGLang and llama-server also have).
// Blocking calls on the caller's thread, made before the timed run starts.
#pragma once

#include "remote/http_client.h"
#include "remote/server_metrics.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope {

// /version's "engine" field, else /v1/models' owned_by, else the metric families of /metrics; UNKNOWN
// when none names one.
ServerEngine detect_remote_engine(HttpClient& client);

// The served model names of /v1/models (empty when the server does not answer it).
std::vector<std::string> served_model_names(HttpClient& client);
// The same, for someone who must know why there are none: throws BadInput naming the URL and what
// came back (connection refused, HTTP 401 with the server's message, 404, not an OpenAI model list).
// A server that does not answer at all throws Unreachable instead.
std::vector<std::string> list_served_models(HttpClient& client);
// The model a client should name: `model`, or the first served one when empty. Throws as
// list_served_models does, and BadInput naming the served ones when `model` is not among them
// (llama-server answers any name, so a typo would otherwise run against its one model unnoticed).
// `names`, when given, receives the served names.
std::string check_served_model(HttpClient& client, const std::string& model, std::vector<std::string>* names = nullptr);

class ServerTokenizer {
public:
    ServerTokenizer(HttpClient& client, std::string model) : client_(client), model_(std::move(model)) {}
    // Token ids of `text` without special tokens; throws BadInput naming the endpoint when the server
    // has no usable /tokenize.
    std::vector<int32_t> tokenize(const std::string& text);
    std::string detokenize(const std::vector<int32_t>& ids);

private:
    HttpClient& client_;
    std::string model_;
};

// The distinct token ids of a fixed English text, tokenized by the server: ordinary tokens (no BOS,
// EOS or control) to draw random prompts from when only the server knows the vocabulary.
std::vector<int32_t> server_vocabulary_sample(ServerTokenizer& tokenizer);

}  // namespace kvscope
