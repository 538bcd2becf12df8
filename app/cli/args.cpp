#include "args.h"

#include "util/errors.h"

#include <cmath>
#include <cstdlib>

namespace kvscope::cli {

Args::Args(int argc, char** argv, const std::set<std::string>& value_flags, const std::set<std::string>& switch_flags) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("--", 0) != 0) {
            positional_.push_back(a);
            continue;
        }
        std::string flag = a, value;
        bool inline_value = false;
        if (auto eq = a.find('='); eq != std::string::npos) {
            flag = a.substr(0, eq);
            value = a.substr(eq + 1);
            inline_value = true;
        }
        if (switch_flags.count(flag)) {
            if (inline_value) throw BadInput(flag + " takes no value");
            values_[flag].push_back("1");
        } else if (value_flags.count(flag)) {
            if (!inline_value) {
                if (i + 1 >= argc) throw BadInput(flag + " needs a value");
                value = argv[++i];
            }
            values_[flag].push_back(value);
        } else {
            throw BadInput("unknown option " + flag + " (see --help)");
        }
    }
}

std::vector<std::string> Args::all(const std::string& flag) const {
    auto it = values_.find(flag);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::string> Args::get(const std::string& flag) const {
    auto it = values_.find(flag);
    if (it == values_.end()) return std::nullopt;
    return it->second.back();
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const {
    return get(flag).value_or(fallback);
}

int64_t Args::get_int(const std::string& flag, int64_t fallback) const {
    auto v = get(flag);
    if (!v) return fallback;
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno == ERANGE) throw BadInput(flag + ": '" + *v + "' is not an integer");
    return x;
}

double Args::get_double(const std::string& flag, double fallback) const {
    auto v = get(flag);
    if (!v) return fallback;
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || std::isnan(x)) throw BadInput(flag + ": '" + *v + "' is not a number");
    return x;
}

int64_t Args::get_bytes(const std::string& flag, int64_t fallback) const {
    auto v = get(flag);
    if (!v) return fallback;
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    std::string unit = end;
    for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double mult = 1;
    if (unit == "" || unit == "B") mult = 1;
    else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
    else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
    else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
    else throw BadInput(flag + ": '" + *v + "' is not a byte size (examples: 1048576, 512M, 2G)");
    if (v->empty() || end == v->c_str() || !(x >= 0) || x * mult > 9e18)
        throw BadInput(flag + ": '" + *v + "' is not a byte size (examples: 1048576, 512M, 2G)");
    return static_cast<int64_t>(x * mult);
}

}  // namespace kvscope::cli
