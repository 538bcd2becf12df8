// UTF-8 scanning and lossy conversion (see utf8.h). Valid ranges follow Unicode table 3-7, so
// overlong forms, surrogates and code points above U+10FFFF are invalid.
#include "util/utf8.h"

namespace kvscope {

Utf8Scan utf8_scan(std::string_view text, size_t pos) {
    const auto b0 = static_cast<unsigned char>(text[pos]);
    if (b0 < 0x80) return {Utf8Status::Complete, 1};
    size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;  // no overlongs
        if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
    } else {
        return {Utf8Status::Invalid, 1};
    }
    for (size_t i = 1; i < need; ++i) {
        if (pos + i >= text.size()) return {Utf8Status::Truncated, i};
        const auto b = static_cast<unsigned char>(text[pos + i]);
        const unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) return {Utf8Status::Invalid, i};
    }
    return {Utf8Status::Complete, need};
}

size_t utf8_char_length(std::string_view text, size_t pos) {
    const Utf8Scan s = utf8_scan(text, pos);
    return s.status == Utf8Status::Complete ? s.length : 1;
}

bool utf8_is_valid(std::string_view text) {
    for (size_t pos = 0; pos < text.size();) {
        const Utf8Scan s = utf8_scan(text, pos);
        if (s.status != Utf8Status::Complete) return false;
        pos += s.length;
    }
    return true;
}

std::string utf8_lossy(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const Utf8Scan s = utf8_scan(text, pos);
        if (s.status == Utf8Status::Complete)
            out.append(text.substr(pos, s.length));
        else
            out.append(kUtf8Replacement);
        pos += s.length;
    }
    return out;
}

void utf8_append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

}  // namespace kvscope
