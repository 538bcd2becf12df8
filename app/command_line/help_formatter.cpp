#include "help_formatter.h"

namespace kvscope::command_line {

namespace {

// CLI11 reports an option's type as "TYPE:CHECK1:CHECK2" (each check's description); type names never
// hold a ':' (an option whose label needs one sets option_text instead).
std::pair<std::string, std::string> type_and_checks(const CLI::Option* opt) {
    const std::string full = opt->get_type_name();
    const size_t colon = full.find(':');
    if (colon == std::string::npos) return {full, ""};
    std::string checks = full.substr(colon + 1);
    for (size_t i = 0; (i = checks.find(':', i)) != std::string::npos;) checks.replace(i, 1, ", ");
    return {full.substr(0, colon), checks};
}

// Takes a value per occurrence and may be given again (--prompt A --prompt B).
bool repeatable(const CLI::Option* opt) {
    return opt->get_type_size() != 0 && opt->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll;
}

// Takes several values after one flag (--goodput ttft:MS tpot:MS).
bool several_values(const CLI::Option* opt) { return opt->get_expected_max() > 1 && opt->get_allow_extra_args(); }

}  // namespace

HelpFormatter::HelpFormatter() { column_width(38); }

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
    if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
    if (opt->get_type_size() == 0) return {};  // a switch
    std::string out = " " + type_and_checks(opt).first;
    if (several_values(opt)) out += " ...";
    return out;
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
    std::string out = opt->get_description();
    if (const std::string checks = type_and_checks(opt).second; !checks.empty()) out += " (" + checks + ")";
    if (repeatable(opt) && !several_values(opt)) out += " (repeatable)";
    if (opt->get_required()) out += " (required)";
    const std::string def = opt->get_default_str();
    if (opt->get_type_size() != 0 && !def.empty() && def != "[]") out += " [" + def + "]";
    return out;
}

std::string HelpFormatter::make_usage(const CLI::App* app, std::string name) const {
    return CLI::Formatter::make_usage(app, std::move(name)) + "\n";
}

std::string HelpFormatter::make_group(std::string group, bool is_positional,
                                      std::vector<const CLI::Option*> opts) const {
    std::string out = group + ":\n";
    for (const CLI::Option* opt : opts) out += make_option(opt, is_positional);
    return out;
}

}  // namespace kvscope::command_line
