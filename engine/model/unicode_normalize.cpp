#include "model/unicode_normalize.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utf8proc.h>

namespace kvscope {

std::string unicode_normalize(std::string_view text, UnicodeNormalization form) {
    // ASCII is the same in every form: most prompts skip the copy through utf8proc.
    if (form == UnicodeNormalization::none ||
        std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
        return std::string(text);
    int options = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    if (form == UnicodeNormalization::nfkc) options |= UTF8PROC_COMPAT;
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                                            static_cast<utf8proc_option_t>(options));
    const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
    if (n < 0) return std::string(text);  // invalid UTF-8
    return std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

}  // namespace kvscope
