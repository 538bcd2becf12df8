#include "util/file_status.h"

#include "util/errors.h"

#include <cerrno>
#include <system_error>

namespace kvscope {

std::filesystem::file_status checked_status(const std::filesystem::path& path) {
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::status(path, ec);
    // ENOTDIR: a component is a file ("model.gguf/config.json"), so the path does not exist either.
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
        throw BadInput(path.string() + ": cannot access: " + ec.message());
    return status;
}

}  // namespace kvscope
