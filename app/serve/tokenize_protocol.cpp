#include "tokenize_protocol.h"

#include "openai_protocol.h"

#include <string>

namespace kvscope::cli {

using nlohmann::json;

json tokenize_response(const json& body, const Model& model, int max_model_len, int64_t max_prompt_bytes) {
    if (!body.is_object()) throw ApiError(400, "the body must be a JSON object");
    if (body.contains("messages")) {  // vLLM's chat form: the ids /v1/chat/completions would run
        const std::vector<int32_t> ids = chat_prompt(body, model, PromptBounds{max_model_len, max_prompt_bytes});
        return {{"count", ids.size()}, {"max_model_len", max_model_len}, {"tokens", ids}, {"token_strs", nullptr}};
    }
    const char* key = body.contains("prompt") ? "prompt" : "content";
    if (!body.contains(key) || !body[key].is_string()) throw ApiError(400, "prompt must be a string", "prompt");
    const std::string& text = body[key].get_ref<const std::string&>();
    if (static_cast<int64_t>(text.size()) > max_prompt_bytes)
        throw ApiError(400, "prompt has " + std::to_string(text.size()) + " bytes; at most " +
                                std::to_string(max_prompt_bytes) + " are read (--max-prompt-bytes)", "prompt");
    bool add_special = true;
    if (body.contains("add_special_tokens")) {
        if (!body["add_special_tokens"].is_boolean())
            throw ApiError(400, "add_special_tokens must be true or false", "add_special_tokens");
        add_special = body["add_special_tokens"].get<bool>();
    }
    const std::vector<int32_t> ids = model.tokenizer.encode(text, add_special);
    return {{"count", ids.size()}, {"max_model_len", max_model_len}, {"tokens", ids}, {"token_strs", nullptr}};
}

json detokenize_response(const json& body, const Model& model, int max_model_len) {
    if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
        throw ApiError(400, "tokens must be a list of token ids", "tokens");
    const json& list = body["tokens"];
    if (list.size() > static_cast<size_t>(max_model_len))
        throw ApiError(400, "tokens has " + std::to_string(list.size()) + " ids; at most " +
                                std::to_string(max_model_len) + " (max_model_len)", "tokens");
    std::vector<int32_t> ids;
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string at = "tokens[" + std::to_string(i) + "]";
        if (!list[i].is_number_integer()) throw ApiError(400, at + " must be an integer token id", "tokens");
        const int64_t id = list[i].get<int64_t>();
        if (id < 0 || id >= model.tokenizer.vocab_size())
            throw ApiError(400, at + ": token id " + std::to_string(id) + " is outside the vocabulary (" +
                                    std::to_string(model.tokenizer.vocab_size()) + " tokens)", "tokens");
        ids.push_back(static_cast<int32_t>(id));
    }
    return {{"prompt", model.tokenizer.decode(ids)}};
}

}  // namespace kvscope::cli
