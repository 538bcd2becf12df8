#include "util/json_file.h"

#include "util/errors.h"
#include "util/mapped_file.h"

namespace kvscope {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
    const std::string prefix = what.empty() ? "" : what + " ";
    MappedFile file;
    try {
        file = MappedFile(path);  // a regular file, or BadInput naming it (a directory, a FIFO, a device)
    } catch (const BadInput& e) {
        throw BadInput(prefix + e.what());
    }
    const char* text = file.size() ? reinterpret_cast<const char*>(file.data()) : "";
    try {
        return nlohmann::json::parse(text, text + file.size());
    } catch (const nlohmann::json::exception& e) {
        throw BadInput(prefix + path + ": not JSON (" + e.what() + ")");
    }
}

}  // namespace kvscope
