// GPT-2's byte-to-character table used by the ByteLevel pre-tokenizer and decoder: printable bytes map
// to themselves, the others to U+0100 + n in order. Built once, shared.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace glm5rt::byte_level {

struct Table {
  std::array<std::string, 256> byte_to_utf8;        // byte -> UTF-8 of its stand-in character
  std::unordered_map<char32_t, uint8_t> char_to_byte;  // stand-in character -> byte
};

const Table& table();

}  // namespace glm5rt::byte_level
