// Tokenizer (see tokenizer.h): validation of a TokenizerVocab into lookup tables, special-token
// splitting, the per-kind encoders and the decoder. The BPE loop is in tokenizer_bpe.cpp, regex
// pre-splitting in tokenizer_pre_splitter.cpp, tokenizer.json parsing in tokenizer_hf_json.cpp.
#include "model/tokenizer.h"

#include "model/tokenizer_byte_level.h"
#include "model/tokenizer_hf_json.h"
#include "util/errors.h"
#include "util/mapped_file.h"
#include "util/utf8.h"

#include <algorithm>
#include <optional>

namespace kvscope {

namespace {

// "<0x0A>" -> 0x0A
std::optional<uint8_t> parse_byte_piece(std::string_view piece) {
    if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
    int value = 0;
    for (char c : piece.substr(3, 2)) {
        value <<= 4;
        if (c >= '0' && c <= '9') value |= c - '0';
        else if (c >= 'A' && c <= 'F') value |= c - 'A' + 10;
        else if (c >= 'a' && c <= 'f') value |= c - 'a' + 10;
        else return std::nullopt;
    }
    return static_cast<uint8_t>(value);
}

std::string read_file(const std::string& path) {
    const MappedFile file(path);  // a regular file, or BadInput naming it (a symlink to /dev/urandom, a FIFO)
    return file.size() ? std::string(reinterpret_cast<const char*>(file.data()), file.size()) : std::string();
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(text.size() + text.size() / 2);
    for (size_t pos = 0;;) {
        const size_t hit = text.find(from, pos);
        if (hit == std::string_view::npos) {
            out.append(text.substr(pos));
            return out;
        }
        out.append(text.substr(pos, hit - pos));
        out.append(to);
        pos = hit + from.size();
    }
}

}  // namespace

// ---- construction ----

Tokenizer Tokenizer::from_hf_files(const std::string& tokenizer_json, const std::string& tokenizer_config_json) {
    const std::string json_text = read_file(tokenizer_json);
    const std::string config_text = tokenizer_config_json.empty() ? std::string() : read_file(tokenizer_config_json);
    HfTokenizerSpec spec = parse_hf_tokenizer(json_text, config_text, tokenizer_json, tokenizer_config_json);
    Tokenizer t;
    t.vocab_ = std::move(spec.vocab);
    t.chat_template_ = std::move(spec.chat_template);
    t.build(tokenizer_json);
    return t;
}

Tokenizer Tokenizer::from_hf_json(std::string_view tokenizer_json_text, std::string_view tokenizer_config_text,
                                  const std::string& source) {
    HfTokenizerSpec spec = parse_hf_tokenizer(tokenizer_json_text, tokenizer_config_text, source,
                                              "tokenizer_config.json");
    Tokenizer t;
    t.vocab_ = std::move(spec.vocab);
    t.chat_template_ = std::move(spec.chat_template);
    t.build(source);
    return t;
}

Tokenizer Tokenizer::from_vocab(TokenizerVocab vocab, const std::string& source) {
    Tokenizer t;
    t.vocab_ = std::move(vocab);
    t.build(source);
    return t;
}

Tokenizer Tokenizer::bytes(int vocab_size) {
    if (vocab_size < 258)
        throw BadInput("byte tokenizer: vocab_size " + std::to_string(vocab_size) +
                       " is below 258 (256 bytes, <s>, </s>)");
    TokenizerVocab v;
    v.kind = TokenizerKind::Bytes;
    v.tokens.resize(static_cast<size_t>(vocab_size));
    v.token_types.assign(static_cast<size_t>(vocab_size), kTokenUnused);
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        v.tokens[b] = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
        v.token_types[b] = kTokenByte;
    }
    v.tokens[256] = "<s>";
    v.tokens[257] = "</s>";
    v.token_types[256] = v.token_types[257] = kTokenControl;
    v.bos_id = 256;
    v.eos_id = 257;
    v.add_bos = true;
    v.add_space_prefix = false;
    return from_vocab(std::move(v), "byte tokenizer");
}

