// Error types of the engine. BadInput means the user gave us something unusable (a damaged model file,
// an impossible configuration, an invalid request): command-line tools map it to exit code 2. Every
// message names what was wrong: the file, tensor, field or value.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace kvscope {

// `message` with its control characters but newline and tab, and every byte that is not part of valid
// UTF-8, written as \xNN, and cut in the middle past 2,000 bytes (its start and its end kept, with how
// much was left out). Names quoted from a damaged file may hold a NUL (what() is a C string, which it
// would cut: "architecture 'llama" and no reason), an escape sequence that a terminal would act on, or a
// megabyte of binary (a string length field gone wrong).
std::string printable_message(std::string_view message);

struct BadInput : std::runtime_error {
    explicit BadInput(const std::string& message) : std::runtime_error(printable_message(message)) {}
    explicit BadInput(const char* message) : BadInput(std::string(message)) {}
};

// Something the input named could not be reached although the input is fine (a server that does not
// answer): command-line tools report it as an error, not an internal one, with exit code 1.
struct Unreachable : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace kvscope
