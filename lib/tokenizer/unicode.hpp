// Unicode data the tokenizer needs beyond what PCRE2 offers, from ICU (Debian libicu-dev): the
// normalization forms and per-character properties, with the semantics of the Rust functions that
// Hugging Face tokenizers calls (unicode-normalization's nfc()/nfkc(), char::to_lowercase,
// char::is_whitespace, char::is_numeric).
#pragma once

#include <string>
#include <string_view>

namespace glm5rt::unicode {

enum class Form { nfc, nfd, nfkc, nfkd };

// Normalizes valid UTF-8 text. Throws glm5rt::Error (internal) if ICU fails.
std::string normalize(std::string_view text, Form form);

// Rust's per-char char::to_lowercase() over the string: the full (multi-character) lowercase mapping of
// each code point on its own, with no context rules (final sigma stays σ), as HF's Lowercase does.
std::string lowercase(std::string_view text);

// char::is_whitespace: the Unicode White_Space property.
bool is_whitespace(char32_t c);
// char::is_numeric: general category Nd, Nl or No.
bool is_numeric(char32_t c);
// char::is_alphanumeric: the Alphabetic property or is_numeric.
bool is_alphanumeric(char32_t c);

}  // namespace glm5rt::unicode
