// UTF-8 helpers with the exact semantics the tokenizer needs to agree with Hugging Face tokenizers
// (Rust): validation as str::from_utf8, replacement as String::from_utf8_lossy (one U+FFFD per
// "maximal subpart" of an ill-formed sequence), and the length of an incomplete trailing sequence so
// that streamed text can hold those bytes back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace glm5rt::utf8 {

// Length in bytes of the valid sequence starting at s[i], or 0 if the bytes there are not a complete
// valid sequence (ill-formed or truncated).
size_t valid_sequence_length(std::string_view s, size_t i);

// True when s is well-formed UTF-8 (no surrogates, no overlongs, nothing above U+10FFFF).
bool is_valid(std::string_view s);

// Byte offset of the first ill-formed byte, or s.size() if none.
size_t first_invalid(std::string_view s);

// String::from_utf8_lossy: every maximal subpart of an ill-formed sequence becomes one U+FFFD.
std::string lossy(std::string_view s);

// Number of bytes at the end of s that form a truncated (but so far valid) sequence: more bytes could
// still complete it. 0 when s ends on a complete character or on bytes that are already ill-formed.
size_t incomplete_tail(std::string_view s);

// Decodes the code point at s[i] (s must be valid there); advances i.
char32_t decode(std::string_view s, size_t& i);

// Appends the UTF-8 encoding of cp.
void append(std::string& out, char32_t cp);

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace glm5rt::utf8
