// tokenizer.json / tokenizer_config.json reader (see tokenizer_hf_json.h). Follows the field
// layout of HF tokenizers' serialisation; ids are validated here, merges in Tokenizer::build.
#include "model/tokenizer_hf_json.h"

#include "util/errors.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <unordered_map>

namespace kvscope {

namespace {

using nlohmann::json;

constexpr int64_t kMaxTokenId = 1 << 21;  // 2M: far above any real vocabulary (256k); guards the allocation

json parse_json(std::string_view text, const std::string& source) {
    try {
        return json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        throw BadInput(source + ": malformed JSON: " + e.what());
    }
}

std::string type_of(const json& node) {
    if (!node.is_object()) return {};
    auto it = node.find("type");
    return it != node.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Calls f on every component of a (possibly nested) "Sequence" node; list_key names its array.
void for_each_component(const json& node, const char* list_key, const std::function<void(const json&)>& f) {
    if (node.is_null()) return;
    if (type_of(node) == "Sequence") {
        auto it = node.find(list_key);
        if (it != node.end() && it->is_array())
            for (const json& child : *it) for_each_component(child, list_key, f);
        return;
    }
    f(node);
}

bool contains_type(const json& node, const char* list_key, std::string_view type) {
    bool found = false;
    for_each_component(node, list_key, [&](const json& c) { found = found || type_of(c) == type; });
    return found;
}

// bos_token / eos_token in tokenizer_config.json: a string, {"content": ...} or null.
std::string token_content(const json& config, const char* key) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return {};
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
        return (*it)["content"].get<std::string>();
    return {};
}

// A literal Split pattern as a regex: escape everything that is not alphanumeric.
std::string escape_regex(std::string_view literal) {
    std::string out;
    for (char c : literal) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x80 && !std::isalnum(u)) out += '\\';
        out += c;
    }
    return out;
}

void read_vocab(const json& model, const json& doc, TokenizerVocab& v, const std::string& source) {
    auto vocab_it = model.find("vocab");
    if (vocab_it == model.end() || !vocab_it->is_object() || vocab_it->empty())
        throw BadInput(source + ": model.vocab is missing or empty");
    std::vector<bool> assigned;
    auto assign = [&](int64_t id, const std::string& piece, const char* where) {
        if (id < 0 || id >= kMaxTokenId)
            throw BadInput(source + ": " + where + " id " + std::to_string(id) + " of '" + piece + "' is out of range");
        const auto i = static_cast<size_t>(id);
        if (i >= v.tokens.size()) {
            v.tokens.resize(i + 1);
            assigned.resize(i + 1, false);
        }
        if (assigned[i] && v.tokens[i] != piece && std::string_view(where) == "model.vocab")
            throw BadInput(source + ": id " + std::to_string(id) + " is used by both '" + v.tokens[i] + "' and '" +
                           piece + "'");
        v.tokens[i] = piece;
        assigned[i] = true;
    };
    for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
        if (!it.value().is_number_integer())
            throw BadInput(source + ": model.vocab['" + it.key() + "'] is not an integer id");
        assign(it.value().get<int64_t>(), it.key(), "model.vocab");
    }
    std::vector<int32_t> types(v.tokens.size(), kTokenNormal);
    auto added_it = doc.find("added_tokens");
    if (added_it != doc.end() && !added_it->is_null()) {
        if (!added_it->is_array()) throw BadInput(source + ": added_tokens is not an array");
        for (const json& added : *added_it) {
            if (!added.is_object() || !added.contains("id") || !added["id"].is_number_integer() ||
                !added.contains("content") || !added["content"].is_string())
                throw BadInput(source + ": an added_tokens entry lacks an integer id or a string content");
            const std::string content = added["content"].get<std::string>();
            if (content.empty()) throw BadInput(source + ": added token " + added["id"].dump() + " is empty");
            assign(added["id"].get<int64_t>(), content, "added_tokens");
            types.resize(v.tokens.size(), kTokenNormal);
            const bool special = added.contains("special") && added["special"].is_boolean() && added["special"].get<bool>();
            types[static_cast<size_t>(added["id"].get<int64_t>())] = special ? kTokenControl : kTokenUserDefined;
        }
    }
    types.resize(v.tokens.size(), kTokenNormal);
    for (size_t i = 0; i < v.tokens.size(); ++i)
        if (!assigned[i]) types[i] = kTokenUnused;  // holes in the id space
    v.token_types = std::move(types);

    auto merges_it = model.find("merges");
    if (merges_it != model.end() && !merges_it->is_null()) {
        if (!merges_it->is_array()) throw BadInput(source + ": model.merges is not an array");
        v.merges.reserve(merges_it->size());
        for (const json& m : *merges_it) {
            if (m.is_string()) {
                v.merges.push_back(m.get<std::string>());
            } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
                v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
            } else {
                throw BadInput(source + ": model.merges entry " + m.dump() + " is not \"a b\" or [\"a\", \"b\"]");
            }
        }
    }
}

