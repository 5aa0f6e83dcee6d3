#include "tokenizer/utf8.hpp"

namespace glm5rt::utf8 {
namespace {

// For a lead byte: the sequence width and the allowed range of the second byte (Unicode Table 3-7).
// Width 0 means the byte can never start a sequence.
struct Lead {
  int width;
  uint8_t lo, hi;
};

Lead lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes starting at s[i] form a valid prefix of a sequence (at least 1 if the lead is valid),
// and the width the sequence needs.
size_t valid_prefix(std::string_view s, size_t i, int& width) {
  const Lead l = lead_info(static_cast<uint8_t>(s[i]));
  width = l.width;
  if (l.width <= 1) return l.width;
  size_t n = 1;
  if (i + 1 >= s.size()) return n;
  const uint8_t b1 = static_cast<uint8_t>(s[i + 1]);
  if (b1 < l.lo || b1 > l.hi) return n;
  ++n;
  for (int k = 2; k < l.width; ++k) {
    if (i + k >= s.size()) return n;
    const uint8_t b = static_cast<uint8_t>(s[i + k]);
    if (b < 0x80 || b > 0xBF) return n;
    ++n;
  }
  return n;
}

}  // namespace

size_t valid_sequence_length(std::string_view s, size_t i) {
  int width = 0;
  const size_t n = valid_prefix(s, i, width);
  return (width > 0 && n == static_cast<size_t>(width)) ? n : 0;
}

size_t first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = valid_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

bool is_valid(std::string_view s) { return first_invalid(s) == s.size(); }

std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int width = 0;
    const size_t n = valid_prefix(s, i, width);
    if (width > 0 && n == static_cast<size_t>(width)) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      // Invalid lead byte: n == 0, consume it alone. Otherwise the valid prefix is one subpart.
      out.append(kReplacement);
      i += n == 0 ? 1 : n;
    }
  }
  return out;
}

size_t incomplete_tail(std::string_view s) {
  // A truncated sequence is at most 3 bytes; find the lead byte among the last 3.
  const size_t lookback = s.size() < 3 ? s.size() : 3;
  for (size_t k = 1; k <= lookback; ++k) {
    const size_t i = s.size() - k;
    const uint8_t b = static_cast<uint8_t>(s[i]);
    if (b >= 0x80 && b <= 0xBF) continue;  // continuation byte: keep looking for the lead
    int width = 0;
    const size_t n = valid_prefix(s, i, width);
    // Truncated only if every byte to the end is part of the valid prefix and more are needed.
    if (width > 1 && n == k && k < static_cast<size_t>(width)) return k;
    return 0;
  }
  return 0;
}

char32_t decode(std::string_view s, size_t& i) {
  const uint8_t b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    ++i;
    return b;
  }
  int width = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  char32_t cp = b & (0x7F >> width);  // payload bits of the lead byte: 5, 4 or 3
  for (int k = 1; k < width; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += width;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace glm5rt::utf8
