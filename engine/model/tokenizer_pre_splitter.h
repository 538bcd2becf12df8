// TokenizerPreSplitter: the byte-level BPE pre-tokenizer. Splits text into words with a sequence of
// PCRE2 regexes (HF Split behavior "Isolated": matches and the gaps between them both become words),
// and knows the patterns llama.cpp uses for GGUF tokenizer.ggml.pre names. The compiled patterns are
// immutable and shared by copies; each split() call owns its match data, so it is thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

// GPT-2's pattern as tokenizer.json's ByteLevel(use_regex) applies it.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's Split pattern: case-insensitive contractions, digits in groups of 1-3.
inline constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's: as Llama 3 but single digits.
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class TokenizerPreSplitter {
public:
    TokenizerPreSplitter() = default;  // no patterns: the whole text is one word
    // Throws BadInput naming `source` and the pattern when one does not compile.
    TokenizerPreSplitter(const std::vector<std::string>& patterns, const std::string& source);

    // What a GGUF tokenizer.ggml.pre name means, as llama.cpp reads it: the split patterns (each applied
    // to the words of the one before, as tokenizer.json's Split sequence), and whether a word that is a
    // piece of the vocab is taken whole before any merge (ignore_merges); nullopt when unknown.
    struct PreRule {
        std::vector<std::string> patterns;
        bool ignore_merges = false;
    };
    static std::optional<PreRule> rule_for_pre(std::string_view pre_name);

    // Words of `text` in order; they concatenate to `text`. Invalid UTF-8 bytes never match a
    // pattern, so they end up in gap words and still reach the byte-level encoder.
    std::vector<std::string_view> split(std::string_view text) const;

    bool empty() const { return codes_.empty(); }

private:
    struct Code;
    std::vector<std::shared_ptr<const Code>> codes_;
};

}  // namespace kvscope
