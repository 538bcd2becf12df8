// Reading a Hugging Face tokenizer.json (+ tokenizer_config.json) into a TokenizerVocab: the BPE
// model, added tokens, the normalizer / pre-tokenizer / decoder shapes kvscope supports (legacy
// metaspace SentencePiece, Metaspace, ByteLevel with Split / Punctuation / Digits / Whitespace /
// WhitespaceSplit steps), BOS/EOS and the chat template. Anything else is rejected with BadInput
// naming the file and the field.
#pragma once

#include "model/tokenizer_vocab.h"

#include <string>
#include <string_view>

namespace kvscope {

struct HfTokenizerSpec {
    TokenizerVocab vocab;
    std::string chat_template;  // tokenizer_config.json "chat_template", "" when absent
};

// config_text may be empty (no tokenizer_config.json). source / config_source name the files.
HfTokenizerSpec parse_hf_tokenizer(std::string_view tokenizer_json_text, std::string_view config_text,
                                   const std::string& source, const std::string& config_source);

}  // namespace kvscope
