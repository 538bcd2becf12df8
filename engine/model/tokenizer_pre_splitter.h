// TokenizerPreSplitter: the byte-level BPE pre-tokenizer. Splits text into words with a sequence of
// PCRE2 regexes, each with one of HF tokenizers' split behaviors (HF's Split, Punctuation, Digits,
// Whitespace, WhitespaceSplit and ByteLevel regex are all such steps), and knows the patterns llama.cpp
// uses for GGUF tokenizer.ggml.pre names. The compiled patterns are immutable and shared by copies;
// each split() call owns its match data, so it is thread-safe.
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

// What becomes of a pattern's matches (the delimiters) and the gaps between them: HF tokenizers'
// SplitDelimiterBehavior. Splitting "the-final--countdown" on "-":
enum class SplitBehavior {
    Removed,             // the final countdown: delimiters dropped
    Isolated,            // the - final - - countdown
    MergedWithPrevious,  // the- final- - countdown: a delimiter joins the gap before it
    MergedWithNext,      // the -final - -countdown: a delimiter joins the gap after it
    Contiguous,          // the - final -- countdown: a run of delimiters is one word
};

// One pre-tokenizer step, as HF's NormalizedString::split applies it to each word of the step before.
struct SplitRule {
    std::string pattern;  // PCRE2 syntax
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;         // the matches are the words and the gaps the delimiters (HF Split invert)
    bool on_byte_level = false;  // matched against the word's byte-level characters ("Ġ" for a space),
                                 // as a step after HF's ByteLevel pre-tokenizer sees it
};

class TokenizerPreSplitter {
public:
    TokenizerPreSplitter() = default;  // no patterns: the whole text is one word
    // Throws BadInput naming `source` and the pattern when one does not compile.
    TokenizerPreSplitter(const std::vector<SplitRule>& rules, const std::string& source);
    // Each pattern Isolated, as llama.cpp applies a GGUF pre-tokenizer's.
    TokenizerPreSplitter(const std::vector<std::string>& patterns, const std::string& source);

    // What a GGUF tokenizer.ggml.pre name means, as llama.cpp reads it: the split patterns (each applied
    // to the words of the one before, as tokenizer.json's Split sequence), and whether a word that is a
    // piece of the vocab is taken whole before any merge (ignore_merges); nullopt when unknown.
    struct PreRule {
        std::vector<std::string> patterns;
        bool ignore_merges = false;
    };
    static std::optional<PreRule> rule_for_pre(std::string_view pre_name);

    // Words of `text` in order, each a view into it, none empty. They concatenate to `text` unless a
    // Removed step dropped delimiters (HF's Whitespace and WhitespaceSplit drop white space): dropped
    // bytes make no tokens. Invalid UTF-8 bytes never match a pattern over the text, so they end up
    // in gaps: words, or delimiters where the step inverts.
    std::vector<std::string_view> split(std::string_view text) const;

    bool empty() const { return steps_.empty(); }

private:
    struct Step;
    std::vector<std::shared_ptr<const Step>> steps_;
};

}  // namespace kvscope
