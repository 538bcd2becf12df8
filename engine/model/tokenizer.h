// Tokenizer: text <-> token ids for the three kinds kvscope runs: SentencePiece-style BPE with byte
// fallback (Llama 2, TinyLlama, stories260K; from tokenizer.json merges or GGUF scores), GPT-2
// byte-level BPE (Llama 3, Qwen2, SmolLM) and the raw-bytes tokenizer of dummy: models.
// Immutable after construction: every method is const and safe to call from several threads.
#pragma once

#include "model/tokenizer_bpe.h"
#include "model/tokenizer_pre_splitter.h"
#include "model/tokenizer_vocab.h"

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvscope {

class Tokenizer {
public:
    // Hugging Face files: tokenizer.json (required) and tokenizer_config.json (path may be "").
    // Throws BadInput naming the file on unreadable or malformed files and unsupported models.
    static Tokenizer from_hf_files(const std::string& tokenizer_json, const std::string& tokenizer_config_json);
    // The same from file contents; source names the origin in error messages.
    static Tokenizer from_hf_json(std::string_view tokenizer_json_text, std::string_view tokenizer_config_text,
                                  const std::string& source = "tokenizer.json");
    // A vocab described by GGUF keys (or anything else). Throws BadInput naming `source`.
    static Tokenizer from_vocab(TokenizerVocab vocab, const std::string& source = "tokenizer vocab");
    // dummy: models: ids 0..255 are bytes, 256 = <s> (BOS), 257 = </s> (EOS), the rest decode to "".
    static Tokenizer bytes(int vocab_size);

    // Text to ids. Special and added tokens written in the text map to their ids (leftmost-longest
    // match), as vLLM's HF tokenizers and llama.cpp's server and CLI (parse_special) do for a prompt, so
    // that a prompt formatted by hand ("<|im_start|>user...") and a rendered chat template read alike; the
    // text between them goes through the vocab's pre-tokenizer and BPE.
    // BOS is prepended when add_bos is set AND the model adds one (vocab.add_bos, bos_id >= 0), as
    // llama.cpp does; Qwen2-style vocabs never get one.
    std::vector<int32_t> encode(std::string_view text, bool add_bos) const;

    // Whole-sequence decode, as the HF decoders do: metaspace -> space, byte fallback fused, one
    // leading space stripped (SentencePiece with a space prefix), GPT-2 byte decoder; invalid UTF-8
    // becomes U+FFFD. Throws BadInput for ids out of range.
    std::string decode(std::span<const int32_t> ids, bool skip_special = true) const;
    // Raw bytes of one token (may be part of a UTF-8 sequence); "" for unused ids.
    const std::string& token_to_bytes(int32_t id) const;

    int vocab_size() const { return static_cast<int>(vocab_.tokens.size()); }
    int32_t bos_id() const { return vocab_.bos_id; }
    bool adds_bos() const { return vocab_.add_bos && vocab_.bos_id >= 0; }
    bool is_eos(int32_t id) const;
    std::vector<int32_t> eos_ids() const;
    // Control and unknown tokens: skipped by decode(skip_special).
    bool is_special(int32_t id) const;
    // Strip one leading space from the decoded text (SentencePiece vocabs with a space prefix).
    bool strips_leading_space() const;
    TokenizerKind kind() const { return vocab_.kind; }
    std::string_view kind_name() const;
    const std::string& piece(int32_t id) const;
    const TokenizerVocab& vocab() const { return vocab_; }
    // tokenizer_config.json "chat_template" ("" when absent), for ChatTemplate::detect.
    const std::string& chat_template() const { return chat_template_; }

private:
    Tokenizer() = default;
    void build(const std::string& source);
    void check_id(int32_t id) const;
    void encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
    void encode_spm(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
    void encode_byte_level(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
    void push_byte_fallback(std::string_view bytes, std::vector<int32_t>& out) const;
    int32_t find_piece(std::string_view text) const;
    int32_t type_of(int32_t id) const { return vocab_.token_types[static_cast<size_t>(id)]; }

    TokenizerVocab vocab_;
    std::string chat_template_;
    std::vector<std::string> token_bytes_;  // id -> decoded bytes
    // Pieces that BPE may build, and by what they are found (normal and user-defined tokens).
    struct StringHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> piece_to_id_;
    BpeMergeTable merges_;
    std::array<int32_t, 256> byte_ids_{};  // byte -> <0xXX> (SentencePiece) or its GPT-2 char (byte-level); -1 if absent
    TokenizerPreSplitter splitter_;
    // Special and added tokens as written (the lowest id where two share a text), and for each first byte
    // the lengths they come in, longest first: a text position costs one lookup per length, not one
    // comparison per token (Gemma 3 has 6406 added tokens, thousands of them starting with '<').
    std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> added_by_text_;
    std::array<std::vector<uint32_t>, 256> added_lengths_by_first_byte_;
};

}  // namespace kvscope
