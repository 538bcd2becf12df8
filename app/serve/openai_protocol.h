// The OpenAI wire format of kvscope-cli serve: request bodies of /v1/completions and
// /v1/chat/completions parsed and validated into a GenerationJob (on the request's thread, before the
// engine sees anything), and the JSON of responses, stream chunks and errors. Invalid fields raise
// ApiError naming the field; the server answers it as HTTP 400. Every limit of RequestLimits is checked
// before the work it bounds (nesting while parsing, prompt bytes before tokenizing), and messages never
// print a user's value at length.
#pragma once

#include "model/model.h"
#include "serve_limits.h"
#include "sched/request.h"
#include "sched/sampling_params.h"
#include "runner/logprobs.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvscope::cli {

// Responses keep their keys in the order written: OpenAI's field order, and a completions top_logprobs
// object in vLLM's order (the sampled token, then the others best first). JSON objects are unordered,
// but Python's and JavaScript's clients keep the order they are sent in.
using ResponseJson = nlohmann::ordered_json;

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
    // What echo repeats. Completions: each prompt's string as sent (nullopt where it came as token ids);
    // chat: the last message where it is the assistant's (vLLM's chat echo), else none.
    std::vector<std::optional<std::string>> prompt_texts;
    SamplingParams params;
    int priority = 0;
    std::string cache_salt;  // "" = none
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool continuous_usage = false;  // and continuous_usage_stats (vLLM's): each chunk carries its choice's usage
    bool echo = false;           // completions: the prompt comes first in the text (and in logprobs); chat: see above
    bool echo_only = false;      // completions, echo with max_tokens 0: the prompt alone (its one token is not shown)
    // vLLM's extension, as asked (chat: of the rendered template's tokens). params.prompt_logprobs is the
    // larger of this and, with echo, logprobs: echo's log-probabilities of the prompt come from the same
    // computation.
    std::optional<int> prompt_logprobs;
};

// What a response shows besides the text, from the job.
struct ResponseShape {
    std::optional<int> logprobs;
    std::optional<int> prompt_logprobs;
    bool echo = false;
    bool echo_only = false;  // GenerationJob::echo_only
};
ResponseShape response_shape(const GenerationJob& job);

// Parses a request body, refusing before it parses one nested deeper than limits.max_json_depth (a deep
// body never reaches anything recursive) or with more than limits.max_json_containers arrays and objects.
// Throws ApiError (400) naming the problem.
nlohmann::json parse_json_body(std::string_view body, const RequestLimits& limits);

// The most prompt bytes that max_model_len tokens of this tokenizer can come from: limits.max_prompt_bytes
// when set, else max_model_len x the longest token's bytes x 2 (normalizers may shrink text).
int64_t max_prompt_bytes(const RequestLimits& limits, const Tokenizer& tokenizer, int max_model_len);

// A salt is a key, not content: longer ones are refused rather than hashed into every first block.
inline constexpr size_t kMaxCacheSaltBytes = 1024;

// Limits that apply while prompts are read, before any tokenizing.
struct PromptBounds {
    int max_model_len = 0;
    int64_t max_prompt_bytes = 0;
};

// A chat request's "messages" rendered by the model's chat template and tokenized: the prompt that
// /v1/chat/completions runs and /tokenize counts, with vLLM's add_generation_prompt (default true),
// continue_final_message and chat_template_kwargs.enable_thinking. Throws ApiError naming the field at fault.
std::vector<int32_t> chat_prompt(const nlohmann::json& body, const Model& model, const PromptBounds& bounds);

// body: the parsed JSON body. max_model_len bounds prompt + max_tokens. Throws ApiError.
GenerationJob parse_generation_request(Endpoint endpoint, const nlohmann::json& body, const Model& model,
                                       int max_model_len, const RequestLimits& limits, int64_t prompt_byte_cap);

// {"error": {"message", "type", "param", "code"}}: OpenAI's error shape, for every error response.
// code: OpenAI's string code where it has one ("invalid_api_key"), else the HTTP status.
std::string openai_error_body(int status, std::string_view message, std::string_view param = {},
                              std::string_view code = {});

