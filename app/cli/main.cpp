// kvscope-cli: generate | bench | serve | info (contracts in DESIGN.md section 4).
// Exit codes: 0 success, 1 runtime failure, 2 bad input (bad flags, unusable model, impossible config).
#include "commands.h"

#include "util/errors.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

namespace {

const char* kUsage =
    "usage: kvscope-cli <command> --model M [options]\n"
    "commands:\n"
    "  generate   run prompts through the continuous-batching engine\n"
    "  bench      replay a benchmark workload and report vLLM-style metrics\n"
    "  serve      OpenAI-compatible HTTP server\n"
    "  info       describe a model and its KV cache figures\n"
    "models: a Hugging Face directory, a .gguf file, or dummy:PRESET (tiny, smollm-135m, llama-1b, qwen2-0.5b)\n";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const std::string command = argv[1];
    try {
        if (command == "generate") return kvscope::cli::run_generate(argc - 1, argv + 1);
        if (command == "info") return kvscope::cli::run_info(argc - 1, argv + 1);
        if (command == "bench") return kvscope::cli::run_bench(argc - 1, argv + 1);
        if (command == "serve") return kvscope::cli::run_serve(argc - 1, argv + 1);
        std::fprintf(stderr, "kvscope-cli: unknown command '%s'\n%s", command.c_str(), kUsage);
        return 2;
    } catch (const kvscope::BadInput& e) {
        std::fprintf(stderr, "kvscope-cli %s: error: %s\n", command.c_str(), e.what());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "kvscope-cli %s: error: out of memory\n", command.c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvscope-cli %s: internal error: %s\n", command.c_str(), e.what());
        return 1;
    }
}
