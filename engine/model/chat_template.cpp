// Chat template families (see chat_template.h). Each render_* reproduces what the family's
// reference Jinja template prints under HF apply_chat_template (trim_blocks, lstrip_blocks).
#include "model/chat_template.h"

#include "util/errors.h"
#include "util/local_time.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace kvscope {

namespace {

bool has(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

// The white space that Jinja's |trim and Python's str.strip() remove (ASCII here).
constexpr std::string_view kSpace = " \t\n\r\f\v";

// Jinja's |trim and Python's str.strip(): white space at both ends.
std::string strip(std::string_view s) {
    const size_t b = s.find_first_not_of(kSpace);
    if (b == std::string_view::npos) return {};
    return std::string(s.substr(b, s.find_last_not_of(kSpace) - b + 1));
}

// The text of the Jinja string expression at source[pos]: quoted literals ('...' or "...", with \n, \t and
// \\ \' \" escapes) joined by '+', where strftime_now('FMT') or a name the template binds to it (`set today =
// strftime_now("%Y-%m-%d")`) stands for today's date. nullopt for anything else.
std::optional<std::string> jinja_string_expression(std::string_view source, size_t pos) {
    std::string out;
    auto skip_spaces = [&] {
        while (pos < source.size() && (source[pos] == ' ' || source[pos] == '\n' || source[pos] == '\t')) ++pos;
    };
    // strftime_now('FMT') at `at`: today in FMT, and where the call ends.
    auto strftime_call = [&](size_t at, size_t& end) -> std::optional<std::string> {
        constexpr std::string_view kCall = "strftime_now(";
        if (source.substr(at, kCall.size()) != kCall || at + kCall.size() >= source.size()) return std::nullopt;
        const char quote = source[at + kCall.size()];
        if (quote != '\'' && quote != '"') return std::nullopt;
        const size_t begin = at + kCall.size() + 1, close = source.find(quote, begin);
        if (close == std::string_view::npos || source.substr(close + 1, 1) != ")") return std::nullopt;
        end = close + 2;
        return local_time_string(std::string(source.substr(begin, close - begin)).c_str());
    };
    for (;;) {
        skip_spaces();
        if (pos >= source.size()) return std::nullopt;
        const char quote = source[pos];
        if (quote == '\'' || quote == '"') {
            for (++pos;; ++pos) {
                if (pos >= source.size()) return std::nullopt;
                const char c = source[pos];
                if (c == quote) break;
                if (c != '\\') {
                    out += c;
                    continue;
                }
                if (++pos >= source.size()) return std::nullopt;
                const char e = source[pos];
                out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
            }
            ++pos;
        } else if (size_t end = 0; auto today = strftime_call(pos, end)) {
            out += *today;
            pos = end;
        } else {  // a name, bound to strftime_now(...) elsewhere in the template
            size_t name_end = pos;
            while (name_end < source.size() && (std::isalnum(static_cast<unsigned char>(source[name_end])) || source[name_end] == '_'))
                ++name_end;
            if (name_end == pos) return std::nullopt;
            const std::string binding = "set " + std::string(source.substr(pos, name_end - pos)) + " = ";
            const size_t bound = source.find(binding);
            size_t ignored = 0;
            auto value = bound == std::string_view::npos ? std::nullopt : strftime_call(bound + binding.size(), ignored);
            if (!value) return std::nullopt;
            out += *value;
            pos = name_end;
        }
        skip_spaces();
        if (pos < source.size() && source[pos] == '+') {
            ++pos;
            continue;
        }
        return out;
    }
}

// The default system prompt a template writes when the chat has none, from its `default_system_message =`
// (Mistral Small 3.x, Ministral 3, Devstral, Granite 4) or `set system_message =` (Granite 3.x) string
// expression; "" when it has none that jinja_string_expression reads. Granite 3.x then appends a sentence
// per case (tools, documents, thinking): a plain chat takes the chain's final else.
std::string template_default_system(std::string_view source) {
    for (std::string_view key : {std::string_view("default_system_message = "), std::string_view("set system_message = ")})
        for (size_t at = source.find(key); at != std::string_view::npos; at = source.find(key, at + 1)) {
            std::optional<std::string> text = jinja_string_expression(source, at + key.size());
            if (!text) continue;
            constexpr std::string_view kAppend = "set system_message = system_message + ";
            for (size_t more = source.find(kAppend, at); more != std::string_view::npos; more = source.find(kAppend, more + 1)) {
                const std::string_view before = source.substr(0, source.rfind("{", more));
                const size_t end = before.find_last_not_of(" \t\n");
                if (end == std::string_view::npos || !before.substr(0, end + 1).ends_with("else %}")) continue;
                if (auto tail = jinja_string_expression(source, more + kAppend.size())) *text += *tail;
                break;
            }
            return *text;
        }
    return {};
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
// trimmed system prompt, if any. Llama 3's first template writes the generation prompt whether asked or not.
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

// Llama 4: "<|begin_of_text|>", turns "<|header_start|>" + role + "<|header_end|>\n\n" + trimmed content +
// "<|eot|>" (Meta's prompt format; llama.cpp renders it so). No dated system turn, unlike 3.1+.
std::string render_llama4(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out = "<|begin_of_text|>";
    for (const ChatMessage& m : messages) out += "<|header_start|>" + m.role + "<|header_end|>\n\n" + strip(m.content) + "<|eot|>";
    if (gen) out += "<|header_start|>assistant<|header_end|>\n\n";
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
// generation prompt leaves thinking on (enable_thinking's default): no empty think block. QwQ and Qwen3.5
// open the reasoning in the generation prompt ("<think>\n"); Qwen3.5 trims every message. Qwen3 and Qwen3.5
// (their templates' last_query_index) keep the reasoning of answers after the last user turn, in a think
// block: Qwen3 where the answer is the chat's last or has reasoning, Qwen3.5 always. QwQ sends the chat's
// last message whole. enable_thinking false (Qwen3, Qwen3.5) closes an empty think block in the generation
// prompt.
std::string render_qwen3(const std::vector<ChatMessage>& messages, bool gen, bool think_prompt, bool trim,
                         bool think_after_query, bool last_answer_whole, bool thinking_off) {
    size_t last_query = messages.size();
    for (size_t i = 0; i < messages.size(); ++i)
        if (messages[i].role == "user") last_query = i;
    auto strip_newlines = [](std::string s, bool left, bool right) {  // Python's str.lstrip('\n') / rstrip('\n')
        if (left) s.erase(0, std::min(s.find_first_not_of('\n'), s.size()));
        if (right) s.erase(s.find_last_not_of('\n') + 1);
        return s;
    };
    std::string out;
    for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        std::string content = trim ? strip(m.content) : m.content;
        if (m.role != "assistant") {
            out += "<|im_start|>" + m.role + "\n" + content + "<|im_end|>\n";
            continue;
        }
        std::string reasoning;
        if (const size_t end = content.rfind("</think>"); end != std::string::npos && !(last_answer_whole && i + 1 == messages.size())) {
            // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
            const std::string before = strip_newlines(content.substr(0, content.find("</think>")), false, true);
            const size_t open = before.rfind("<think>");
            reasoning = strip_newlines(open == std::string::npos ? before : before.substr(open + 7), true, false);
            content = strip_newlines(content.substr(end + 8), true, false);
        }
        const bool after_query = last_query == messages.size() || i > last_query;
        if (think_after_query && after_query && (trim || i + 1 == messages.size() || !reasoning.empty()))
            content = "<think>\n" + (trim ? strip(reasoning) : strip_newlines(reasoning, true, true)) + "\n</think>\n\n" +
                      strip_newlines(content, true, false);
        out += "<|im_start|>assistant\n" + content + "<|im_end|>\n";
    }
    if (gen) out += "<|im_start|>assistant\n" + std::string(thinking_off ? "<think>\n\n</think>\n\n" : think_prompt ? "<think>\n" : "");
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

// Phi-3 / Phi-3.5: "<|role|>\n" + content + "<|end|>\n"; the generation prompt "<|assistant|>\n", else (in
// the published templates) EOS, "<|endoftext|>".
std::string render_phi3(const std::vector<ChatMessage>& messages, bool gen, bool eos_without_prompt) {
    std::string out;
    for (const ChatMessage& m : messages) {
        if (m.role == "system" && m.content.empty()) continue;
        out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    }
    if (gen) out += "<|assistant|>\n";
    else if (eos_without_prompt) out += "<|endoftext|>";
    return out;
}

// Phi-4: ChatML with "<|im_sep|>" after the role instead of a newline, and nothing between turns.
std::string render_phi4(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out;
    for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "<|im_sep|>" + m.content + "<|im_end|>";
    if (gen) out += "<|im_start|>assistant<|im_sep|>";
    return out;
}

// Phi-4-mini: "<|role|>" + content + "<|end|>", no newlines; the generation prompt "<|assistant|>", else
// its EOS ("<|endoftext|>") closes the chat.
std::string render_phi4_mini(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out;
    for (const ChatMessage& m : messages) out += "<|" + m.role + "|>" + m.content + "<|end|>";
    out += gen ? "<|assistant|>" : "<|endoftext|>";
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
    std::optional<std::string> system;
    for (const ChatMessage& m : messages)
        if (m.role == "system") system = m.content;
    bool system_used = false;
    for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "user") {
            std::string content = m.content;
            // v0.3 / Nemo test `system_message is defined`: an empty one still leaves its blank line.
            const bool here = system_on_last_user ? i + 1 == messages.size() : !system_used && system && !system->empty();
            if (system && here) content = *system + "\n\n" + content;
            system_used = true;
            out += std::string(open_space ? "[INST] " : "[INST]") + content + (close_space ? " [/INST]" : "[/INST]");
        } else if (m.role == "assistant") {
            out += m.content + "</s>";
        }
    }
    return out;
}

// DeepSeek V3 / R1 / V3.1: BOS, the system prompts joined by blank lines (R1's first template keeps the
// last one), then "<｜User｜>" + content and "<｜Assistant｜>" + content + "<｜end▁of▁sentence｜>"; the
// generation prompt "<｜Assistant｜>" (R1's later template opens its reasoning: "<think>\n"). R1 and V3.1
// send earlier answers without their reasoning (R1 what follows the last "</think>", V3.1 the first).
// V3.1 without thinking (its default) closes the think block after each "<｜Assistant｜>": "</think>".
// DeepSeek's markers: fullwidth bars (U+FF5C) and U+2581 for the spaces.
constexpr std::string_view kDeepSeekBos = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
constexpr std::string_view kDeepSeekEos = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
constexpr std::string_view kDeepSeekUser = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>";
constexpr std::string_view kDeepSeekAssistant = "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>";

std::string render_deepseek(const std::vector<ChatMessage>& messages, bool gen, bool think_prompt, bool drop_reasoning,
                            bool think_closed, bool last_system_only) {
    std::string out(kDeepSeekBos);
    std::string system;
    for (const ChatMessage& m : messages)
        if (m.role == "system") system = last_system_only ? m.content : system + (system.empty() ? "" : "\n\n") + m.content;
    out += system;
    const std::string assistant = std::string(kDeepSeekAssistant) + (think_closed ? "</think>" : "");
    for (const ChatMessage& m : messages) {
        if (m.role == "user") {
            out.append(kDeepSeekUser).append(m.content);
        } else if (m.role == "assistant") {
            std::string content = m.content;
            const size_t end = think_closed ? content.find("</think>") : content.rfind("</think>");
            if (drop_reasoning && end != std::string::npos) content = content.substr(end + 8);
            out.append(assistant).append(content).append(kDeepSeekEos);
        }
    }
    if (gen) out.append(assistant).append(think_prompt ? "<think>\n" : "");
    return out;
}

// Mistral's v7 template (Mistral Large 2411, Small 3.x, Ministral 3, Devstral): BOS, the system prompt (the
// chat's first message, else the template's default) in [SYSTEM_PROMPT] tags, then "[INST]" + user +
// "[/INST]" and assistant + EOS; later system messages in [SYSTEM_PROMPT] tags where they stand. Large 2411
// puts a space after each opening tag and before each answer.
std::string render_mistral_v7(const std::vector<ChatMessage>& messages, const std::string& default_system, bool spaced) {
    const std::string sp = spaced ? " " : "";
    std::string out = "<s>";
    size_t first = 0;
    if (!messages.empty() && messages[0].role == "system") {
        out += "[SYSTEM_PROMPT]" + sp + messages[0].content + "[/SYSTEM_PROMPT]";
        first = 1;
    } else if (!default_system.empty()) {
        out += "[SYSTEM_PROMPT]" + sp + default_system + "[/SYSTEM_PROMPT]";
    }
    for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "system") out += "[SYSTEM_PROMPT]" + sp + m.content + "[/SYSTEM_PROMPT]";
        else if (m.role == "user") out += "[INST]" + sp + m.content + "[/INST]";
        else if (m.role == "assistant") out += sp + m.content + "</s>";
    }
    return out;
}

