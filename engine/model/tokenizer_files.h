// A tokenizer without its model's weights, for clients of a remote engine (`bench --tokenizer`): a Hugging
// Face directory or tokenizer.json file, a GGUF file (its vocab keys), or dummy:PRESET (the byte-level
// tokenizer of the dummy models). Pure function.
#pragma once

#include "model/tokenizer.h"

#include <string>

namespace kvscope {

// Throws BadInput naming the path when there is no usable tokenizer there.
Tokenizer load_tokenizer(const std::string& spec);

}  // namespace kvscope
