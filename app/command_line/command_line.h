// kvscope's command-line conventions on top of CLI11, shared by kvscope-cli's commands and the bench
// programs: -h/--help lists every option with its type, range and default and exits 0; any parse error
// exits 2 with "<program>: error: <what>" on stderr, naming the option (and for a misspelt one, the
// closest known option). No positional arguments unless a command declares them.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

namespace kvscope::command_line {

// An App named `name` as usage lines and error messages show it ("kvscope-cli bench"). Defaults are
// captured for --help. A repeated option keeps its last value, unless it is declared repeatable
// (->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)).
std::unique_ptr<CLI::App> make_app(const std::string& name, const std::string& description);

// Parses argv into app's options (argv[0], the program or command name, is skipped). Returns nothing
// when the command should go on; otherwise the exit code, after printing the help (0, on stdout) or
// the error (2, on stderr).
std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv);

}  // namespace kvscope::command_line