void Tokenizer::build(const std::string& source) {
    TokenizerVocab& v = vocab_;
    const size_t n = v.tokens.size();
    if (n == 0) throw BadInput(source + ": the vocabulary has no tokens");
    if (n > static_cast<size_t>(INT32_MAX)) throw BadInput(source + ": the vocabulary is too large");
    if (!v.scores.empty() && v.scores.size() != n)
        throw BadInput(source + ": " + std::to_string(v.scores.size()) + " scores for " + std::to_string(n) + " tokens");
    if (!v.token_types.empty() && v.token_types.size() != n)
        throw BadInput(source + ": " + std::to_string(v.token_types.size()) + " token types for " +
                       std::to_string(n) + " tokens");
    auto check_special = [&](int32_t id, const char* what) {
        if (id < -1 || id >= static_cast<int32_t>(n))
            throw BadInput(source + ": " + what + " id " + std::to_string(id) + " is out of range (vocab size " +
                           std::to_string(n) + ")");
    };
    check_special(v.bos_id, "BOS");
    check_special(v.eos_id, "EOS");
    check_special(v.unk_id, "UNK");
    check_special(v.pad_id, "PAD");
    for (int32_t id : v.extra_eos_ids) {
        if (id < 0) throw BadInput(source + ": extra EOS id " + std::to_string(id) + " is out of range");
        check_special(id, "extra EOS");
    }

    if (v.token_types.empty()) {
        // Derive GGUF-style types: the named special ids are control, <0xXX> pieces are bytes.
        v.token_types.assign(n, kTokenNormal);
        for (size_t id = 0; id < n; ++id)
            if (v.kind != TokenizerKind::ByteLevelBpe && parse_byte_piece(v.tokens[id])) v.token_types[id] = kTokenByte;
        for (int32_t id : {v.bos_id, v.eos_id, v.pad_id})
            if (id >= 0) v.token_types[id] = kTokenControl;
        for (int32_t id : v.extra_eos_ids) v.token_types[id] = kTokenControl;
        if (v.unk_id >= 0) v.token_types[v.unk_id] = kTokenUnknown;
    }
    for (size_t id = 0; id < n; ++id) {
        int32_t& t = v.token_types[id];
        if (t == 0) t = kTokenNormal;  // GGUF "undefined"
        if (t < kTokenNormal || t > kTokenByte)
            throw BadInput(source + ": token " + std::to_string(id) + " has unknown type " + std::to_string(t));
    }

    // Pieces BPE may produce: normal and user-defined ones; the first id wins on duplicates.
    for (size_t id = 0; id < n; ++id) {
        const int32_t t = v.token_types[id];
        if ((t == kTokenNormal || t == kTokenUserDefined) && !v.tokens[id].empty())
            piece_to_id_.try_emplace(v.tokens[id], static_cast<int32_t>(id));
    }

    byte_ids_.fill(-1);
    token_bytes_.assign(n, std::string());
    for (size_t id = 0; id < n; ++id) {
        const std::string& p = v.tokens[id];
        const int32_t t = v.token_types[id];
        if (t == kTokenUnused) continue;
        switch (v.kind) {
            case TokenizerKind::SentencePieceBpe:
            case TokenizerKind::Bytes:
                if (t == kTokenByte) {
                    if (auto b = parse_byte_piece(p)) {
                        token_bytes_[id] = std::string(1, static_cast<char>(*b));
                        if (byte_ids_[*b] < 0) byte_ids_[*b] = static_cast<int32_t>(id);
                        break;
                    }
                }
                token_bytes_[id] = v.kind == TokenizerKind::Bytes ? p : replace_all(p, kMetaspace, " ");
                break;
            case TokenizerKind::ByteLevelBpe:
                if (t == kTokenNormal || t == kTokenByte) {
                    auto bytes = byte_level_decode(p);
                    token_bytes_[id] = bytes ? std::move(*bytes) : p;
                } else {
                    token_bytes_[id] = p;  // added tokens are written as plain text
                }
                break;
        }
    }
    if (v.kind == TokenizerKind::ByteLevelBpe)
        for (int b = 0; b < 256; ++b) byte_ids_[b] = find_piece(byte_level_char(static_cast<uint8_t>(b)));

    for (size_t i = 0; i < v.merges.size(); ++i) {
        const std::string& m = v.merges[i];
        const size_t space = m.find(' ', 1);  // a piece may start with a space only in odd vocabs
        if (space == std::string::npos)
            throw BadInput(source + ": merge #" + std::to_string(i) + " '" + m + "' is not two pieces");
        const std::string_view left = std::string_view(m).substr(0, space), right = std::string_view(m).substr(space + 1);
        const int32_t l = find_piece(left), r = find_piece(right);
        if (l < 0 || r < 0)
            throw BadInput(source + ": merge #" + std::to_string(i) + " '" + m + "' references unknown piece '" +
                           std::string(l < 0 ? left : right) + "'");
        const int32_t merged = find_piece(std::string(left) + std::string(right));
        if (merged < 0)
            throw BadInput(source + ": merge #" + std::to_string(i) + " '" + m + "' makes '" + std::string(left) +
                           std::string(right) + "', which is not in the vocabulary");
        merges_.add(l, r, merged);
    }

    if (v.kind == TokenizerKind::SentencePieceBpe && v.merges.empty() && v.scores.empty())
        throw BadInput(source + ": a SentencePiece vocabulary needs merges or scores");
    if (v.kind == TokenizerKind::ByteLevelBpe) {
        if (v.split_rules.empty()) {
            auto known = TokenizerPreSplitter::rule_for_pre(v.pre_tokenizer);
            if (!known) throw BadInput(source + ": pre-tokenizer '" + v.pre_tokenizer + "' is not supported");
            splitter_ = TokenizerPreSplitter(known->patterns, source);
            v.ignore_merges = v.ignore_merges || known->ignore_merges;
        } else {
            splitter_ = TokenizerPreSplitter(v.split_rules, source);
        }
    }

    // Special and added tokens, matched in text longest first.
    for (size_t id = 0; id < n; ++id) {
        const int32_t t = v.token_types[id];
        if ((t == kTokenControl || t == kTokenUserDefined || t == kTokenUnknown) && !v.tokens[id].empty() &&
            added_by_text_.emplace(v.tokens[id], static_cast<int32_t>(id)).second)
            added_lengths_by_first_byte_[static_cast<uint8_t>(v.tokens[id][0])].push_back(static_cast<uint32_t>(v.tokens[id].size()));
    }
    for (auto& lengths : added_lengths_by_first_byte_) {
        std::sort(lengths.begin(), lengths.end(), std::greater<>());
        lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
    }
}