int32_t find_token(const TokenizerVocab& v, std::string_view content) {
    if (content.empty()) return -1;
    for (size_t i = 0; i < v.tokens.size(); ++i)
        if (v.tokens[i] == content && v.token_types[i] != kTokenUnused) return static_cast<int32_t>(i);
    return -1;
}

void read_spm_options(const json& doc, TokenizerVocab& v, const std::string& source) {
    v.add_space_prefix = false;
    for_each_component(doc.value("normalizer", json()), "normalizers", [&](const json& n) {
        const std::string t = type_of(n);
        if (t == "Prepend") {
            if (n.value("prepend", std::string()) != kMetaspace)
                throw BadInput(source + ": normalizer Prepend of '" + n.value("prepend", std::string()) +
                               "' is not supported");
            v.add_space_prefix = true;
        } else if (t == "Replace") {
            // The only replacement SentencePiece vocabs use: " " -> "▁", which encode_spm always does.
            const json& pattern = n.value("pattern", json::object());
            if (pattern.value("String", std::string()) != " " || n.value("content", std::string()) != kMetaspace)
                throw BadInput(source + ": normalizer Replace other than ' ' -> '\xE2\x96\x81' is not supported");
        } else if (t == "NFC" || t == "NFKC") {
            v.normalization = t == "NFC" ? UnicodeNormalization::nfc : UnicodeNormalization::nfkc;
        } else {
            throw BadInput(source + ": normalizer type '" + t + "' is not supported");
        }
    });
    const bool spaces_replaced = contains_type(doc.value("normalizer", json()), "normalizers", "Replace");
    for_each_component(doc.value("pre_tokenizer", json()), "pretokenizers", [&](const json& p) {
        const std::string t = type_of(p);
        // Gemma 3: Split on " " after the normalizer has replaced every " " with "▁" never splits.
        if (t == "Split" && spaces_replaced && !p.value("invert", false) &&
            p.value("pattern", json::object()).value("String", std::string()) == " ")
            return;
        if (t != "Metaspace") throw BadInput(source + ": pre_tokenizer type '" + t + "' is not supported for a SentencePiece BPE");
        if (p.value("replacement", std::string(kMetaspace)) != kMetaspace)
            throw BadInput(source + ": Metaspace replacement other than '\xE2\x96\x81' is not supported");
        const std::string scheme = p.contains("prepend_scheme") && p["prepend_scheme"].is_string()
                                       ? p["prepend_scheme"].get<std::string>()
                                       : (p.value("add_prefix_space", true) ? "always" : "never");
        if (scheme != "always" && scheme != "first" && scheme != "never")
            throw BadInput(source + ": Metaspace prepend_scheme '" + scheme + "' is not supported");
        v.add_space_prefix = scheme != "never";
        v.space_prefix_first_only = scheme == "first";
        v.metaspace_split = p.value("split", true);
    });
}

// HF's character-predicate pre-tokenizers as one-character patterns: each such character is a match
// of its own, as HF's Fn(char) pattern makes it. Punctuation: Rust's is_ascii_punctuation or a
// Unicode P* category.
constexpr std::string_view kPunctuationPattern = R"([\p{P}\x{21}-\x{2F}\x{3A}-\x{40}\x{5B}-\x{60}\x{7B}-\x{7E}])";
// WhitespaceSplit: Rust's char::is_whitespace.
constexpr std::string_view kWhiteSpacePattern = R"(\p{White_Space})";
// Whitespace's \w+|[^\w\s]+ (Rust's regex crate, inverted and Removed) with that crate's Unicode \w and
// \s spelled out: PCRE2's \w takes No ("²") and leaves out marks and ZWJ, its \s takes U+180E.
constexpr std::string_view kWhitespaceWordsPattern =
    R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}\p{White_Space}]+)";

