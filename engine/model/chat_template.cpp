// Chat template families (see chat_template.h). Each render_* reproduces what the family's
// reference Jinja template prints under HF apply_chat_template (trim_blocks, lstrip_blocks).
#include "model/chat_template.h"

#include "util/errors.h"
#include "util/local_time.h"

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

// Qwen2 / Qwen2.5 / SmolLM templates write a default system prompt as a literal:
// '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' (Qwen2.5 after a tools branch that has
// the same head followed by an expression). Returns the first literal one, or "".
std::string chatml_default_system(std::string_view source) {
    for (std::string_view head : {std::string_view("<|im_start|>system\\n"), std::string_view("<|im_start|>system\n")}) {
        for (size_t at = source.find(head); at != std::string_view::npos; at = source.find(head, at + 1)) {
            const size_t begin = at + head.size();
            const size_t end = source.find("<|im_end|>", begin);
            if (end == std::string_view::npos) break;
            std::string_view text = source.substr(begin, end - begin);
            // A Jinja expression ("' + messages[0]['content'] + '") is not a literal default.
            if (has(text, "'") || has(text, "\"") || has(text, "{{") || has(text, "{%") || text.empty()) continue;
            return std::string(text);
        }
    }
    return {};
}

// Llama 3 / 3.1+: turns "<|start_header_id|>role<|end_header_id|>\n\n" + trimmed content + "<|eot_id|>".
// 3.1+ (dated_system) always open with a system turn that dates the knowledge cut-off and today, then the
// trimmed system prompt, if any.
std::string render_llama3(const std::vector<ChatMessage>& messages, bool gen, bool dated_system, const std::string& date) {
    std::string out = "<|begin_of_text|>";
    size_t first = 0;
    if (dated_system) {
        std::string system;
        if (!messages.empty() && messages[0].role == "system") {
            system = strip(messages[0].content);
            first = 1;
        }
        out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " + date +
               "\n\n" + system + "<|eot_id|>";
    }
    for (size_t i = first; i < messages.size(); ++i)
        out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + strip(messages[i].content) + "<|eot_id|>";
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

// Phi-4: ChatML with "<|im_sep|>" after the role instead of a newline, and nothing between turns.
std::string render_phi4(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out;
    for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "<|im_sep|>" + m.content + "<|im_end|>";
    if (gen) out += "<|im_start|>assistant<|im_sep|>";
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

// Mistral Instruct: one BOS, [INST] turns, EOS after each answer. v0.1 writes "[INST] " + content +
// " [/INST]", v0.3 "[INST] " + content + "[/INST]", Nemo (tekken) "[INST]" + content + "[/INST]"; the system
// prompt goes before the first user message (v0.1 has none: this keeps it), or before the last one where
// the template says so (v0.3, Nemo: only when the conversation ends with that user turn).
std::string render_mistral(const std::vector<ChatMessage>& messages, bool open_space, bool close_space,
                           bool system_on_last_user) {
    std::string out = "<s>";
    std::string system;
    for (const ChatMessage& m : messages)
        if (m.role == "system") system = m.content;
    bool system_used = false;
    for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "user") {
            std::string content = m.content;
            const bool here = system_on_last_user ? i + 1 == messages.size() : !system_used;
            if (!system.empty() && here) content = system + "\n\n" + content;
            system_used = true;
            out += std::string(open_space ? "[INST] " : "[INST]") + content + (close_space ? " [/INST]" : "[/INST]");
        } else if (m.role == "assistant") {
            out += m.content + "</s>";
        }
    }
    return out;
}

// DeepSeek V3 / R1: BOS, the system prompts joined by blank lines, then "<｜User｜>" + content and
// "<｜Assistant｜>" + content + "<｜end▁of▁sentence｜>"; the generation prompt "<｜Assistant｜>" (R1's opens
// its reasoning: "<think>\n"). R1 sends earlier answers without their reasoning (what follows "</think>").
// DeepSeek's markers: fullwidth bars (U+FF5C) and U+2581 for the spaces.
constexpr std::string_view kDeepSeekBos = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
constexpr std::string_view kDeepSeekEos = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
constexpr std::string_view kDeepSeekUser = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>";
constexpr std::string_view kDeepSeekAssistant = "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>";

