// UTF-8 scanning for the tokenizers and the streaming detokenizer: classify the sequence at a byte
// offset (complete, invalid, or cut short by the end of the input), and the lossy conversion that
// replaces each maximal invalid subpart with one U+FFFD (the Unicode "best practice" that Rust's
// from_utf8_lossy and the HF tokenizers decoders follow). Pure functions, safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvscope {

enum class Utf8Status { Complete, Invalid, Truncated };

struct Utf8Scan {
    Utf8Status status;
    // Complete: bytes of the character. Invalid: bytes of the maximal invalid subpart (>= 1), to be
    // replaced by one U+FFFD. Truncated: bytes left before the end of input (a valid prefix that
    // later bytes could still complete).
    size_t length;
};

// Scans the sequence starting at text[pos]; pos must be < text.size().
Utf8Scan utf8_scan(std::string_view text, size_t pos);

// Bytes of the character at text[pos] when it is complete and valid, else 1 (one raw byte), so that
// callers walking "characters" of arbitrary bytes always make progress.
size_t utf8_char_length(std::string_view text, size_t pos);

bool utf8_is_valid(std::string_view text);

// text with every invalid or truncated subpart replaced by U+FFFD.
std::string utf8_lossy(std::string_view text);

void utf8_append(std::string& out, char32_t codepoint);

inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

}  // namespace kvscope
