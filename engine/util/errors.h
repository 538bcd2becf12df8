// Error types of the engine. BadInput means the user gave us something unusable (a damaged model file,
// an impossible configuration, an invalid request): command-line tools map it to exit code 2. Every
// message names what was wrong: the file, tensor, field or value.
#pragma once

#include <stdexcept>
#include <string>

namespace kvscope {

struct BadInput : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Something the input named could not be reached although the input is fine (a server that does not
// answer): command-line tools report it as an error, not an internal one, with exit code 1.
struct Unreachable : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace kvscope