// gpt-oss (OpenAI's harmony format): a system message with the model's identity, today's date and the
// default reasoning effort (medium); the chat's system prompt as the developer's instructions; answers on
// the final channel; the generation prompt "<|start|>assistant" (the model names its channel). A last
// assistant message without a generation prompt ends "<|return|>".
std::string render_gpt_oss(const std::vector<ChatMessage>& messages, bool gen, const std::string& date) {
    std::string out = "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                      "Knowledge cutoff: 2024-06\nCurrent date: " + date +
                      "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included "
                      "for every message.<|end|>";
    size_t first = 0;
    if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
        if (!messages[0].content.empty())
            out += "<|start|>developer<|message|># Instructions\n\n" + messages[0].content + "\n\n<|end|>";
        first = 1;
    }
    for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "user") {
            out += "<|start|>user<|message|>" + m.content + "<|end|>";
        } else if (m.role == "assistant") {
            const bool last = i + 1 == messages.size() && !gen;
            out += "<|start|>assistant<|channel|>final<|message|>" + m.content + (last ? "<|return|>" : "<|end|>");
        }
    }
    if (gen) out += "<|start|>assistant";
    return out;
}

// IBM Granite 3.x / 4: "<|start_of_role|>" + role + "<|end_of_role|>" + content + "<|end_of_text|>\n", a
// system turn first (the chat's, else the template's default; Granite 4's also where the chat's is empty);
// the generation prompt opens the assistant's.
std::string render_granite(const std::vector<ChatMessage>& messages, bool gen, const std::string& default_system,
                           bool empty_system_default) {
    std::string out;
    auto turn = [&](const std::string& role, const std::string& content) {
        out += "<|start_of_role|>" + role + "<|end_of_role|>" + content + "<|end_of_text|>\n";
    };
    size_t first = 0;
    std::string system = default_system;
    if (!messages.empty() && messages[0].role == "system") {
        first = 1;
        if (!messages[0].content.empty() || !empty_system_default) system = messages[0].content;
    }
    if (first == 1 || !system.empty()) turn("system", system);
    for (size_t i = first; i < messages.size(); ++i) turn(messages[i].role, messages[i].content);
    if (gen) out += "<|start_of_role|>assistant<|end_of_role|>";
    return out;
}

