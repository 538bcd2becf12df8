// Regex pre-tokenization with PCRE2 (see tokenizer_pre_splitter.h). PCRE2_UCP makes \s, \w and
// \p{..} Unicode-aware like the HF (Oniguruma) and llama.cpp splitters; PCRE2_MATCH_INVALID_UTF lets
// arbitrary bytes be searched without a separate validation pass.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer_pre_splitter.h"

#include "model/tokenizer_byte_level.h"
#include "util/errors.h"
#include "util/utf8.h"

#include <pcre2.h>

#include <algorithm>

namespace kvscope {

struct TokenizerPreSplitter::Step {
    pcre2_code* code = nullptr;
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false, on_byte_level = false;
    ~Step() { pcre2_code_free(code); }
};

TokenizerPreSplitter::TokenizerPreSplitter(const std::vector<SplitRule>& rules, const std::string& source) {
    for (const SplitRule& rule : rules) {
        const std::string& pattern = rule.pattern;
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
        auto step = std::make_shared<Step>();
        step->code = code;
        step->behavior = rule.behavior;
        step->invert = rule.invert;
        step->on_byte_level = rule.on_byte_level;
        steps_.push_back(std::move(step));
    }
}

namespace {

std::vector<SplitRule> isolated(const std::vector<std::string>& patterns) {
    std::vector<SplitRule> rules;
    for (const std::string& pattern : patterns) rules.push_back({pattern});
    return rules;
}

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

TokenizerPreSplitter::TokenizerPreSplitter(const std::vector<std::string>& patterns, const std::string& source)
    : TokenizerPreSplitter(isolated(patterns), source) {}

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

namespace {

// A stretch of a word: a delimiter (a match, or a gap where the step inverts) or a gap between them.
struct Piece {
    size_t begin, end;
    bool delimiter;
};

// HF's find_matches over Oniguruma's find_iter (the onig crate, 6.x): the matches in order, empty
// ones included (they still cut the word), with the gaps between them, covering all of `subject`.
// An empty match where the last match ended is skipped; after an empty match the search moves on
// by one character.
void find_pieces(const pcre2_code* code, pcre2_match_data* md, std::string_view subject, bool invert,
                 std::vector<Piece>& pieces) {
    pieces.clear();
    const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
    size_t covered = 0, search = 0;
    std::optional<size_t> last_end;
    while (search <= subject.size()) {
        // No match (or a matching limit): the rest is one gap.
        if (pcre2_match(code, data, subject.size(), search, 0, md, nullptr) < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t begin = ov[0], end = ov[1];
        search = begin < end ? end : end + (end < subject.size() ? utf8_char_length(subject, end) : 1);
        if (begin == end && last_end == end) continue;
        last_end = end;
        if (begin > covered) pieces.push_back({covered, begin, invert});
        pieces.push_back({begin, end, !invert});
        covered = end;
    }
    if (covered < subject.size()) pieces.push_back({covered, subject.size(), invert});
}

// Whether a piece joins the word of the piece before it (HF's NormalizedString::split).
bool joins_previous(SplitBehavior behavior, bool previous_delimiter, bool delimiter) {
    switch (behavior) {
        case SplitBehavior::Contiguous: return delimiter == previous_delimiter;
        case SplitBehavior::MergedWithPrevious: return delimiter && !previous_delimiter;
        case SplitBehavior::MergedWithNext: return previous_delimiter && !delimiter;
        case SplitBehavior::Removed:
        case SplitBehavior::Isolated: return false;
    }
    return false;
}

// The words `pieces` of `word` make under `behavior`; empty words are dropped, as HF's
// PreTokenizedString::split drops them.
void join_pieces(SplitBehavior behavior, std::string_view word, const std::vector<Piece>& pieces,
                 std::vector<std::string_view>& words) {
    size_t begin = 0, end = 0;  // the word being built
    for (size_t i = 0; i < pieces.size(); ++i) {
        const Piece& p = pieces[i];
        if (behavior == SplitBehavior::Removed && p.delimiter) continue;
        if (i > 0 && joins_previous(behavior, pieces[i - 1].delimiter, p.delimiter)) {
            end = p.end;
            continue;
        }
        if (end > begin) words.push_back(word.substr(begin, end - begin));
        begin = p.begin;
        end = p.end;
    }
    if (end > begin) words.push_back(word.substr(begin, end - begin));
}

// find_pieces over the byte-level characters of `word`, with the pieces' bounds mapped back to
// bytes of `word`. One character stands for one byte, so a character boundary is a byte boundary.
void find_byte_level_pieces(const pcre2_code* code, pcre2_match_data* md, std::string_view word, bool invert,
                            std::string& image, std::vector<size_t>& image_offsets, std::vector<Piece>& pieces) {
    image.clear();
    image_offsets.clear();
    for (char c : word) {
        image_offsets.push_back(image.size());
        image += byte_level_char(static_cast<uint8_t>(c));
    }
    image_offsets.push_back(image.size());
    find_pieces(code, md, image, invert, pieces);
    auto byte_of = [&](size_t offset) {
        return static_cast<size_t>(std::lower_bound(image_offsets.begin(), image_offsets.end(), offset) -
                                   image_offsets.begin());
    };
    for (Piece& p : pieces) {
        p.begin = byte_of(p.begin);
        p.end = byte_of(p.end);
    }
}

}  // namespace

std::vector<std::string_view> TokenizerPreSplitter::split(std::string_view text) const {
    std::vector<std::string_view> words;
    if (!text.empty()) words.push_back(text);
    std::vector<Piece> pieces;
    std::string image;
    std::vector<size_t> image_offsets;
    for (const auto& step : steps_) {
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(step->code, nullptr);
        std::vector<std::string_view> next;
        next.reserve(words.size() * 2);
        for (std::string_view word : words) {
            if (step->on_byte_level)
                find_byte_level_pieces(step->code, md, word, step->invert, image, image_offsets, pieces);
            else
                find_pieces(step->code, md, word, step->invert, pieces);
            join_pieces(step->behavior, word, pieces, next);
        }
        pcre2_match_data_free(md);
        words = std::move(next);
    }
    return words;
}

}  // namespace kvscope
