// kvscope-cli: generate | bench | serve | info | sim-calibrate (contracts in docs/DESIGN.md section 4). Each command
// parses its own options (command_line/: CLI11, `kvscope-cli COMMAND --help` lists them).
// Exit codes: 0 success, 1 runtime failure, 2 bad input (bad flags, unusable model, impossible config).
#include "commands.h"

#include "command_line/closest_name.h"
#include "util/errors.h"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace {

struct Command {
    const char* name;
    const char* summary;
    int (*run)(int argc, char** argv);
};

const Command kCommands[] = {
    {"generate", "run prompts through the continuous-batching engine", kvscope::cli::run_generate},
    {"bench", "replay a benchmark workload and report vLLM-style metrics", kvscope::cli::run_bench},
    {"serve", "OpenAI-compatible HTTP server", kvscope::cli::run_serve},
    {"info", "describe a model and its KV cache figures", kvscope::cli::run_info},
    {"sim-calibrate", "fit the sim backend's step-time constants to a measured bench timeline",
     kvscope::cli::run_sim_calibrate},
};

std::string usage() {
    std::string text = "usage: kvscope-cli <command> --model M [options]\ncommands:\n";
    for (const Command& c : kCommands) {
        const std::string name = c.name;
        text += "  " + name + std::string(15 - name.size(), ' ') + c.summary + "\n";
    }
    text += "models: a Hugging Face directory, a .gguf file, or dummy:PRESET (tiny, smollm-135m, llama-1b, ...)\n"
            "`kvscope-cli <command> --help` lists a command's options and the presets.\n";
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string command = argc < 2 ? "" : argv[1];
    if (command == "--help" || command == "-h") {
        std::fputs(usage().c_str(), stdout);
        return 0;
    }
    const Command* found = nullptr;
    for (const Command& c : kCommands)
        if (command == c.name) found = &c;
    if (!found) {
        std::vector<std::string> names;
        for (const Command& c : kCommands) names.push_back(c.name);
        const auto near = kvscope::command_line::closest_name(command, names);
        if (command.empty()) std::fprintf(stderr, "kvscope-cli: error: no command given\n");
        else std::fprintf(stderr, "kvscope-cli: error: unknown command '%s'%s\n", command.c_str(),
                          near ? (" (did you mean " + *near + "?)").c_str() : "");
        std::fputs(usage().c_str(), stderr);
        return 2;
    }
    try {
        return found->run(argc - 1, argv + 1);
    } catch (const kvscope::BadInput& e) {
        std::fprintf(stderr, "kvscope-cli %s: error: %s\n", command.c_str(), e.what());
        return 2;
    } catch (const kvscope::Unreachable& e) {
        std::fprintf(stderr, "kvscope-cli %s: error: %s\n", command.c_str(), e.what());
        return 1;
    } catch (const std::filesystem::filesystem_error& e) {  // a path the user gave that cannot be looked at
        std::fprintf(stderr, "kvscope-cli %s: error: %s: %s\n", command.c_str(),
                     kvscope::printable_message(e.path1().string()).c_str(), e.code().message().c_str());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "kvscope-cli %s: error: out of memory\n", command.c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvscope-cli %s: internal error: %s\n", command.c_str(), e.what());
        return 1;
    }
}