// A Split or Punctuation "behavior"; Isolated when absent (Punctuation's default).
SplitBehavior read_behavior(const json& p, const std::string& source) {
    static constexpr std::pair<std::string_view, SplitBehavior> kNames[] = {
        {"Removed", SplitBehavior::Removed},
        {"Isolated", SplitBehavior::Isolated},
        {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
        {"MergedWithNext", SplitBehavior::MergedWithNext},
        {"Contiguous", SplitBehavior::Contiguous},
    };
    auto it = p.find("behavior");
    if (it == p.end()) return SplitBehavior::Isolated;
    if (it->is_string())
        for (const auto& [name, behavior] : kNames)
            if (it->get<std::string>() == name) return behavior;
    throw BadInput(source + ": pre_tokenizer " + type_of(p) + " behavior " + it->dump() +
                   " is not Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
}

void read_byte_level_options(const json& doc, TokenizerVocab& v, const std::string& source) {
    v.add_space_prefix = false;
    for_each_component(doc.value("normalizer", json()), "normalizers", [&](const json& n) {
        if (type_of(n) != "NFC") throw BadInput(source + ": normalizer type '" + type_of(n) + "' is not supported");
        v.normalization = UnicodeNormalization::nfc;
    });
    // HF's ByteLevel maps each word to byte-level characters: the steps after it match those.
    bool after_byte_level = false;
    for_each_component(doc.value("pre_tokenizer", json()), "pretokenizers", [&](const json& p) {
        const std::string t = type_of(p);
        auto add = [&](std::string_view pattern, SplitBehavior behavior, bool invert) {
            v.split_rules.push_back({std::string(pattern), behavior, invert, after_byte_level});
        };
        if (t == "Split") {
            const json& pattern = p.value("pattern", json::object());
            std::string regex;
            if (pattern.contains("Regex") && pattern["Regex"].is_string())
                regex = pattern["Regex"].get<std::string>();
            else if (pattern.contains("String") && pattern["String"].is_string())
                regex = escape_regex(pattern["String"].get<std::string>());
            else
                throw BadInput(source + ": pre_tokenizer Split has no Regex or String pattern");
            add(regex, read_behavior(p, source), p.value("invert", false));
        } else if (t == "Punctuation") {
            add(kPunctuationPattern, read_behavior(p, source), false);
        } else if (t == "Whitespace") {
            add(kWhitespaceWordsPattern, SplitBehavior::Removed, true);
        } else if (t == "WhitespaceSplit") {
            add(kWhiteSpacePattern, SplitBehavior::Removed, false);
        } else if (t == "Digits") {
            add(p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)", SplitBehavior::Isolated, false);
        } else if (t == "ByteLevel") {
            // HF prepends the space to each word the steps before made; the encoder prepends it to the
            // text, which is the same only when ByteLevel comes first.
            v.byte_level_add_prefix_space = p.value("add_prefix_space", false);
            if (v.byte_level_add_prefix_space && !v.split_rules.empty())
                throw BadInput(source + ": pre_tokenizer ByteLevel with add_prefix_space after another "
                                        "pre-tokenizer is not supported");
            if (p.value("use_regex", true)) add(kGpt2SplitPattern, SplitBehavior::Isolated, false);
            after_byte_level = true;
        } else {
            throw BadInput(source + ": pre_tokenizer type '" + t + "' is not supported for a byte-level BPE");
        }
    });
    // No splitting at all: the whole text is one word.
    if (v.split_rules.empty()) v.split_rules.push_back({R"((?s).+)"});
    v.ignore_merges = doc["model"].value("ignore_merges", false);
}

// BOS from the post_processor's TemplateProcessing (what HF adds with add_special_tokens=True).
void read_post_processor(const json& doc, TokenizerVocab& v) {
    for_each_component(doc.value("post_processor", json()), "processors", [&](const json& p) {
        if (type_of(p) != "TemplateProcessing") return;
        const json& single = p.value("single", json::array());
        if (!single.is_array() || single.empty() || !single[0].is_object() || !single[0].contains("SpecialToken")) return;
        const json& special = single[0]["SpecialToken"];
        if (!special.is_object() || !special.contains("id") || !special["id"].is_string()) return;
        const int32_t id = find_token(v, special["id"].get<std::string>());
        if (id >= 0) {
            v.bos_id = id;
            v.add_bos = true;
        }
    });
}

}  // namespace

HfTokenizerSpec parse_hf_tokenizer(std::string_view tokenizer_json_text, std::string_view config_text,
                                   const std::string& source, const std::string& config_source) {
    HfTokenizerSpec spec;
    TokenizerVocab& v = spec.vocab;
    const json doc = parse_json(tokenizer_json_text, source);
    const json config = config_text.empty() ? json::object() : parse_json(config_text, config_source);
    try {
        if (!doc.is_object()) throw BadInput(source + ": the top level is not a JSON object");
        if (!config.is_object()) throw BadInput(config_source + ": the top level is not a JSON object");
        auto model_it = doc.find("model");
        if (model_it == doc.end() || !model_it->is_object()) throw BadInput(source + ": no 'model' object");
        const json& model = *model_it;
        const std::string model_type = model.contains("type") ? model["type"].get<std::string>() : "BPE";
        if (model_type != "BPE")
            throw BadInput(source + ": model.type '" + model_type + "' is not supported (only BPE)");
        read_vocab(model, doc, v, source);

        const bool byte_level = contains_type(doc.value("pre_tokenizer", json()), "pretokenizers", "ByteLevel") ||
                                contains_type(doc.value("decoder", json()), "decoders", "ByteLevel");
        const bool spm = contains_type(doc.value("pre_tokenizer", json()), "pretokenizers", "Metaspace") ||
                         contains_type(doc.value("normalizer", json()), "normalizers", "Prepend") ||
                         contains_type(doc.value("normalizer", json()), "normalizers", "Replace") ||
                         contains_type(doc.value("decoder", json()), "decoders", "ByteFallback") ||
                         contains_type(doc.value("decoder", json()), "decoders", "Metaspace") ||
                         (model.contains("byte_fallback") && model["byte_fallback"].is_boolean() &&
                          model["byte_fallback"].get<bool>());
        if (byte_level) {
            v.kind = TokenizerKind::ByteLevelBpe;
            read_byte_level_options(doc, v, source);
        } else if (spm) {
            v.kind = TokenizerKind::SentencePieceBpe;
            for (size_t i = 0; i < v.tokens.size(); ++i) {
                const std::string& p = v.tokens[i];
                if (v.token_types[i] == kTokenNormal && p.size() == 6 && p.starts_with("<0x") && p[5] == '>')
                    v.token_types[i] = kTokenByte;
            }
            read_spm_options(doc, v, source);
        } else {
            throw BadInput(source + ": neither a ByteLevel nor a SentencePiece (Metaspace / byte fallback) "
                                    "tokenizer; not supported");
        }

        if (model.contains("unk_token") && model["unk_token"].is_string()) {
            v.unk_id = find_token(v, model["unk_token"].get<std::string>());
            if (v.unk_id >= 0 && v.token_types[v.unk_id] == kTokenControl) v.token_types[v.unk_id] = kTokenUnknown;
        }

        v.add_bos = false;
        read_post_processor(doc, v);
        const std::string bos = token_content(config, "bos_token"), eos = token_content(config, "eos_token");
        if (!bos.empty() && find_token(v, bos) >= 0) v.bos_id = find_token(v, bos);
        if (!eos.empty()) v.eos_id = find_token(v, eos);
        if (const std::string pad = token_content(config, "pad_token"); !pad.empty()) v.pad_id = find_token(v, pad);
        if (v.kind == TokenizerKind::SentencePieceBpe) {
            // LlamaTokenizer's defaults when tokenizer_config.json does not say.
            if (v.bos_id < 0 && config_text.empty()) v.bos_id = find_token(v, "<s>");
            if (v.eos_id < 0 && config_text.empty()) v.eos_id = find_token(v, "</s>");
            if (v.bos_id >= 0 && !config.contains("add_bos_token")) v.add_bos = true;
        }
        if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean())
            v.add_bos = config["add_bos_token"].get<bool>();
        if (v.eos_id < 0)
            for (const char* name : {"<|end_of_text|>", "<|endoftext|>", "</s>"})
                if ((v.eos_id = find_token(v, name)) >= 0) break;
        // Other end-of-turn tokens stop generation too, as llama.cpp's end-of-generation set does.
        for (const char* name : {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end_of_text|>", "<|endoftext|>",
                                 "<|end|>", "<end_of_turn>"}) {
            const int32_t id = find_token(v, name);
            if (id >= 0 && id != v.eos_id && v.token_types[id] == kTokenControl) v.extra_eos_ids.push_back(id);
        }

        if (auto it = config.find("chat_template"); it != config.end()) {
            if (it->is_string()) {
                spec.chat_template = it->get<std::string>();
            } else if (it->is_array()) {  // [{"name": "default", "template": "..."}, ...]
                for (const json& t : *it)
                    if (t.is_object() && t.value("name", std::string()) == "default" && t.contains("template") &&
                        t["template"].is_string())
                        spec.chat_template = t["template"].get<std::string>();
            } else if (!it->is_null()) {
                // Not a template (a number, an object): kept as its JSON text, which no known template
                // matches, so that it falls back to plain with the warning, not silently as "no template".
                spec.chat_template = it->dump();
            }
        }
    } catch (const json::exception& e) {
        throw BadInput(source + ": unexpected JSON shape: " + e.what());
    }
    return spec;
}

}  // namespace kvscope
