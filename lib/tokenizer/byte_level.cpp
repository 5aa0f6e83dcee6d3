#include "tokenizer/byte_level.hpp"

#include "tokenizer/utf8.hpp"

namespace glm5rt::byte_level {

const Table& table() {
  static const Table t = [] {
    Table tb;
    auto keeps_itself = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = keeps_itself(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      utf8::append(tb.byte_to_utf8[b], cp);
      tb.char_to_byte[cp] = static_cast<uint8_t>(b);
    }
    return tb;
  }();
  return t;
}

}  // namespace glm5rt::byte_level