// Gemma 4: "<bos>", turns "<|turn>" + role ("model" for the assistant) + "\n" + trimmed content + "<turn|>\n",
// a system role of its own. Earlier answers lose their thinking ("<|channel>...<channel|>"). With thinking off
// (enable_thinking's default) the generation prompt closes an empty thought channel.
std::string render_gemma4(const std::vector<ChatMessage>& messages, bool gen) {
    std::string out = "<bos>";
    for (const ChatMessage& m : messages) {
        std::string content = m.content;
        if (m.role == "assistant") {
            std::string kept;
            size_t at = 0;
            for (;;) {
                const size_t close = content.find("<channel|>", at);
                const std::string part = content.substr(at, close == std::string::npos ? std::string::npos : close - at);
                kept += part.substr(0, part.find("<|channel>"));
                if (close == std::string::npos) break;
                at = close + 10;
            }
            content = kept;
        }
        out += "<|turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n" + strip(content) + "<turn|>\n";
    }
    if (gen) out += "<|turn>model\n<|channel>thought\n<channel|>";
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
        t.always_prompt_ = !has(source, "add_generation_prompt");
        return t;
    }
    if (has(source, "<|header_start|>") && has(source, "<|header_end|>")) return ChatTemplate("llama4");
    if (has(source, "<start_of_turn>")) return ChatTemplate("gemma");
    if (has(source, "<|turn>") && has(source, "<turn|>")) return ChatTemplate("gemma4");
    if (has(source, "<|start|>") && has(source, "<|channel|>")) return ChatTemplate("gpt-oss");
    if (has(source, "<|start_of_role|>")) {
        ChatTemplate t("granite");
        t.source_ = source;
        t.empty_system_default_ = has(source, "if ns.system_message %}");
        return t;
    }
    if (has(source, kDeepSeekUser)) {
        ChatTemplate t("deepseek");
        t.think_prompt_ = has(source, std::string(kDeepSeekAssistant) + "<think>\\n");
        t.drop_reasoning_ = has(source, "</think>");
        t.think_closed_ = has(source, "{{'</think>'}}");
        t.last_system_only_ = has(source, "set ns.system_prompt = message['content']");
        return t;
    }
    if (has(source, "<|im_sep|>")) return ChatTemplate("phi4");
    if (has(source, "<|im_start|>")) {
        // SmolLM3 writes a metadata system block of its own: not rendered (plain, with the warning).
        if (has(source, "## Metadata")) return unrecognized_plain();
        if (!has(source, "<think>")) return ChatTemplate("chatml", chatml_default_system(source));
        ChatTemplate t("qwen3");
        t.think_prompt_ = has(source, "'<think>\\n'") || has(source, "assistant\\n<think>\\n'");
        t.trim_ = has(source, "|trim");
        t.think_after_query_ = has(source, "last_query_index");
        t.thinking_switch_ = has(source, "enable_thinking");
        t.last_answer_whole_ = !t.think_after_query_ && has(source, "if not loop.last %}");
        return t;
    }
    if (has(source, "[SYSTEM_PROMPT]")) {
        ChatTemplate t("mistral-v7");
        t.source_ = source;
        t.inst_open_space_ = has(source, "'[INST] '") || has(source, "\"[INST] \"");
        return t;
    }
    if (has(source, "[INST]")) {
        if (has(source, "<<SYS>>")) return ChatTemplate("llama2");
        ChatTemplate t("mistral");
        t.inst_open_space_ = has(source, "[INST] '") || has(source, "[INST] \"");
        t.inst_close_space_ = has(source, "' [/INST]") || has(source, "\" [/INST]");
        t.system_on_last_user_ = has(source, "loop.last and system_message");
        return t;
    }
    if (has(source, "<|user|>") && has(source, "<|end|>")) {
        ChatTemplate t("phi3");
        t.eos_without_prompt_ = has(source, "eos_token");
        return t;
    }
    if (has(source, "'<|' + message['role'] + '|>' + message['content']") && has(source, "<|end|>"))
        return ChatTemplate("phi4-mini");
    if (has(source, "<|user|>") && (has(source, "</s>") || has(source, "eos_token") || has(source, "<|assistant|>")))
        return ChatTemplate("zephyr");
    if (!source.empty()) return unrecognized_plain();

    const std::string hint = lower(model_hint);
    if (has(hint, "llama-3") || has(hint, "llama3")) return ChatTemplate("llama3");
    if (has(hint, "gemma")) return ChatTemplate("gemma");
    if (has(hint, "phi-3") || has(hint, "phi3")) return of_family("phi3");
    // Phi-4-mini has a template of its own ("<|user|>" without the newline): not phi4's.
    if ((has(hint, "phi-4") || has(hint, "phi4")) && has(hint, "mini")) return ChatTemplate("phi4-mini");
    if (has(hint, "phi-4") || has(hint, "phi4")) return ChatTemplate("phi4");
    if (has(hint, "qwen3")) return of_family("qwen3");
    if (has(hint, "qwen") || has(hint, "smollm")) return ChatTemplate("chatml");
    if (has(hint, "tinyllama") || has(hint, "zephyr")) return ChatTemplate("zephyr");
    if (has(hint, "mistral")) return ChatTemplate("mistral");
    if (has(hint, "deepseek-v3")) return ChatTemplate("deepseek");
    if (has(hint, "deepseek-r1")) {
        ChatTemplate t("deepseek");
        t.drop_reasoning_ = true;
        return t;
    }
    if (has(hint, "llama-2") && has(hint, "chat")) return ChatTemplate("llama2");
    return ChatTemplate("plain");
}

