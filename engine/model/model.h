// A loaded model: config, weights, tokenizer and chat template, from a Hugging Face directory, a GGUF
// file, or dummy:PRESET[:DTYPE] (seeded random weights with a known model's shapes and a byte-level
// tokenizer; no download). Immutable after loading; shared read-only by the engine thread.
#pragma once

#include "model/chat_template.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tokenizer.h"

#include <memory>
#include <string>

namespace kvscope {

struct Model {
    std::string source;  // what the user named
    std::string format;  // "hf", "gguf", "dummy"
    std::string name;    // a short display name
    ModelConfig config;
    ModelWeights weights;
    Tokenizer tokenizer;
    ChatTemplate chat_template;
};

// Throws BadInput naming the path (and tensor, field or key) when the model cannot be used.
// with_weights false (the sim backend): dummy presets and Hugging Face directories come with their
// config and tokenizer only, no weight is allocated or read (a GGUF file is mapped, never copied).
std::unique_ptr<Model> load_model(const std::string& spec, bool with_weights = true);
// The model's shapes alone (config.json, the GGUF header or the preset), for a chooser to show before
// anything loads. Throws BadInput as load_model does.
ModelConfig load_model_config(const std::string& spec);

}  // namespace kvscope
