// Reads the tokenizer that a GGUF file embeds (tokenizer.ggml.* keys) into a TokenizerVocab.
#pragma once

#include "model/tokenizer_vocab.h"

namespace kvscope {

class GgufFile;

// Throws BadInput naming the file when the keys are missing, mistyped or inconsistent.
TokenizerVocab vocab_from_gguf(const GgufFile& gguf);

}  // namespace kvscope