ChatTemplate ChatTemplate::unrecognized_plain() {
    ChatTemplate plain("plain");
    plain.unrecognized_ = true;
    return plain;
}

ChatTemplate ChatTemplate::of_family(std::string_view family) {
    constexpr std::string_view kFamilies[] = {"llama2", "llama3", "llama4", "chatml", "qwen3", "gemma", "gemma4", "phi3", "phi4", "phi4-mini", "zephyr",
                                              "mistral", "mistral-v7", "deepseek", "gpt-oss", "granite", "plain"};
    if (std::find(std::begin(kFamilies), std::end(kFamilies), family) == std::end(kFamilies)) {
        std::string names;
        for (std::string_view f : kFamilies) names += (names.empty() ? "" : ", ") + std::string(f);
        throw BadInput("chat template family '" + std::string(family) + "' is unknown (" + names + ")");
    }
    // Rendered as the family's current published template is.
    ChatTemplate t{std::string(family)};
    t.think_after_query_ = t.thinking_switch_ = family == "qwen3";
    t.eos_without_prompt_ = family == "phi3";
    return t;
}

bool ChatTemplate::renders_bos() const {
    return family_ == "llama3" || family_ == "llama4" || family_ == "llama2" || family_ == "mistral" || family_ == "mistral-v7" || family_ == "gemma" ||
           family_ == "gemma4" || family_ == "deepseek";
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options) const {
    if (!options.continue_final_message) return render_family(messages, options.add_generation_prompt, options.enable_thinking);
    if (options.add_generation_prompt)
        throw BadInput("continue_final_message and add_generation_prompt cannot both be true");
    if (messages.empty()) throw BadInput("continue_final_message needs a final message");
    // HF's apply_chat_template: cut after the last place the final message's content stands, with its
    // leading white space or without its trailing white space as the template wrote it.
    std::string text = render_family(messages, false, options.enable_thinking);
    const std::string& final_message = messages.back().content;
    const std::string stripped = strip(final_message);
    const size_t at = text.rfind(stripped);
    if (at == std::string::npos)
        throw BadInput("continue_final_message: the final message's content is not in the chat as the template renders it");
    const std::string_view lstripped =
        std::string_view(final_message).substr(std::min(final_message.find_first_not_of(kSpace), final_message.size()));
    text.resize(at + (std::string_view(text).substr(at, lstripped.size()) == lstripped ? lstripped.size() : stripped.size()));
    return text;
}

