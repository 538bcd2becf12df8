// Regex pre-tokenization with PCRE2 (see tokenizer_pre_splitter.h). PCRE2_UCP makes \s, \w and
// \p{..} Unicode-aware like the HF (Oniguruma) and llama.cpp splitters; PCRE2_MATCH_INVALID_UTF lets
// arbitrary bytes be searched without a separate validation pass.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer_pre_splitter.h"

#include "util/errors.h"
#include "util/utf8.h"

#include <pcre2.h>

namespace kvscope {

struct TokenizerPreSplitter::Code {
    pcre2_code* code = nullptr;
    ~Code() { pcre2_code_free(code); }
};

TokenizerPreSplitter::TokenizerPreSplitter(const std::vector<std::string>& patterns, const std::string& source) {
    for (const std::string& pattern : patterns) {
        int error = 0;
        PCRE2_SIZE error_offset = 0;
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error,
                                         &error_offset, nullptr);
        if (!code) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error, message, sizeof message);
            throw BadInput(source + ": pre-tokenizer regex '" + pattern + "' does not compile at offset " +
                           std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message));
        }
        // JIT is an optimisation only: when unavailable the interpreter gives the same matches.
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        auto owned = std::make_shared<Code>();
        owned->code = code;
        codes_.push_back(std::move(owned));
    }
}

namespace {

// The models' own tokenizer.json Split patterns (PCRE2 reads them as Oniguruma does for these).
constexpr std::string_view kO200kPattern =  // GPT-4o, Llama 4
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kTekkenPattern =  // Mistral Nemo, Mistral Small 3, Pixtral
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen35Pattern =  // Qwen3.5: combining marks stay with their letters
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
    for (std::string_view n : names)
        if (name == n) return true;
    return false;
}

}  // namespace

std::optional<TokenizerPreSplitter::PreRule> TokenizerPreSplitter::rule_for_pre(std::string_view name) {
    using P = std::vector<std::string>;
    if (is_one_of(name, {"llama-bpe", "llama3", "llama-v3", "llama-3", "falcon3", "falcon-h1", "pixtral", "lfm2", "midm-2.0"}))
        return PreRule{P{std::string(kLlama3SplitPattern)}, true};
    if (is_one_of(name, {"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"})) return PreRule{P{std::string(kLlama3SplitPattern)}};
    if (is_one_of(name, {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "kormo", "grok-2", "solar-open"}))
        return PreRule{P{std::string(kQwen2SplitPattern)}};
    if (name == "qwen35") return PreRule{P{std::string(kQwen35Pattern)}};
    if (name == "tekken") return PreRule{P{std::string(kTekkenPattern)}, true};
    if (is_one_of(name, {"gpt-4o", "llama4", "kanana2"})) return PreRule{P{std::string(kO200kPattern)}};
    // Digits isolated first, then GPT-2's pattern.
    if (is_one_of(name, {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"}))
        return PreRule{P{R"(\p{N})", std::string(kGpt2SplitPattern)}};
    if (is_one_of(name, {"", "gpt2", "gpt-2", "default", "mpt", "olmo", "phi-2", "jais", "exaone4", "trillion",
                         "granite-docling", "a.x-4.0", "gigachat", "mellum", "roberta-bpe"}))
        return PreRule{P{std::string(kGpt2SplitPattern)}};
    if (is_one_of(name, {"deepseek-v3", "hunyuan-dense"}))
        return PreRule{P{R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
                         R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}};
    if (name == "deepseek-coder")
        return PreRule{P{R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", R"(\p{N})"}};
    if (name == "falcon")
        return PreRule{P{R"([\p{P}\$\+<=>\^~\|`]+)", std::string(kGpt2SplitPattern), "[0-9][0-9][0-9]"}};
    return std::nullopt;
}

std::vector<std::string_view> TokenizerPreSplitter::split(std::string_view text) const {
    std::vector<std::string_view> words;
    if (!text.empty()) words.push_back(text);
    for (const auto& code : codes_) {
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(code->code, nullptr);
        std::vector<std::string_view> next;
        next.reserve(words.size() * 2);
        for (std::string_view word : words) {
            const auto* subject = reinterpret_cast<PCRE2_SPTR>(word.data());
            size_t last = 0, offset = 0;
            while (offset < word.size()) {
                const int rc = pcre2_match(code->code, subject, word.size(), offset, 0, md, nullptr);
                if (rc < 0) break;  // no match (or a matching limit): the rest is one gap word
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
                const size_t begin = ov[0], end = ov[1];
                if (begin > last) next.push_back(word.substr(last, begin - last));
                if (end > begin) {
                    next.push_back(word.substr(begin, end - begin));
                    last = end;
                    offset = end;
                } else {
                    // An empty match makes no word; step one character to avoid looping on it.
                    last = begin;
                    offset = begin + utf8_char_length(word, begin);
                }
            }
            if (last < word.size()) next.push_back(word.substr(last));
        }
        pcre2_match_data_free(md);
        words = std::move(next);
    }
    return words;
}

}  // namespace kvscope
