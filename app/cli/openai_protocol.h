// The OpenAI wire format of kvscope-cli serve: request bodies of /v1/completions and
// /v1/chat/completions parsed and validated into a GenerationJob (on the connection thread, before the
// engine sees anything), and the JSON of responses and stream chunks. Invalid fields raise ApiError
// naming the field; the server answers it as HTTP 400.
#pragma once

#include "model/model.h"
#include "sched/request.h"
#include "sched/sampling_params.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvscope::cli {

struct ApiError : std::runtime_error {
    ApiError(int status, const std::string& message, std::string param = {})
        : std::runtime_error(message), status(status), param(std::move(param)) {}
    int status;
    std::string param;  // the offending field ("max_tokens", "messages[1].role"), or ""
};

enum class Endpoint { COMPLETIONS, CHAT };

// One validated request: its prompts as token ids and how to sample them.
struct GenerationJob {
    Endpoint endpoint = Endpoint::COMPLETIONS;
    std::string model;  // as requested; "" when absent
    std::vector<std::vector<int32_t>> prompts;  // completions may batch several; chat has one
    SamplingParams params;
    int priority = 0;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
};

// body: the parsed JSON body. max_model_len bounds prompt + max_tokens. Throws ApiError.
GenerationJob parse_generation_request(Endpoint endpoint, const nlohmann::json& body, const Model& model,
                                       int max_model_len);

// What one choice (a prompt x sample) produced so far.
struct ChoiceState {
    std::string text;
    int num_tokens = 0;
    bool finished = false;
    FinishReason finish_reason = FinishReason::NONE;
};

// OpenAI's finish_reason: "stop", "length", "abort" (vLLM's word), "error"; null while unfinished.
nlohmann::json finish_reason_json(const ChoiceState& choice);

struct ResponseHead {
    std::string id;  // cmpl-... / chatcmpl-...
    int64_t created = 0;
    std::string model;
};

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
// The whole non-streaming response.
nlohmann::json generation_response(Endpoint endpoint, const ResponseHead& head, const std::vector<ChoiceState>& choices,
                                   int64_t prompt_tokens);
// One stream chunk for choice `index`: text delta and, once finished, the finish reason. For chat,
// role_only makes the opening chunk {"role": "assistant", "content": ""}.
nlohmann::json stream_chunk(Endpoint endpoint, const ResponseHead& head, size_t index, const std::string& delta,
                            const ChoiceState& choice, bool role_only = false);
// The last chunk with stream_options.include_usage: no choices, the usage.
nlohmann::json stream_usage_chunk(Endpoint endpoint, const ResponseHead& head, int64_t prompt_tokens,
                                  int64_t completion_tokens);

// JSON text with invalid UTF-8 replaced (the engine streams only whole characters; this is a guard).
std::string dump(const nlohmann::json& j);

}  // namespace kvscope::cli