int32_t Tokenizer::find_piece(std::string_view text) const {
    auto it = piece_to_id_.find(text);
    return it == piece_to_id_.end() ? -1 : it->second;
}

// ---- encoding ----

// The added tokens written in the text (special ones too) as their ids, leftmost longest first; the text
// between them through the vocab's pre-tokenizer and BPE.
std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (add_bos && adds_bos()) out.push_back(vocab_.bos_id);
    size_t segment = 0;
    for (size_t i = 0; i < text.size();) {
        int32_t hit = -1;
        for (uint32_t length : added_lengths_by_first_byte_[static_cast<uint8_t>(text[i])]) {
            if (length > text.size() - i) continue;
            const auto it = added_by_text_.find(text.substr(i, length));
            if (it == added_by_text_.end()) continue;
            hit = it->second;
            break;
        }
        if (hit < 0) {
            ++i;
            continue;
        }
        encode_segment(text.substr(segment, i - segment), segment == 0, out);
        out.push_back(hit);
        i += vocab_.tokens[hit].size();
        segment = i;
    }
    encode_segment(text.substr(segment), segment == 0, out);
    return out;
}

void Tokenizer::encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    std::string normalized;  // the tokenizer.json normalizer's form, between the special tokens as in HF
    if (vocab_.normalization != UnicodeNormalization::none) {
        normalized = unicode_normalize(text, vocab_.normalization);
        text = normalized;
    }
    switch (vocab_.kind) {
        case TokenizerKind::Bytes:
            for (char c : text) out.push_back(static_cast<uint8_t>(c));
            break;
        case TokenizerKind::SentencePieceBpe: encode_spm(text, at_start, out); break;
        case TokenizerKind::ByteLevelBpe: encode_byte_level(text, at_start, out); break;
    }
}

