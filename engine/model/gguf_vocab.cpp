#include "model/gguf_vocab.h"

#include "model/gguf_file.h"
#include "util/errors.h"

namespace kvscope {

TokenizerVocab vocab_from_gguf(const GgufFile& g) {
    TokenizerVocab v;
    const std::string model = g.get_string("tokenizer.ggml.model");
    if (model == "llama")
        v.kind = TokenizerKind::SentencePieceBpe;
    else if (model == "gpt2")
        v.kind = TokenizerKind::ByteLevelBpe;
    else
        throw BadInput(g.path() + ": tokenizer.ggml.model '" + model + "' is not supported (supported: llama, gpt2)");

    const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
    if (!tokens || tokens->type != GgufType::ARRAY || tokens->array_type != GgufType::STRING)
        throw BadInput(g.path() + ": tokenizer.ggml.tokens is missing or not an array of strings");
    v.tokens = tokens->strings;
    const size_t n = v.tokens.size();
    auto numbers = [&](const char* key) -> const std::vector<double>* {
        const GgufValue* a = g.find(key);
        if (!a) return nullptr;
        if (a->type != GgufType::ARRAY || a->numbers.size() != n)
            throw BadInput(g.path() + ": " + key + " must be an array of " + std::to_string(n) + " numbers");
        return &a->numbers;
    };
    if (const auto* scores = numbers("tokenizer.ggml.scores"))
        for (double s : *scores) v.scores.push_back(static_cast<float>(s));
    if (const auto* types = numbers("tokenizer.ggml.token_type"))
        for (double t : *types) v.token_types.push_back(static_cast<int32_t>(t));
    if (const GgufValue* merges = g.find("tokenizer.ggml.merges")) {
        if (merges->type != GgufType::ARRAY || merges->array_type != GgufType::STRING)
            throw BadInput(g.path() + ": tokenizer.ggml.merges is not an array of strings");
        v.merges = merges->strings;
    } else if (v.kind == TokenizerKind::ByteLevelBpe) {
        // As llama.cpp refuses it: without merges a byte-level BPE splits every word into characters, and
        // those without a piece of their own into <unk>.
        throw BadInput(g.path() + ": tokenizer.ggml.merges is missing (a gpt2 tokenizer needs its merges)");
    }
    v.pre_tokenizer = g.get_string_or("tokenizer.ggml.pre", "");
    v.bos_id = g.get_i32_or("tokenizer.ggml.bos_token_id", -1);
    v.eos_id = g.get_i32_or("tokenizer.ggml.eos_token_id", -1);
    v.unk_id = g.get_i32_or("tokenizer.ggml.unknown_token_id", -1);
    v.pad_id = g.get_i32_or("tokenizer.ggml.padding_token_id", -1);
    for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
        if (int64_t id = g.get_i32_or(key, -1); id >= 0 && id != v.eos_id) v.extra_eos_ids.push_back(static_cast<int32_t>(id));
    // llama.cpp's defaults: SentencePiece vocabs add BOS and a space prefix, byte-level ones neither.
    const bool spm = v.kind == TokenizerKind::SentencePieceBpe;
    v.add_bos = g.get_bool_or("tokenizer.ggml.add_bos_token", spm);
    v.add_space_prefix = g.get_bool_or("tokenizer.ggml.add_space_prefix", spm);
    return v;
}

}  // namespace kvscope
