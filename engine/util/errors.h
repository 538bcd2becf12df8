// Error types of the engine. BadInput means the user gave us something unusable (a damaged model file,
// an impossible configuration, an invalid request): command-line tools map it to exit code 2. Every
// message names what was wrong: the file, tensor, field or value.
#pragma once

#include <stdexcept>
#include <string>

namespace kvscope {

// `message` with its control characters but newline and tab written as \xNN. Names quoted from a damaged
// file may hold a NUL (what() is a C string, which it would cut: "architecture 'llama" and no reason) or
// an escape sequence that a terminal would act on.
inline std::string printable_message(std::string message) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (size_t i = 0; i < message.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(message[i]);
        if ((c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t') continue;
        message.replace(i, 1, std::string{'\\', 'x', kHex[c >> 4], kHex[c & 15]});
        i += 3;
    }
    return message;
}

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
