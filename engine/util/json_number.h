// Whole numbers read from JSON that someone else wrote (model files, servers' answers): nlohmann's
// get<int64_t>() wraps 2^63 and past to negatives and get<int>() cuts 2^40 to 0, so a value is taken
// only as what it is, and each caller bounds it for its own use.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <optional>

namespace kvscope {

// v as an int64 when it is an integer (signed or unsigned) that int64 holds; nullopt otherwise (a float,
// a string, 2^63 or more).
inline std::optional<int64_t> json_integer(const nlohmann::json& v) {
    if (v.is_number_unsigned()) {
        const auto u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
        return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    return std::nullopt;
}

// The same, within [lo, hi].
inline std::optional<int64_t> json_integer_in(const nlohmann::json& v, int64_t lo, int64_t hi) {
    const auto n = json_integer(v);
    return n && *n >= lo && *n <= hi ? n : std::nullopt;
}

}  // namespace kvscope
