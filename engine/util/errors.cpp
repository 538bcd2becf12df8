#include "util/errors.h"

#include "util/utf8.h"

#include <algorithm>

namespace kvscope {

namespace {
constexpr size_t kMaxMessage = 2000;
constexpr size_t kKeptHead = 1400, kKeptTail = 400;

// Backs off from `at` to the start of a UTF-8 character (the escaped text is valid UTF-8) and of a \xNN
// escape, so that a cut splits neither.
size_t char_start(const std::string& text, size_t at) {
    while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
    for (size_t back = 1; back <= 3 && back <= at; ++back)
        if (text[at - back] == '\\' && text[at - back + 1] == 'x') return at - back;
    return at;
}
}  // namespace

std::string printable_message(std::string_view message) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(std::min(message.size(), 2 * kMaxMessage));
    for (size_t i = 0; i < message.size();) {
        const unsigned char c = static_cast<unsigned char>(message[i]);
        if (c < 0x80) {
            if ((c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t') out += static_cast<char>(c);
            else out += std::string{'\\', 'x', kHex[c >> 4], kHex[c & 15]};
            ++i;
            continue;
        }
        const Utf8Scan scan = utf8_scan(message, i);
        if (scan.status == Utf8Status::Complete) {
            out.append(message.substr(i, scan.length));
            i += scan.length;
        } else {
            out += std::string{'\\', 'x', kHex[c >> 4], kHex[c & 15]};
            ++i;
        }
    }
    if (out.size() <= kMaxMessage) return out;
    const size_t head = char_start(out, kKeptHead), tail = char_start(out, out.size() - kKeptTail);
    return out.substr(0, head) + " ... (" + std::to_string(tail - head) + " bytes of the message left out) ... " + out.substr(tail);
}

}  // namespace kvscope
