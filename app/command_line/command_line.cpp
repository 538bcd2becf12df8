#include "command_line.h"

#include "closest_name.h"
#include "help_formatter.h"

#include <cctype>
#include <cstdio>

namespace kvscope::command_line {

namespace {

// "--x", "-x", "--x=1"; not "-1" or "-.5" (negative numbers are values) nor "-" (stdin, by custom).
bool looks_like_option(const std::string& arg) {
    return arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.';
}

std::vector<std::string> option_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::Option* opt : app.get_options()) {
        for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
        for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
    }
    return names;
}

// What went wrong, in one line. Arguments CLI11 could not place come first whatever error it raised:
// a misspelt --modle is the cause of "--model is required", not the other way round.
std::string describe(const CLI::App& app, const CLI::ParseError& e) {
    const std::vector<std::string> left = app.remaining(false);
    for (const std::string& arg : left) {
        if (!looks_like_option(arg)) continue;
        const std::string flag = arg.substr(0, arg.find('='));
        const auto near = closest_name(flag, option_names(app));
        const std::string hint = near ? "did you mean " + *near + "?" : "see " + app.get_name() + " --help";
        return "unknown option " + flag + " (" + hint + ")";
    }
    if (!left.empty()) return "unexpected argument '" + left.front() + "' (it takes options only, see --help)";
    return e.what();
}

}  // namespace

std::unique_ptr<CLI::App> make_app(const std::string& name, const std::string& description) {
    auto app = std::make_unique<CLI::App>(description, name);
    app->formatter(std::make_shared<HelpFormatter>());
    app->set_help_flag("-h,--help", "print this help and exit");
    app->option_defaults()->always_capture_default()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    return app;
}

std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv) {
    try {
        app.parse(argc, argv);
        return std::nullopt;
    } catch (const CLI::CallForHelp&) {
        std::fputs(app.help().c_str(), stdout);
        return 0;
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "%s: error: %s\n", app.get_name().c_str(), describe(app, e).c_str());
        return 2;
    }
}

}  // namespace kvscope::command_line
