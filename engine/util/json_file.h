// The one reader of JSON files (model configs, datasets, calibrations, bench results, timelines): the
// file must be a regular one (a directory, a FIFO or a device is refused at once, naming it), and bad
// JSON is named with the parser's place.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvscope {

// The JSON in the file at `path`. Throws BadInput "WHAT PATH: reason" (WHAT, e.g. "--timeline", left
// out when empty): cannot open, not a regular file, or not JSON.
nlohmann::json read_json_file(const std::string& path, const std::string& what = "");

}  // namespace kvscope
