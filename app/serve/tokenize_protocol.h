// vLLM's /tokenize and /detokenize for kvscope serve: a client (kvscope-cli bench --base-url with no
// --tokenizer) learns the served model's token ids without its files. Requests and answers as vLLM
// has them; llama-server's field names ("content") are read too. Throws ApiError (400) naming the field.
#pragma once

#include "model/model.h"

#include <cstdint>
#include <nlohmann/json.hpp>

namespace kvscope::cli {

// {"prompt" | "content": TEXT, "add_special_tokens": true} or {"messages": [...], "add_generation_prompt":
// true} -> {"count", "max_model_len", "tokens"}; messages give the ids the chat endpoint runs.
nlohmann::json tokenize_response(const nlohmann::json& body, const Model& model, int max_model_len,
                                 int64_t max_prompt_bytes);
// {"tokens": [ids]} -> {"prompt": TEXT} (special tokens skipped, as vLLM's default).
nlohmann::json detokenize_response(const nlohmann::json& body, const Model& model, int max_model_len);

}  // namespace kvscope::cli
