#include "model/tokenizer_files.h"

#include "model/gguf_file.h"
#include "model/gguf_vocab.h"
#include "model/model.h"
#include "util/errors.h"
#include "util/file_status.h"

#include <filesystem>

namespace kvscope {

namespace fs = std::filesystem;

Tokenizer load_tokenizer(const std::string& spec) {
    if (spec.starts_with("dummy:")) return load_model(spec)->tokenizer;  // tiny presets: cheap to build
    if (checked_is_directory(spec)) {
        const fs::path json = fs::path(spec) / "tokenizer.json", config = fs::path(spec) / "tokenizer_config.json";
        if (!checked_exists(json)) throw BadInput(spec + ": no tokenizer.json in this directory (--tokenizer)");
        return Tokenizer::from_hf_files(json.string(), checked_exists(config) ? config.string() : "");
    }
    if (!checked_exists(spec)) throw BadInput(spec + ": no such file or directory (--tokenizer)");
    if (spec.ends_with(".gguf")) return Tokenizer::from_vocab(vocab_from_gguf(GgufFile::open(spec)), spec);
    const fs::path config = fs::path(spec).parent_path() / "tokenizer_config.json";
    return Tokenizer::from_hf_files(spec, checked_exists(config) ? config.string() : "");
}

}  // namespace kvscope
