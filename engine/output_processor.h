// OutputProcessor (vLLM's OutputProcessor and its detokenizer): turns the tokens a request is given
// into what its client sees. Incremental detokenizing (complete UTF-8 only), stop strings cut where
// they begin (the stop string is not output) with a hold-back of text that could still become one,
// and the finish checks: EOS and stop token ids once min_tokens are out, max_tokens, max_model_len.
// Engine thread only.
#pragma once

#include "model/incremental_detokenizer.h"
#include "model/tokenizer.h"
#include "runner/logprobs.h"
#include "sched/request.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvscope {

struct RequestOutput {
    std::string request_id;
    std::vector<int32_t> new_token_ids;
    std::vector<TokenLogprobs> logprobs;  // parallel to new_token_ids when the request asked for them
    // With the request's first output only, when it asked for prompt_logprobs: one entry per prompt
    // token after the first (the first has none: vLLM's None), in prompt order.
    std::optional<std::vector<TokenLogprobs>> prompt_logprobs;
    std::string text_delta;  // complete UTF-8 only; text that might begin a stop string is held back
    int num_cached_tokens = 0;  // prompt tokens the prefix cache served when the request was first scheduled
    bool finished = false;
    FinishReason finish_reason = FinishReason::NONE;
    // vLLM's stop_reason, with a STOP finish: the stop string that matched, or the stop token id (EOS: neither).
    std::optional<std::string> stop_string;
    std::optional<int32_t> stop_token;
};

class OutputProcessor {
public:
    OutputProcessor(const Tokenizer& tokenizer, int max_model_len) : tokenizer_(tokenizer), max_model_len_(max_model_len) {}

    void add_request(const Request& r);
    void remove_request(const std::string& request_id);

    // r was just given `token` (already appended to r.all_token_ids): the output to stream, finished
    // with its reason when the token ends the request. The caller finishes it in the scheduler.
    RequestOutput process_token(const Request& r, int32_t token);

private:
    struct State {
        std::unique_ptr<IncrementalDetokenizer> detokenizer;
        std::string text;    // output text so far (stop strings cut)
        size_t emitted = 0;  // bytes of text already streamed
    };
    // token < 0: only the stop strings (after a flush of the detokenizer). A STOP names what matched in o.
    std::optional<FinishReason> check_stop(const Request& r, State& st, int32_t token, RequestOutput& o) const;

    const Tokenizer& tokenizer_;
    int max_model_len_;
    std::map<std::string, State> states_;
};

}  // namespace kvscope