void Tokenizer::push_byte_fallback(std::string_view bytes, std::vector<int32_t>& out) const {
    for (char c : bytes) {
        const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
        if (id >= 0) out.push_back(id);
        else if (vocab_.unk_id >= 0) out.push_back(vocab_.unk_id);
    }
}

void Tokenizer::encode_spm(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
    // Normalise as the legacy Llama tokenizer.json (Prepend "▁", Replace " " -> "▁") and llama.cpp do.
    std::string normalized;
    if (vocab_.add_space_prefix && (at_start || !vocab_.space_prefix_first_only)) normalized = kMetaspace;
    normalized += replace_all(text, " ", kMetaspace);

    std::vector<std::string_view> words;
    const std::string_view all = normalized;
    if (vocab_.metaspace_split) {
        size_t begin = 0;
        for (size_t hit = all.find(kMetaspace, 1); hit != std::string_view::npos; hit = all.find(kMetaspace, hit + 1)) {
            if (hit > begin) words.push_back(all.substr(begin, hit - begin));
            begin = hit;
        }
        words.push_back(all.substr(begin));
    } else {
        words.push_back(all);
    }

    std::vector<BpeSymbol> symbols;
    for (std::string_view word : words) {
        symbols.clear();
        if (!merges_.empty()) {
            // tokenizer.json BPE: characters to ids, unknown characters to <0xXX> tokens, then ranks.
            bool last_unk = false;
            for (size_t pos = 0; pos < word.size();) {
                const size_t len = utf8_char_length(word, pos);
                const auto begin = static_cast<uint32_t>(pos), end = static_cast<uint32_t>(pos + len);
                const int32_t id = find_piece(word.substr(pos, len));
                bool all_bytes = true;
                for (size_t k = 0; k < len; ++k) all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(word[pos + k])] >= 0;
                if (id >= 0) {
                    symbols.push_back({id, begin, end});
                    last_unk = false;
                } else if (all_bytes) {
                    for (size_t k = 0; k < len; ++k)
                        symbols.push_back({byte_ids_[static_cast<uint8_t>(word[pos + k])], static_cast<uint32_t>(pos + k),
                                           static_cast<uint32_t>(pos + k + 1)});
                    last_unk = false;
                } else if (vocab_.unk_id >= 0) {
                    if (last_unk) symbols.back().end = end;  // fuse_unk
                    else symbols.push_back({vocab_.unk_id, begin, end});
                    last_unk = true;
                }
                pos += len;
            }
            bpe_merge_by_rank(symbols, merges_);
            for (const BpeSymbol& s : symbols) out.push_back(s.id);
        } else {
            // GGUF llama vocab: merge the pair whose piece has the best score; unknown characters
            // fall back to byte tokens at the end (llama.cpp llm_tokenizer_spm).
            for (size_t pos = 0; pos < word.size();) {
                const size_t len = utf8_char_length(word, pos);
                symbols.push_back({find_piece(word.substr(pos, len)), static_cast<uint32_t>(pos),
                                   static_cast<uint32_t>(pos + len)});
                pos += len;
            }
            bpe_merge_by_score(symbols, word, [&](std::string_view piece) -> std::optional<ScoredPiece> {
                const int32_t id = find_piece(piece);
                if (id < 0) return std::nullopt;
                return ScoredPiece{id, vocab_.scores[static_cast<size_t>(id)]};
            });
            for (const BpeSymbol& s : symbols) {
                if (s.id >= 0) out.push_back(s.id);
                else push_byte_fallback(word.substr(s.begin, s.end - s.begin), out);
            }
        }
    }
}

