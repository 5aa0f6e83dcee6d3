#include "tokenizer/unicode.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include "runtime/error.hpp"
#include "tokenizer/utf8.hpp"

namespace glm5rt::unicode {

std::string normalize(std::string_view text, Form form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case Form::nfc: n = icu::Normalizer2::getNFCInstance(status); break;
    case Form::nfd: n = icu::Normalizer2::getNFDInstance(status); break;
    case Form::nfkc: n = icu::Normalizer2::getNFKCInstance(status); break;
    case Form::nfkd: n = icu::Normalizer2::getNFKDInstance(status); break;
  }
  require(U_SUCCESS(status) && n != nullptr, Status::internal, "ICU normalizer unavailable: ",
          u_errorName(status));
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  n->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr,
                   status);
  require(U_SUCCESS(status), Status::internal, "ICU normalization failed: ", u_errorName(status));
  return out;
}

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const char32_t cp = utf8::decode(text, i);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
      continue;
    }
    // The full mapping of a lone character (U+0130 gives "i̇"); a one-character string has no context,
    // so ICU's contextual rules (final sigma) cannot apply, matching Rust's char::to_lowercase.
    UChar src[2];
    int32_t src_len = 0;
    U16_APPEND_UNSAFE(src, src_len, cp);
    UChar dst[8];
    UErrorCode status = U_ZERO_ERROR;
    const int32_t n = u_strToLower(dst, 8, src, src_len, "", &status);
    if (U_FAILURE(status) || n > 8) {
      utf8::append(out, static_cast<char32_t>(u_tolower(static_cast<UChar32>(cp))));
      continue;
    }
    for (int32_t k = 0; k < n;) {
      UChar32 c;
      U16_NEXT_UNSAFE(dst, k, c);
      utf8::append(out, static_cast<char32_t>(c));
    }
  }
  return out;
}

bool is_whitespace(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }

bool is_numeric(char32_t c) {
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_alphanumeric(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC) || is_numeric(c);
}

}  // namespace glm5rt::unicode
