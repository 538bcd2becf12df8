// Chat template families (see chat_template.h). Each render_* reproduces what the family's
// reference Jinja template prints under HF apply_chat_template (trim_blocks, lstrip_blocks).
#include "model/chat_template.h"

#include "util/errors.h"

#include <algorithm>
#include <cctype>

namespace kvscope {

namespace {

bool has(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

// Jinja's |trim and Python's str.strip(): ASCII whitespace at both ends.
std::string strip(std::string_view s) {
    const char* ws = " \t\n\r\f\v";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

// Qwen2 / SmolLM templates write a default system prompt as a literal:
// '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n'. Returns it, or "".
std::string chatml_default_system(std::string_view source) {
    for (std::string_view head : {std::string_view("<|im_start|>system\\n"), std::string_view("<|im_start|>system\n")}) {
        const size_t at = source.find(head);
        if (at == std::string_view::npos) continue;
        const size_t begin = at + head.size();
        const size_t end = source.find("<|im_end|>", begin);
        if (end == std::string_view::npos) continue;
        std::string_view text = source.substr(begin, end - begin);
        // A Jinja expression ("' + messages[0]['content'] + '") is not a literal default.
        if (has(text, "'") || has(text, "\"") || has(text, "{{") || has(text, "{%") || text.empty()) continue;
        return std::string(text);
    }
    return {};
}

std::string render_llama3(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out = "<|begin_of_text|>";
    for (const ChatMessage& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + strip(m.content) + "<|eot_id|>";
    if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

std::string render_chatml(const std::vector<ChatMessage>& messages, bool gen, const std::string& default_system) {
    std::string out;
    if (!default_system.empty() && (messages.empty() || messages.front().role != "system"))
        out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
    for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (gen) out += "<|im_start|>assistant\n";
    return out;
}

// Qwen3: ChatML without a default system prompt; an earlier assistant turn is sent without its
// reasoning (after a "</think>" the template keeps what follows it, left-stripped of newlines). The
// generation prompt leaves thinking on (enable_thinking's default): no empty think block.
std::string render_qwen3(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out;
    for (const ChatMessage& m : messages) {
        std::string content = m.content;
        if (m.role == "assistant") {
            if (const size_t end = content.rfind("</think>"); end != std::string::npos) {
                content = content.substr(end + 8);
                const size_t text = content.find_first_not_of('\n');
                content.erase(0, text == std::string::npos ? content.size() : text);
            }
        }
        out += "<|im_start|>" + m.role + "\n" + content + "<|im_end|>\n";
    }
    if (gen) out += "<|im_start|>assistant\n";
    return out;
}

// Gemma 2 / 3: "<bos>", turns "<start_of_turn>user|model\n" + trimmed content + "<end_of_turn>\n". Gemma
// has no system role: Gemma 3's template puts the system text as it is (untrimmed), then a blank line,
// before the first user message (Gemma 2's refuses it; the same prefix keeps the instruction rather than
// failing).
std::string render_gemma(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out = "<bos>";
    std::string prefix;
    bool first = true;
    for (const ChatMessage& m : messages) {
        if (m.role == "system") {
            prefix = m.content + "\n\n";
            continue;
        }
        out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n";
        if (first) out += prefix;
        first = false;
        out += strip(m.content) + "<end_of_turn>\n";
    }
    if (gen) out += "<start_of_turn>model\n";
    return out;
}

// Phi-3 / Phi-3.5: "<|role|>\n" + content + "<|end|>\n"; the generation prompt "<|assistant|>\n".
std::string render_phi3(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out;
    for (const ChatMessage& m : messages) {
        if (m.role == "system" && m.content.empty()) continue;
        out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    }
    if (gen) out += "<|assistant|>\n";
    return out;
}

// Meta's Llama 2 chat template: the system prompt goes inside the first [INST] in <<SYS>> tags;
// every user turn opens with BOS, every assistant turn ends with EOS. No generation prompt.
std::string render_llama2(const std::vector<ChatMessage>& messages) {
    std::string out;
    size_t first = 0;
    std::string system;
    if (!messages.empty() && messages[0].role == "system") {
        system = messages[0].content;
        first = 1;
    }
    for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        std::string content;
        if (i == first && first == 1) content.append("<<SYS>>\n").append(system).append("\n<</SYS>>\n\n");
        content.append(m.content);
        if (m.role == "user") out.append("<s>[INST] ").append(strip(content)).append(" [/INST]");
        else if (m.role == "assistant") out.append(" ").append(strip(content)).append(" </s>");
    }
    return out;
}

// Mistral Instruct: one BOS, [INST] turns, EOS after each answer; a system prompt is put before the
// first user message (as the v0.2+ templates do).
std::string render_mistral(const std::vector<ChatMessage>& messages) {
    std::string out = "<s>";
    std::string system;
    bool system_used = false;
    for (const ChatMessage& m : messages) {
        if (m.role == "system") {
            system = m.content;
        } else if (m.role == "user") {
            std::string content = m.content;
            if (!system.empty() && !system_used) content = system + "\n\n" + content;
            system_used = true;
            out += "[INST] " + content + " [/INST]";
        } else if (m.role == "assistant") {
            out += m.content + "</s>";
        }
    }
    return out;
}

// Zephyr / TinyLlama-Chat: "<|role|>\n" + content + EOS + "\n".
std::string render_zephyr(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out;
    for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
    if (gen) out += "<|assistant|>\n";
    return out;
}

// Models without a chat template: a transcript the model can continue.
std::string render_plain(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out;
    for (const ChatMessage& m : messages) {
        std::string role = m.role;
        if (!role.empty()) role[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(role[0])));
        out += role + ": " + m.content + "\n";
    }
    if (gen) out += "Assistant:";
    return out;
}

}  // namespace

ChatTemplate ChatTemplate::detect(std::string_view source, std::string_view model_hint) {
    if (has(source, "<|start_header_id|>")) return ChatTemplate("llama3");
    if (has(source, "<start_of_turn>")) return ChatTemplate("gemma");
    if (has(source, "<|im_start|>"))
        return has(source, "<think>") ? ChatTemplate("qwen3") : ChatTemplate("chatml", chatml_default_system(source));
    if (has(source, "[INST]")) return ChatTemplate(has(source, "<<SYS>>") ? "llama2" : "mistral");
    if (has(source, "<|user|>") && has(source, "<|end|>")) return ChatTemplate("phi3");
    if (has(source, "<|user|>") && (has(source, "</s>") || has(source, "eos_token") || has(source, "<|assistant|>")))
        return ChatTemplate("zephyr");
    if (!source.empty()) {
        ChatTemplate plain("plain");
        plain.unrecognized_ = true;
        return plain;
    }

    const std::string hint = lower(model_hint);
    if (has(hint, "llama-3") || has(hint, "llama3")) return ChatTemplate("llama3");
    if (has(hint, "gemma")) return ChatTemplate("gemma");
    if (has(hint, "phi-3") || has(hint, "phi3")) return ChatTemplate("phi3");
    if (has(hint, "qwen3")) return ChatTemplate("qwen3");
    if (has(hint, "qwen") || has(hint, "smollm")) return ChatTemplate("chatml");
    if (has(hint, "tinyllama") || has(hint, "zephyr")) return ChatTemplate("zephyr");
    if (has(hint, "mistral")) return ChatTemplate("mistral");
    if (has(hint, "llama-2") && has(hint, "chat")) return ChatTemplate("llama2");
    return ChatTemplate("plain");
}

ChatTemplate ChatTemplate::of_family(std::string_view family) {
    for (std::string_view f : {"llama2", "llama3", "chatml", "qwen3", "gemma", "phi3", "zephyr", "mistral", "plain"})
        if (f == family) return ChatTemplate(std::string(family));
    throw BadInput("chat template family '" + std::string(family) +
                   "' is unknown (llama2, llama3, chatml, qwen3, gemma, phi3, zephyr, mistral, plain)");
}

bool ChatTemplate::renders_bos() const {
    return family_ == "llama3" || family_ == "llama2" || family_ == "mistral" || family_ == "gemma";
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
    if (family_ == "llama3") return render_llama3(messages, add_generation_prompt);
    if (family_ == "chatml") return render_chatml(messages, add_generation_prompt, default_system_);
    if (family_ == "qwen3") return render_qwen3(messages, add_generation_prompt);
    if (family_ == "gemma") return render_gemma(messages, add_generation_prompt);
    if (family_ == "phi3") return render_phi3(messages, add_generation_prompt);
    if (family_ == "llama2") return render_llama2(messages);
    if (family_ == "mistral") return render_mistral(messages);
    if (family_ == "zephyr") return render_zephyr(messages, add_generation_prompt);
    return render_plain(messages, add_generation_prompt);
}

}  // namespace kvscope
