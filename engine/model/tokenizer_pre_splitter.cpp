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

std::optional<std::vector<std::string>> TokenizerPreSplitter::patterns_for_pre(std::string_view name) {
    if (name == "llama-bpe" || name == "llama3" || name == "llama-v3" || name == "llama-3")
        return std::vector<std::string>{std::string(kLlama3SplitPattern)};
    if (name == "qwen2" || name == "deepseek-r1-qwen")
        return std::vector<std::string>{std::string(kQwen2SplitPattern)};
    // llama.cpp: digits isolated first, then GPT-2's pattern.
    if (name == "smollm" || name == "starcoder" || name == "refact" || name == "command-r")
        return std::vector<std::string>{R"(\p{N})", std::string(kGpt2SplitPattern)};
    if (name.empty() || name == "gpt2" || name == "gpt-2" || name == "default" || name == "mpt" || name == "olmo")
        return std::vector<std::string>{std::string(kGpt2SplitPattern)};
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
