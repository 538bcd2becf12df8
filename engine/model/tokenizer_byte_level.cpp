// GPT-2 bytes_to_unicode (see tokenizer_byte_level.h): printable Latin-1 bytes map to themselves,
// the other 68 bytes to U+0100 onwards in byte order.
#include "model/tokenizer_byte_level.h"

#include "util/utf8.h"

#include <array>

namespace kvscope {

namespace {

struct ByteLevelTables {
    std::array<char32_t, 256> codepoint{};
    std::array<std::string, 256> text;
    std::array<int16_t, 0x144> byte_of{};  // code point -> byte, -1 when unmapped

    ByteLevelTables() {
        byte_of.fill(-1);
        int extra = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            codepoint[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
            utf8_append(text[b], codepoint[b]);
            byte_of[codepoint[b]] = static_cast<int16_t>(b);
        }
    }
};

const ByteLevelTables& tables() {
    static const ByteLevelTables t;  // immutable after the thread-safe static initialisation
    return t;
}

}  // namespace

char32_t byte_level_codepoint(uint8_t b) { return tables().codepoint[b]; }

const std::string& byte_level_char(uint8_t b) { return tables().text[b]; }

std::optional<std::string> byte_level_decode(std::string_view piece) {
    const ByteLevelTables& t = tables();
    std::string out;
    out.reserve(piece.size());
    for (size_t pos = 0; pos < piece.size();) {
        const Utf8Scan s = utf8_scan(piece, pos);
        if (s.status != Utf8Status::Complete) return std::nullopt;
        char32_t cp = 0;
        const auto* p = reinterpret_cast<const unsigned char*>(piece.data() + pos);
        switch (s.length) {
            case 1: cp = p[0]; break;
            case 2: cp = ((p[0] & 0x1F) << 6) | (p[1] & 0x3F); break;
            default: return std::nullopt;  // every mapped code point is below U+0800
        }
        if (cp >= t.byte_of.size() || t.byte_of[cp] < 0) return std::nullopt;
        out += static_cast<char>(t.byte_of[cp]);
        pos += s.length;
    }
    return out;
}

}  // namespace kvscope
