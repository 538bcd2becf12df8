// ChatTemplate: turns chat messages into the prompt text a model was trained on. No Jinja engine:
// the template source (tokenizer_config.json "chat_template" or GGUF tokenizer.chat_template) is
// only inspected for the markers of a known family, whose output is then written out exactly.
// Render with Tokenizer::encode(text, renders_bos() ? false : true).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

struct ChatMessage {
    std::string role;  // "system", "user", "assistant"
    std::string content;
};

// How a chat is rendered besides its messages: vLLM's chat request fields.
struct ChatRenderOptions {
    bool add_generation_prompt = true;
    // The last message left open for the model to go on with (HF's continue_final_message): the text ends
    // where that message's content does. Needs add_generation_prompt false.
    bool continue_final_message = false;
    // chat_template_kwargs.enable_thinking, where the template reads it (Qwen3, Qwen3.5: false closes an
    // empty think block in the generation prompt); unset: the template's default.
    std::optional<bool> enable_thinking;
};

class ChatTemplate {
public:
    // Family by the template's distinctive markers; when the source is empty, by model_hint (a model
    // name or architecture, e.g. "Qwen2", "TinyLlama-1.1B-Chat"); else "plain".
    static ChatTemplate detect(std::string_view jinja_source, std::string_view model_hint = {});
    static ChatTemplate of_family(std::string_view family);  // throws BadInput for unknown names

    // "llama2", "llama3", "llama4", "chatml", "qwen3", "gemma", "gemma4", "phi3", "phi4", "phi4-mini", "zephyr", "mistral", "mistral-v7",
    // "deepseek", "gpt-oss", "granite" or "plain".
    std::string family() const { return family_; }
    // The model carries a template of no family kvscope knows: chats are rendered plain, which the
    // model was not trained on (info and the GUI say so).
    bool unrecognized() const { return unrecognized_; }
    // True when render() writes the BOS text itself ("<|begin_of_text|>", "<s>"): then the caller
    // must encode without adding BOS. zephyr, chatml and plain leave BOS to the caller.
    bool renders_bos() const;
    std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
        ChatRenderOptions options;
        options.add_generation_prompt = add_generation_prompt;
        return render(messages, options);
    }
    // Throws BadInput for continue_final_message with a generation prompt, or where the final message's
    // content is not in the rendered text.
    std::string render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const;

private:
    explicit ChatTemplate(std::string family, std::string default_system = {})
        : family_(std::move(family)), default_system_(std::move(default_system)) {}
    static ChatTemplate unrecognized_plain();  // plain, flagged unrecognized
    std::string render_family(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                              std::optional<bool> enable_thinking) const;
    std::string family_;
    std::string default_system_;  // chatml: the system prompt the template adds when none is given
    // mistral-v7, granite: the template text, whose default system prompt is read at each render (it may
    // name today's date, as strftime_now does at each HF render).
    std::string source_;
    bool unrecognized_ = false;
    // Variants within a family, read from the template source:
    bool dated_system_ = false;   // llama3: Llama 3.1+'s system turn ("Cutting Knowledge Date", "Today Date")
    bool always_prompt_ = false;  // llama3: Llama 3's first template has no add_generation_prompt test
    bool date_from_clock_ = false;  // llama3: Llama 3.2+ dates it today (strftime_now), 3.1 "26 Jul 2024"
    bool inst_open_space_ = true, inst_close_space_ = true;  // mistral: "[INST] " / " [/INST]" (v0.1) or none (Nemo);
                                                             // mistral-v7: "[INST] " (Large 2411) or "[INST]"
    bool system_on_last_user_ = false;  // mistral v0.3 / Nemo: the system prompt joins the last user turn
    bool think_prompt_ = false;   // deepseek (R1), qwen3 (QwQ, Qwen3.5): the generation prompt opens "<think>\n"
    bool trim_ = false;           // qwen3: Qwen3.5 trims every message
    bool thinking_switch_ = false;    // qwen3: Qwen3 / 3.5 read enable_thinking
    bool think_after_query_ = false;  // qwen3: Qwen3 / 3.5 keep the reasoning of answers after the last user turn
    bool last_answer_whole_ = false;  // qwen3: QwQ keeps the reasoning of an answer that ends the chat
    bool drop_reasoning_ = false;     // deepseek (R1, V3.1): earlier answers lose their reasoning ("...</think>")
    bool last_system_only_ = false;  // deepseek: the first R1 template keeps only the last system prompt
    bool think_closed_ = false;       // deepseek: V3.1 without thinking writes "</think>" after each "<｜Assistant｜>"
    bool empty_system_default_ = false;  // granite: Granite 4 gives an empty system message the default one
    bool eos_without_prompt_ = false;  // phi3: without a generation prompt the chat ends with EOS ("<|endoftext|>")
};

}  // namespace kvscope