std::string ChatTemplate::render_family(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                        std::optional<bool> enable_thinking) const {
    if (family_ == "llama3")
        return render_llama3(messages, add_generation_prompt || always_prompt_, dated_system_, date_from_clock_ ? local_time_string("%d %b %Y") : "26 Jul 2024");
    if (family_ == "llama4") return render_llama4(messages, add_generation_prompt);
    if (family_ == "chatml") return render_chatml(messages, add_generation_prompt, default_system_);
    if (family_ == "qwen3") return render_qwen3(messages, add_generation_prompt, think_prompt_, trim_, think_after_query_, last_answer_whole_,
                                                    thinking_switch_ && enable_thinking == false);
    if (family_ == "gemma") return render_gemma(messages, add_generation_prompt);
    if (family_ == "gemma4") return render_gemma4(messages, add_generation_prompt);
    if (family_ == "phi3") return render_phi3(messages, add_generation_prompt, eos_without_prompt_);
    if (family_ == "phi4") return render_phi4(messages, add_generation_prompt);
    if (family_ == "phi4-mini") return render_phi4_mini(messages, add_generation_prompt);
    if (family_ == "llama2") return render_llama2(messages);
    if (family_ == "mistral") return render_mistral(messages, inst_open_space_, inst_close_space_, system_on_last_user_);
    if (family_ == "mistral-v7") return render_mistral_v7(messages, template_default_system(source_), inst_open_space_);
    if (family_ == "deepseek") return render_deepseek(messages, add_generation_prompt, think_prompt_, drop_reasoning_, think_closed_, last_system_only_);
    if (family_ == "gpt-oss") return render_gpt_oss(messages, add_generation_prompt, local_time_string("%Y-%m-%d"));
    if (family_ == "granite") return render_granite(messages, add_generation_prompt, template_default_system(source_), empty_system_default_);
    if (family_ == "zephyr") return render_zephyr(messages, add_generation_prompt);
    return render_plain(messages, add_generation_prompt);
}

}  // namespace kvscope
