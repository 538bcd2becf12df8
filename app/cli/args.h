// A small command-line parser for kvscope-cli: --flag VALUE, --flag=VALUE, repeated flags, switches.
// Unknown flags, missing values and malformed numbers throw BadInput naming the flag (exit code 2).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kvscope::cli {

class Args {
public:
    // value_flags take a value; switch_flags do not. argv[0] is the subcommand name.
    Args(int argc, char** argv, const std::set<std::string>& value_flags, const std::set<std::string>& switch_flags);

    bool has(const std::string& flag) const { return values_.count(flag) > 0; }
    std::vector<std::string> all(const std::string& flag) const;
    std::optional<std::string> get(const std::string& flag) const;
    std::string get_or(const std::string& flag, const std::string& fallback) const;
    int64_t get_int(const std::string& flag, int64_t fallback) const;
    double get_double(const std::string& flag, double fallback) const;
    // Byte sizes: 1048576, 512M, 2G, 1.5GiB.
    int64_t get_bytes(const std::string& flag, int64_t fallback) const;
    // Values that follow a flag until the next flag (for --goodput ttft:MS tpot:MS).
    const std::vector<std::string>& positional() const { return positional_; }

private:
    std::map<std::string, std::vector<std::string>> values_;
    std::vector<std::string> positional_;
};

}  // namespace kvscope::cli
