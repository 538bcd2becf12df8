// The current local time as strftime formats it: one place for the bench results' file stamps and the
// chat templates' "today" (Llama 3.2's strftime_now).
#pragma once

#include <ctime>
#include <string>

namespace kvscope {

inline std::string local_time_string(const char* format) {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[64];
    const size_t n = std::strftime(buf, sizeof buf, format, &local);
    return std::string(buf, n);
}

}  // namespace kvscope