std::string render_deepseek(const std::vector<ChatMessage>& messages, bool gen, bool think_prompt) {
    std::string out(kDeepSeekBos);
    std::string system;
    for (const ChatMessage& m : messages)
        if (m.role == "system") system += (system.empty() ? "" : "\n\n") + m.content;
    out += system;
    for (const ChatMessage& m : messages) {
        if (m.role == "user") {
            out.append(kDeepSeekUser).append(m.content);
        } else if (m.role == "assistant") {
            std::string content = m.content;
            if (think_prompt)
                if (const size_t end = content.rfind("</think>"); end != std::string::npos) content = content.substr(end + 8);
            out.append(kDeepSeekAssistant).append(content).append(kDeepSeekEos);
        }
    }
    if (gen) out.append(kDeepSeekAssistant).append(think_prompt ? "<think>\n" : "");
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
    if (has(source, "<|start_header_id|>")) {
        ChatTemplate t("llama3");
        t.dated_system_ = has(source, "Cutting Knowledge Date");
        t.date_from_clock_ = has(source, "strftime_now");
        return t;
    }
    if (has(source, "<start_of_turn>")) return ChatTemplate("gemma");
    if (has(source, kDeepSeekUser)) {
        ChatTemplate t("deepseek");
        t.think_prompt_ = has(source, std::string(kDeepSeekAssistant) + "<think>\\n");
        return t;
    }
    if (has(source, "<|im_sep|>")) return ChatTemplate("phi4");
    if (has(source, "<|im_start|>"))
        return has(source, "<think>") ? ChatTemplate("qwen3") : ChatTemplate("chatml", chatml_default_system(source));
    if (has(source, "[INST]")) {
        if (has(source, "<<SYS>>")) return ChatTemplate("llama2");
        ChatTemplate t("mistral");
        t.inst_open_space_ = has(source, "[INST] '") || has(source, "[INST] \"");
        t.inst_close_space_ = has(source, "' [/INST]") || has(source, "\" [/INST]");
        t.system_on_last_user_ = has(source, "loop.last and system_message");
        return t;
    }
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
    // Phi-4-mini has a template of its own ("<|user|>" without the newline): not phi4's.
    if ((has(hint, "phi-4") || has(hint, "phi4")) && !has(hint, "mini")) return ChatTemplate("phi4");
    if (has(hint, "qwen3")) return ChatTemplate("qwen3");
    if (has(hint, "qwen") || has(hint, "smollm")) return ChatTemplate("chatml");
    if (has(hint, "tinyllama") || has(hint, "zephyr")) return ChatTemplate("zephyr");
    if (has(hint, "mistral")) return ChatTemplate("mistral");
    if (has(hint, "deepseek-v3") || has(hint, "deepseek-r1")) return ChatTemplate("deepseek");
    if (has(hint, "llama-2") && has(hint, "chat")) return ChatTemplate("llama2");
    return ChatTemplate("plain");
}

ChatTemplate ChatTemplate::of_family(std::string_view family) {
    for (std::string_view f : {"llama2", "llama3", "chatml", "qwen3", "gemma", "phi3", "phi4", "zephyr", "mistral", "deepseek", "plain"})
        if (f == family) return ChatTemplate(std::string(family));
    throw BadInput("chat template family '" + std::string(family) +
                   "' is unknown (llama2, llama3, chatml, qwen3, gemma, phi3, phi4, zephyr, mistral, deepseek, plain)");
}

bool ChatTemplate::renders_bos() const {
    return family_ == "llama3" || family_ == "llama2" || family_ == "mistral" || family_ == "gemma" || family_ == "deepseek";
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
    if (family_ == "llama3")
        return render_llama3(messages, add_generation_prompt, dated_system_, date_from_clock_ ? local_time_string("%d %b %Y") : "26 Jul 2024");
    if (family_ == "chatml") return render_chatml(messages, add_generation_prompt, default_system_);
    if (family_ == "qwen3") return render_qwen3(messages, add_generation_prompt);
    if (family_ == "gemma") return render_gemma(messages, add_generation_prompt);
    if (family_ == "phi3") return render_phi3(messages, add_generation_prompt);
    if (family_ == "phi4") return render_phi4(messages, add_generation_prompt);
    if (family_ == "llama2") return render_llama2(messages);
    if (family_ == "mistral") return render_mistral(messages, inst_open_space_, inst_close_space_, system_on_last_user_);
    if (family_ == "deepseek") return render_deepseek(messages, add_generation_prompt, think_prompt_);
    if (family_ == "zephyr") return render_zephyr(messages, add_generation_prompt);
    return render_plain(messages, add_generation_prompt);
}

}  // namespace kvscope
