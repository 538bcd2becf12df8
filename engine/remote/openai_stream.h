// The OpenAI streaming protocol on the client side: the body of one completions or chat completions
// request (stream on, usage asked for, output length forced with max_tokens + ignore_eos), and
// OpenAiStreamReader, which reads one response's bytes (SSE, "data: {json}" events ending with
// "data: [DONE]") into what RequestMetrics needs: a timestamp per chunk that carries text, the usage
// counts and the finish reason, or the error that ended the request. No I/O, no threads.
#pragma once

#include "model/chat_template.h"
#include "remote/server_engine.h"
#include "remote/sse_parser.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

enum class OpenAiApi { COMPLETIONS, CHAT };

// "/v1/completions" -> COMPLETIONS, "/v1/chat/completions" -> CHAT; throws BadInput for another path.
OpenAiApi openai_api_of_endpoint(const std::string& endpoint);
// "openai" -> COMPLETIONS, "openai-chat" -> CHAT (vLLM's --backend names); throws BadInput otherwise.
OpenAiApi openai_api_of_backend(const std::string& backend);
const char* default_endpoint(OpenAiApi api);

struct OpenAiRequest {
    OpenAiApi api = OpenAiApi::COMPLETIONS;
    std::string model;
    // Completions send the token ids themselves when given (exact input lengths: vLLM, SGLang,
    // llama-server and kvscope accept a list of ids); chat sends prompt_text as one user message.
    std::vector<int32_t> prompt_token_ids;
    std::string prompt_text;
    // Chat: a whole conversation (system, user, assistant turns) instead of prompt_text alone, as a
    // chat pane sends it; the server applies its own template.
    std::vector<ChatMessage> messages;
    int max_tokens = 16;
    float temperature = 0;
    float top_p = 1;    // sent only when < 1
    uint64_t seed = 0;  // sent only when temperature > 0
    // Also send min_tokens = max_tokens (vLLM's and SGLang's sampling parameter, and kvscope's), which
    // holds the output length even where ignore_eos is not honoured. Only for engines known to take it:
    // others may refuse an unknown field.
    bool min_tokens = false;
    // Benchmarks force the output length; a conversation ends where the model ends it.
    bool ignore_eos = true;
};

// The JSON body: stream true, stream_options.include_usage, max_tokens (chat: max_completion_tokens
// too), ignore_eos and, when asked, min_tokens, so that the output length is exactly max_tokens where
// the server honours either.
std::string openai_request_body(const OpenAiRequest& request);
// How output lengths are forced, for the report ("output_length_control").
inline constexpr const char* kOutputLengthControl = "max_tokens + ignore_eos";
inline constexpr const char* kOutputLengthControlMinTokens = "max_tokens + ignore_eos + min_tokens";
// Whether an engine (as detect_remote_engine names it) takes min_tokens: vLLM, SGLang and kvscope do.
bool engine_takes_min_tokens(ServerEngine engine);

class OpenAiStreamReader {
public:
    // max_tokens > 0: the request's; a stream with more token events than that (an endless one) is
    // ended, and usage counts past it are not believed. stall_s > 0: a stream that sends bytes (comments,
    // pings) but no token for that long is ended too; silence alone is the transport's to time out.
    explicit OpenAiStreamReader(OpenAiApi api, int max_tokens = 0, double stall_s = 0)
        : api_(api), max_tokens_(max_tokens), stall_s_(stall_s) {}

    // Bytes of the response body received at time t with HTTP `status`. Returns false once the stream
    // is unusable (malformed event, an error event): the caller ends the transfer; error() says why.
    bool feed(int status, std::string_view bytes, double t);
    // The response ended (transport_error "" when it ended normally): settles error().
    void finish(int status, const std::string& transport_error);

    const std::string& error() const { return error_; }  // "" when the request succeeded
    const std::vector<double>& chunk_times() const { return chunk_times_; }  // one per chunk with text
    int prompt_tokens() const { return prompt_tokens_; }          // from usage; -1 when not sent
    // usage.prompt_tokens_details.cached_tokens (vLLM with --enable-prompt-tokens-details, llama-server,
    // OpenAI): prompt tokens the server took from its prefix cache; -1 when not sent.
    int cached_tokens() const { return cached_tokens_; }
    int completion_tokens() const { return completion_tokens_; }  // from usage; -1 when not sent
    // The text streamed so far (choices[0]: completions' text, chat's delta content), for a reader
    // that shows the reply as it comes.
    const std::string& text() const { return text_; }
    const std::string& finish_reason() const { return finish_reason_; }
    bool done() const { return done_; }  // "data: [DONE]" seen

private:
    bool take_event(const std::string& data, double t);

    OpenAiApi api_;
    int max_tokens_ = 0;
    double stall_s_ = 0;
    double last_progress_t_ = -1;  // when the stream began or last carried a token
    SseParser sse_;
    std::string error_, error_body_, finish_reason_, text_;
    std::vector<double> chunk_times_;
    int prompt_tokens_ = -1, completion_tokens_ = -1, cached_tokens_ = -1;
    bool done_ = false;
};

}  // namespace kvscope
