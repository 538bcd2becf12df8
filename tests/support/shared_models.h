// The shared stories260K model and its reference files (tests/data), for the e2e and gpu tests.
#pragma once

#include "test_support.h"

#include "model/model.h"

#include <QString>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

namespace kvscope::test {

// format: "hf" (the Hugging Face directory) or "gguf".
inline std::shared_ptr<const Model> load_stories(const QString& format) {
    const std::string dir = models_dir();
    return load_model(format == "hf" ? dir + "/stories260K-hf" : dir + "/stories260K-f32.gguf");
}

}  // namespace kvscope::test
