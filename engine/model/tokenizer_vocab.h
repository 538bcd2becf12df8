// TokenizerVocab: a neutral description of a tokenizer, filled either from a Hugging Face
// tokenizer.json (tokenizer_hf_json.cpp) or from GGUF tokenizer.ggml.* keys (the model loader).
// Tokenizer::from_vocab validates it and builds the lookup tables; this header holds data only.
#pragma once

#include "model/tokenizer_pre_splitter.h"
#include "model/unicode_normalize.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope {

// SentencePiece's word boundary, "▁" (U+2581), which its vocabularies hold in place of a space.
inline constexpr std::string_view kMetaspace = "\xE2\x96\x81";

enum class TokenizerKind { SentencePieceBpe, ByteLevelBpe, Bytes };

// GGUF token types (llama.cpp's llama_token_type); tokenizer.json files are mapped onto them.
enum TokenType : int32_t {
    kTokenNormal = 1,
    kTokenUnknown = 2,
    kTokenControl = 3,      // special: <s>, </s>, <|eot_id|>; skipped by decode(skip_special)
    kTokenUserDefined = 4,  // added, not special: matched in chat text, decoded as written
    kTokenUnused = 5,       // decodes to "" and is never produced
    kTokenByte = 6,         // SentencePiece byte fallback <0xXX>
};

struct TokenizerVocab {
    TokenizerKind kind = TokenizerKind::SentencePieceBpe;
    std::vector<std::string> tokens;        // id -> piece as stored ("▁the", "<0x0A>", "Ġthe")
    std::vector<float> scores;              // SentencePiece scores (GGUF llama vocab); may be empty
    std::vector<int32_t> token_types;       // TokenType per id; may be empty (then derived)
    std::vector<std::string> merges;        // "a b", rank = index; may be empty for SentencePiece (then scores decide)
    std::string pre_tokenizer;              // GGUF tokenizer.ggml.pre ("llama-bpe", "qwen2", "smollm", "gpt2", "default", ...) or empty
    std::vector<SplitRule> split_rules;     // tokenizer.json's pre-tokenizer steps; take precedence over pre_tokenizer
    int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
    std::vector<int32_t> extra_eos_ids;     // e.g. <|eot_id|>, <|im_end|>
    bool add_bos = true;
    bool add_space_prefix = true;           // SentencePiece: prepend "▁" (legacy metaspace)

    // tokenizer.json variants; the defaults are what a GGUF vocab means.
    bool space_prefix_first_only = false;   // Metaspace prepend_scheme "first": not after special tokens
    bool metaspace_split = false;           // Metaspace split=true: words break before each "▁"
    bool byte_level_add_prefix_space = false;  // ByteLevel add_prefix_space: prepend " " to the text
    UnicodeNormalization normalization = UnicodeNormalization::none;  // tokenizer.json normalizer NFC / NFKC
    bool ignore_merges = false;             // a word that is itself a piece is one token (Llama 3;
                                            // also implied by the llama-bpe pre-tokenizer, as in llama.cpp)
};

}  // namespace kvscope
