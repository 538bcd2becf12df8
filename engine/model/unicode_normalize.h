// Unicode normalization of text before tokenization: tokenizer.json's NFC normalizer (Qwen2 / Qwen2.5 /
// Qwen3) and NFKC (some SentencePiece vocabs), by utf8proc, as HF tokenizers apply them: a decomposed
// "e" + U+0301 is "é" (one token) to those models, not two.
#pragma once

#include <string>
#include <string_view>

namespace kvscope {

enum class UnicodeNormalization { none, nfc, nfkc };

// text in the given form. Text that is not valid UTF-8 comes back unchanged (HF tokenizers never see such
// text: Rust strings are valid UTF-8; kvscope tokenizes the bytes it was given).
std::string unicode_normalize(std::string_view text, UnicodeNormalization form);

}  // namespace kvscope