void Tokenizer::encode_byte_level(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
    std::string prefixed;
    if (vocab_.byte_level_add_prefix_space && text.front() != ' ') {
        prefixed = " ";
        prefixed += text;
        text = prefixed;
    }
    std::vector<BpeSymbol> symbols;
    std::string mapped;
    for (std::string_view word : splitter_.split(text)) {
        if (vocab_.ignore_merges) {
            mapped.clear();
            for (char c : word) mapped += byte_level_char(static_cast<uint8_t>(c));
            if (const int32_t id = find_piece(mapped); id >= 0) {
                out.push_back(id);
                continue;
            }
        }
        symbols.clear();
        for (size_t i = 0; i < word.size(); ++i) {
            int32_t id = byte_ids_[static_cast<uint8_t>(word[i])];
            if (id < 0) id = vocab_.unk_id;
            if (id >= 0) symbols.push_back({id, static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1)});
        }
        bpe_merge_by_rank(symbols, merges_);
        for (const BpeSymbol& s : symbols) out.push_back(s.id);
    }
}

// ---- decoding and queries ----

void Tokenizer::check_id(int32_t id) const {
    if (id < 0 || id >= vocab_size())
        throw BadInput("token id " + std::to_string(id) + " is out of range (vocab size " +
                       std::to_string(vocab_size()) + ")");
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    std::string bytes;
    for (int32_t id : ids) {
        check_id(id);
        if (skip_special && is_special(id)) continue;
        bytes += token_bytes_[static_cast<size_t>(id)];
    }
    if (strips_leading_space() && !bytes.empty() && bytes.front() == ' ') bytes.erase(0, 1);
    return utf8_lossy(bytes);
}

const std::string& Tokenizer::token_to_bytes(int32_t id) const {
    check_id(id);
    return token_bytes_[static_cast<size_t>(id)];
}

bool Tokenizer::is_eos(int32_t id) const {
    if (id < 0) return false;
    return id == vocab_.eos_id ||
           std::find(vocab_.extra_eos_ids.begin(), vocab_.extra_eos_ids.end(), id) != vocab_.extra_eos_ids.end();
}

std::vector<int32_t> Tokenizer::eos_ids() const {
    std::vector<int32_t> ids;
    if (vocab_.eos_id >= 0) ids.push_back(vocab_.eos_id);
    for (int32_t id : vocab_.extra_eos_ids)
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    return ids;
}

bool Tokenizer::is_special(int32_t id) const {
    if (id < 0 || id >= vocab_size()) return false;
    const int32_t t = type_of(id);
    return t == kTokenControl || t == kTokenUnknown;
}

bool Tokenizer::strips_leading_space() const {
    return vocab_.kind == TokenizerKind::SentencePieceBpe && vocab_.add_space_prefix;
}

std::string_view Tokenizer::kind_name() const {
    switch (vocab_.kind) {
        case TokenizerKind::SentencePieceBpe: return "sentencepiece-bpe";
        case TokenizerKind::ByteLevelBpe: return "byte-level-bpe";
        case TokenizerKind::Bytes: return "bytes";
    }
    return "unknown";
}

const std::string& Tokenizer::piece(int32_t id) const {
    check_id(id);
    return vocab_.tokens[static_cast<size_t>(id)];
}

}  // namespace kvscope
