#include "model/model.h"

#include "model/gguf_file.h"
#include "model/gguf_vocab.h"
#include "model/safetensors_file.h"
#include "util/errors.h"
#include "util/file_status.h"
#include "util/host_memory.h"

#include <cctype>
#include <filesystem>

namespace kvscope {

namespace fs = std::filesystem;

namespace {

DType parse_dummy_dtype(const std::string& s, const std::string& spec) {
    if (std::optional<DType> t = dtype_from_name(s)) return *t;
    std::string known = dtype_name_list();
    for (char& c : known) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    throw BadInput(spec + ": unknown weight type '" + s + "' (known: " + known + ")");
}

// Random weights live in host memory: a preset larger than it (llama-3-70b is 141 GB in BF16) is
// refused before anything is allocated.
void check_fits_host(const ModelConfig& config, const std::string& spec) {
    const double bytes = static_cast<double>(config.num_params()) * static_cast<double>(dtype_block_bytes(config.weight_dtype)) /
                         static_cast<double>(dtype_block_elems(config.weight_dtype));
    const double host = static_cast<double>(host_memory_bytes());
    if (host > 0 && bytes > 0.8 * host)
        throw BadInput(spec + ": its random weights need " + std::to_string(static_cast<int64_t>(bytes / 1e9)) +
                       " GB but this machine has " + std::to_string(static_cast<int64_t>(host / 1e9)) +
                       " GB of memory; simulate it instead with --backend sim:GPU");
}

std::unique_ptr<Model> load_dummy(const std::string& spec, bool with_weights) {
    std::string rest = spec.substr(6);
    std::string preset = rest, dtype_name;
    if (auto colon = rest.find(':'); colon != std::string::npos) {
        preset = rest.substr(0, colon);
        dtype_name = rest.substr(colon + 1);
    }
    ModelConfig config = dummy_preset_config(preset);
    if (!dtype_name.empty()) config.weight_dtype = parse_dummy_dtype(dtype_name, spec);
    ModelWeights weights;
    if (with_weights) {
        check_fits_host(config, spec);
        weights = make_dummy_weights(config, config.weight_dtype, 0x6b7673636f7065ull);
    }
    Tokenizer tokenizer = Tokenizer::bytes(config.vocab_size);
    return std::make_unique<Model>(Model{spec, "dummy", "dummy:" + preset, config, std::move(weights),
                                         std::move(tokenizer), ChatTemplate::detect("")});
}

std::unique_ptr<Model> load_gguf(const std::string& path) {
    auto gguf = std::make_shared<const GgufFile>(GgufFile::open(path));
    ModelConfig config = config_from_gguf(*gguf);
    Tokenizer tokenizer = Tokenizer::from_vocab(vocab_from_gguf(*gguf), path);
    if (tokenizer.vocab_size() != config.vocab_size)
        throw BadInput(path + ": the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                       " tokens but token_embd.weight has " + std::to_string(config.vocab_size) + " rows");
    ChatTemplate chat = ChatTemplate::detect(gguf->get_string_or("tokenizer.chat_template", ""));
    ModelWeights weights = load_weights_gguf(gguf, config);
    config.weight_dtype = weights.token_embedding.dtype;
    if (!weights.layers.empty()) config.weight_dtype = weights.layers[0].wq.dtype;
    std::string name = gguf->get_string_or("general.name", fs::path(path).stem().string());
    return std::make_unique<Model>(Model{path, "gguf", name, config, std::move(weights), std::move(tokenizer), chat});
}

std::string hf_config_path(const std::string& dir) {
    const std::string path = (fs::path(dir) / "config.json").string();
    if (!checked_exists(path)) throw BadInput(dir + ": no config.json (not a Hugging Face model directory)");
    return path;
}

std::unique_ptr<Model> load_hf(const std::string& dir, bool with_weights) {
    const fs::path d(dir);
    ModelConfig config = config_from_hf_json(hf_config_path(dir));
    const std::string tok_path = (d / "tokenizer.json").string();
    if (!checked_exists(tok_path)) throw BadInput(dir + ": no tokenizer.json");
    const std::string tok_config = (d / "tokenizer_config.json").string();
    Tokenizer tokenizer = Tokenizer::from_hf_files(tok_path, checked_exists(tok_config) ? tok_config : "");
    if (tokenizer.vocab_size() > config.vocab_size)
        throw BadInput(tok_path + ": " + std::to_string(tokenizer.vocab_size()) + " tokens exceed vocab_size " +
                       std::to_string(config.vocab_size) + " of config.json");
    ChatTemplate chat = ChatTemplate::detect(tokenizer.chat_template());
    ModelWeights weights;
    if (with_weights) {
        auto st = std::make_shared<const SafetensorsModel>(SafetensorsModel::open(dir));
        weights = load_weights_safetensors(st, config, dir);
        if (!weights.layers.empty()) config.weight_dtype = weights.layers[0].wq.dtype;
    }
    return std::make_unique<Model>(
        Model{dir, "hf", d.filename().string(), config, std::move(weights), std::move(tokenizer), chat});
}

enum class ModelKind { DUMMY, HF, GGUF };

// What spec names; throws BadInput naming it when it is none of them.
ModelKind model_kind(const std::string& spec) {
    if (spec.rfind("dummy:", 0) == 0) return ModelKind::DUMMY;
    const fs::file_status status = checked_status(spec);
    if (status.type() == fs::file_type::directory) return ModelKind::HF;
    if (status.type() == fs::file_type::not_found) throw BadInput(spec + ": no such file or directory");
    if (spec.size() >= 5 && spec.compare(spec.size() - 5, 5, ".gguf") == 0) return ModelKind::GGUF;
    throw BadInput(spec + ": not a model (expected a Hugging Face directory, a .gguf file or dummy:PRESET)");
}

}  // namespace

std::unique_ptr<Model> load_model(const std::string& spec, bool with_weights) {
    switch (model_kind(spec)) {
    case ModelKind::DUMMY: return load_dummy(spec, with_weights);
    case ModelKind::HF: return load_hf(spec, with_weights);
    case ModelKind::GGUF: return load_gguf(spec);
    }
    return nullptr;
}

ModelConfig load_model_config(const std::string& spec) {
    switch (model_kind(spec)) {
    case ModelKind::DUMMY: return load_dummy(spec, false)->config;  // no weights: the preset's shapes
    case ModelKind::HF: return config_from_hf_json(hf_config_path(spec));
    case ModelKind::GGUF: return config_from_gguf(GgufFile::open(spec));  // the header; the file is mapped, not read
    }
    return {};
}

}  // namespace kvscope
