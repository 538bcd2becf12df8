// kvscope-make-xcheck-models OUT_DIR: writes the small GGUF files of the cross-checks against llama.cpp
// (the table in support/xcheck_models.h: seeded random weights in each architecture's real layout and
// the weight types named, the stories260K tokenizer) into OUT_DIR, one NAME.gguf each. A test tool, built
// with the tests and never run by them: tests/data/llamacpp_refs/ holds its output, committed, and
// llama.cpp's figures computed on exactly those bytes (README.md there says how). The HF directories of
// the all-F16 twins are not written here: test_llamacpp_xcheck writes them from the same seed.
#include "xcheck_models.h"

#include <cstdio>
#include <filesystem>

int main(int argc, char** argv) {
    if (argc != 2 || std::string(argv[1]) == "--help") {
        std::fprintf(stderr, "usage: kvscope-make-xcheck-models OUT_DIR\n"
                             "  writes NAME.gguf for every cross-check model (tests/support/xcheck_models.h)\n");
        return argc == 2 ? 0 : 2;
    }
    const std::filesystem::path out = argv[1];
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (!std::filesystem::is_directory(out)) {
        std::fprintf(stderr, "kvscope-make-xcheck-models: cannot create the directory %s\n", argv[1]);
        return 2;
    }
    try {
        for (const auto& m : kvscope::test::xcheck_models()) {
            const auto path = (out / (m.name + ".gguf")).string();
            kvscope::test::write_xcheck_model(m, path);
            std::printf("%s\t%ju bytes\n", path.c_str(), static_cast<uintmax_t>(std::filesystem::file_size(path)));
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvscope-make-xcheck-models: %s\n", e.what());
        return 1;
    }
    return 0;
}
