// Checks for the numbers and byte sizes that kvscope's command lines take. Every numeric option goes
// through one: CLI11's own Range lets NaN through and its unsigned conversion wraps "-1" to 2^64 - 1.
// Each check's description (e.g. "1..1024") is shown in --help after the option's text.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>

namespace kvscope::command_line {

// A whole number in [lo, hi]; hi defaults to INT_MAX, so an int option never narrows. Give such an
// option the type name UINT when lo >= 0.
CLI::Validator int_in(int64_t lo, int64_t hi = std::numeric_limits<int>::max());
// Any uint64 (seeds): digits only, at most 2^64 - 1.
CLI::Validator any_uint64();
// A real number in [lo, hi] (never NaN; +-inf only when a bound is infinite).
CLI::Validator real_in(double lo, double hi = std::numeric_limits<double>::infinity());
// A real number > lo (never NaN); `allow_inf` admits "inf" (an unbounded request rate).
CLI::Validator real_above(double lo, bool allow_inf = false);
// A transform: "1048576", "512M", "8G", "1.5GiB" (K, M, G, T with optional B or iB, all binary:
// 1K = 1024; case-insensitive) into a whole number of bytes that fits an int64.
CLI::Validator byte_size();

}  // namespace kvscope::command_line
