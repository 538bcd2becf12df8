// What a path names, for the model and tokenizer loaders: a path that does not exist is "not found", one
// that cannot be looked at (a folder without search permission, a symlink loop) is BadInput naming the path
// and the reason. std::filesystem::exists(path, ec) answered "no such file" for a file in a folder the user
// may not enter, and the throwing overloads escaped as an "internal error".
#pragma once

#include <filesystem>
#include <string>

namespace kvscope {

// The path's status, following symlinks: type not_found when it does not exist; throws BadInput
// "PATH: cannot access: REASON" for any other error.
std::filesystem::file_status checked_status(const std::filesystem::path& path);

inline bool checked_exists(const std::filesystem::path& path) {
    return checked_status(path).type() != std::filesystem::file_type::not_found;
}
inline bool checked_is_directory(const std::filesystem::path& path) {
    return checked_status(path).type() == std::filesystem::file_type::directory;
}

}  // namespace kvscope
