// GPT-2's reversible byte <-> unicode map used by byte-level BPE (Llama 3, Qwen2, SmolLM): each of
// the 256 bytes is shown as one printable code point ("Ġ" for space, "Ċ" for newline), so pieces
// are valid UTF-8 strings. Pure functions over constant tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvscope {

// The code point that stands for byte b.
char32_t byte_level_codepoint(uint8_t b);

// The UTF-8 text of the code point for byte b ("Ġ" for 0x20).
const std::string& byte_level_char(uint8_t b);

// The bytes a stored piece stands for; nullopt when some character is not in the map (then the
// piece is an added token written as plain text, decoded as is, like the HF ByteLevel decoder).
std::optional<std::string> byte_level_decode(std::string_view piece);

}  // namespace kvscope
