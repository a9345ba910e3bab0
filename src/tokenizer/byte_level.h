// GPT-2's reversible byte <-> printable character mapping used by ByteLevel components.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace onnx_genai::tokenizer {

// UTF-8 of the printable character standing for each byte.
const std::array<std::string, 256>& byte_to_char();
// Inverse mapping: code point -> byte, or -1 for characters that stand for no byte.
int char_to_byte(char32_t cp);

// Maps every byte of `text` to its character.
std::string bytes_to_chars(std::string_view text);

}  // namespace onnx_genai::tokenizer
