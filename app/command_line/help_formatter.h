// How kvscope's --help lists an option: "--block-size UINT   tokens per KV block (1..1024) [16]", i.e.
// name, value type, description, the accepted range (from the option's checks), whether it repeats or
// is required, and the default in brackets at the end (CLI11's own layout glues "=16" to the type).
#pragma once

#include <CLI/CLI.hpp>

namespace kvscope::command_line {

class HelpFormatter : public CLI::Formatter {
public:
    HelpFormatter();
    std::string make_option_opts(const CLI::Option* opt) const override;
    std::string make_option_desc(const CLI::Option* opt) const override;
    // One blank line before each group of options (CLI11 puts two between groups).
    std::string make_usage(const CLI::App* app, std::string name) const override;
    std::string make_group(std::string group, bool is_positional, std::vector<const CLI::Option*> opts) const override;
};

}  // namespace kvscope::command_line