// What one choice (a prompt x sample) produced so far.
struct ChoiceState {
    std::string text;
    int num_tokens = 0;
    std::vector<TokenLogprobs> logprobs;  // every generated token's, when the request asked
    std::vector<int32_t> prompt_token_ids;  // for echo and prompt_logprobs
    std::optional<std::string> prompt_text;  // for echo: the prompt as sent, where it came as text
    std::vector<TokenLogprobs> prompt_logprobs;  // prompt tokens 1.. (with the first output, when asked)
    int num_cached_tokens = 0;  // prompt tokens its request took from the prefix cache
    bool finished = false;
    FinishReason finish_reason = FinishReason::NONE;
    ResponseJson stop_reason;  // vLLM's: the stop string or stop token id that ended it; null otherwise
};

// OpenAI's finish_reason: "stop", "length", "abort" (vLLM's word), "error"; null while unfinished.
ResponseJson finish_reason_json(const ChoiceState& choice);

struct ResponseHead {
    std::string id;  // cmpl-... / chatcmpl-...
    int64_t created = 0;
    std::string model;
};

// A response's token counts. cached_tokens, the prompt tokens the prefix cache served, goes out as vLLM's
// usage.prompt_tokens_details.cached_tokens, only when the server was started with
// --enable-prompt-tokens-details (vLLM's flag; without it vLLM leaves the details out too).
struct Usage {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    std::optional<int64_t> cached_tokens;
};
ResponseJson usage_json(const Usage& usage);
// A choice's "logprobs" for these tokens (null when the request asked for none). Chat:
// {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]};
// completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}, the
// offsets counted from text_offset (the bytes of the choice's tokens before these).
ResponseJson logprobs_json(Endpoint endpoint, const Tokenizer& tokenizer, std::span<const TokenLogprobs> logprobs,
                             int64_t text_offset = 0);
// Completions with echo: the prompt's text and, with logprobs, its part of "logprobs" (null for its first
// token, which nothing predicts, as at OpenAI; null too where an entry has not come), each offset where
// the token's text begins in the detokenized prompt (special tokens add none, nor SentencePiece's leading
// space). The text is the prompt as sent where it came as text (vLLM's echo), else the detokenized ids.
struct EchoedPrompt {
    std::string text;
    ResponseJson logprobs;       // completions' shape; null without num_top
    int64_t text_offset_end = 0;   // text_offset_length(text): where the generated tokens' offsets start
};
// What a completions text_offset advances by over text: its characters (as vLLM's len() of the decoded
// token), each invalid or cut UTF-8 subpart counting one (the U+FFFD it is sent as).
int64_t text_offset_length(std::string_view text);
EchoedPrompt echo_prompt(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                         std::span<const TokenLogprobs> prompt_logprobs, std::optional<int> num_top,
                         const std::optional<std::string>& prompt_text = std::nullopt);
// The generated part after it: every list of `more` appended to those of `into`.
void append_logprobs(ResponseJson& into, const ResponseJson& more);
// vLLM's "prompt_logprobs" of a choice: [null, {"token id": {"logprob", "rank", "decoded_token"}}, ...],
// each holding the prompt token and the num_top most likely there.
ResponseJson prompt_logprobs_json(const Tokenizer& tokenizer, std::span<const TokenLogprobs> prompt_logprobs,
                                    int num_top);
// Where vLLM puts "prompt_logprobs": in the choice for completions, at the top level of the response (or
// stream chunk) for chat, whose choices share one prompt.
ResponseJson& prompt_logprobs_place(Endpoint endpoint, ResponseJson& response, ResponseJson& choice);
// The whole non-streaming response, with `usage` as counted by the caller.
ResponseJson generation_response(Endpoint endpoint, const ResponseHead& head, const std::vector<ChoiceState>& choices,
                                   const Usage& usage, const Tokenizer& tokenizer, const ResponseShape& shape);
// One stream chunk for choice `index`: text delta, the logprobs of its tokens (logprobs_json) and, once
// finished, the finish reason. For chat, role_only makes the opening chunk {"role": "assistant", "content": ""}.
ResponseJson stream_chunk(Endpoint endpoint, const ResponseHead& head, size_t index, const std::string& delta,
                            const ChoiceState& choice, bool role_only = false,
                            ResponseJson logprobs = nullptr);
// The last chunk with stream_options.include_usage: no choices, the usage.
ResponseJson stream_usage_chunk(Endpoint endpoint, const ResponseHead& head, const Usage& usage);

// JSON text with invalid UTF-8 replaced (the engine streams only whole characters; this is a guard).
std::string dump(const nlohmann::json& j);
std::string dump(const ResponseJson& j);

}  // namespace kvscope::cli
