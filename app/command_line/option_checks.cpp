#include "option_checks.h"

#include <charconv>
#include <cmath>
#include <optional>
#include <string>

namespace kvscope::command_line {

namespace {

template <typename T>
std::optional<T> parse_whole(const std::string& text, T) {
    T value{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// The number at the start of `text`; `rest` receives what follows it.
std::optional<double> parse_real(const std::string& text, std::string* rest = nullptr) {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || std::isnan(value)) return std::nullopt;
    if (rest) *rest = std::string(end, text.data() + text.size());
    else if (end != text.data() + text.size()) return std::nullopt;
    return value;
}

std::string format_real(double x) {
    std::string s = std::to_string(x);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
}

}  // namespace

CLI::Validator int_in(int64_t lo, int64_t hi) {
    const bool unbounded = hi == std::numeric_limits<int>::max() || hi == std::numeric_limits<int64_t>::max();
    const std::string range = unbounded ? ">= " + std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
    return CLI::Validator(
        [lo, hi, range, unbounded](std::string& text) -> std::string {
            const auto v = parse_whole(text, int64_t{});
            const bool digits = !text.empty() && text.find_first_not_of("0123456789", text[0] == '-') == std::string::npos &&
                                text != "-";
            // Past int64 ("99999999999999999999") is a whole number too, out of range: say the range.
            if (!v && digits) return "must be " + (unbounded ? std::to_string(lo) + ".." + std::to_string(hi) : range) + ", got " + text;
            if (!v) return "'" + text + "' is not a whole number";
            // Above an unbounded option's hidden cap (INT_MAX), ">= 1" would not say what was wrong.
            if (*v > hi && unbounded) return "must be " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + text;
            if (*v < lo || *v > hi) return "must be " + range + ", got " + text;
            return {};
        },
        unbounded && lo == 0 ? "" : range);  // ">= 0" says no more than the type name UINT
}

CLI::Validator any_uint64() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            if (!parse_whole(text, uint64_t{})) return "'" + text + "' is not a whole number in 0..2^64-1";
            return {};
        },
        "");
}

CLI::Validator real_in(double lo, double hi) {
    const std::string range = std::isinf(hi) ? ">= " + format_real(lo) : format_real(lo) + ".." + format_real(hi);
    return CLI::Validator(
        [lo, hi, range](std::string& text) -> std::string {
            const auto v = parse_real(text);
            if (!v) return "'" + text + "' is not a number";
            if (!(*v >= lo && *v <= hi)) return "must be " + range + ", got " + text;
            return {};
        },
        range);
}

CLI::Validator real_above(double lo, bool allow_inf) {
    const std::string range = "> " + format_real(lo) + (allow_inf ? " or inf" : "");
    return CLI::Validator(
        [lo, allow_inf, range](std::string& text) -> std::string {
            const auto v = parse_real(text);
            if (!v) return "'" + text + "' is not a number";
            if (!(*v > lo) || (std::isinf(*v) && !allow_inf)) return "must be " + range + ", got " + text;
            return {};
        },
        range);
}

CLI::Validator byte_size() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            const std::string bad = "'" + text + "' is not a byte size (examples: 1048576, 512M, 8G, 1.5GiB)";
            std::string unit;
            const auto x = parse_real(text, &unit);
            if (!x || !(*x >= 0)) return bad;
            for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            if (unit.size() == 3 && unit.ends_with("IB")) unit.resize(1);  // KiB, MiB, ...
            else if (unit.size() == 2 && unit.back() == 'B') unit.resize(1);  // KB, MB, ... (also binary)
            double scale = 0;
            if (unit.empty() || unit == "B") scale = 1;
            else if (unit == "K") scale = 0x1p10;
            else if (unit == "M") scale = 0x1p20;
            else if (unit == "G") scale = 0x1p30;
            else if (unit == "T") scale = 0x1p40;
            if (scale == 0) return bad;
            const double bytes = std::floor(*x * scale);
            if (!(bytes < 0x1p63)) return "'" + text + "' is more than an int64 of bytes";
            text = std::to_string(static_cast<int64_t>(bytes));
            return {};
        },
        "");
}

}  // namespace kvscope::command_line
