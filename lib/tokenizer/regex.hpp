// A compiled Unicode regex (PCRE2 with UTF + UCP + JIT) that behaves like the Oniguruma regexes Hugging
// Face tokenizers compiles its Split/Replace patterns with. The two flavours mostly agree (possessive
// quantifiers, lookahead, \p{..} classes, (?i:..)); where they differ the pattern is rewritten before
// compiling:
//   \s \S  Oniguruma: the Unicode White_Space property. PCRE2 UCP adds U+180E (and relies on \p{Z}), so
//          \s is spelled out as the White_Space list.
//   \d \D  Oniguruma: \p{Nd}. PCRE2 UCP: the same, spelled out for clarity.
//   \w \W  Oniguruma: Alphabetic | Mark | Nd | Pc (+ ² ³ ¹ ¼ ½ ¾). PCRE2 UCP: \p{L} | \p{N} | '_', so \w
//          is spelled out.
//   \h \H  Oniguruma: a hexadecimal digit (PCRE2: horizontal space), spelled out as [0-9a-fA-F].
// Inside a character class \S, \D, \W cannot be spelled out (no nested negation); they keep PCRE2's
// meaning, which differs only for the characters listed above.
// Known gap: character classes follow the Unicode version of the PCRE2 library (Debian 12: 10.42), while
// HF's Oniguruma is newer; the ~5000 code points assigned since (Unicode 15.1/16: e.g. Garay, new CJK
// extension) fall outside \p{L}/\p{N}/\w/\d here and may split differently. Everything assigned in
// PCRE2's tables matches HF exactly (tests/fixture/test_tokenizer_regex_classes.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace glm5rt {

class Regex {
 public:
  // Compiles an Oniguruma-flavoured pattern; literal = true matches the pattern text verbatim.
  // Throws glm5rt::Error (format) with PCRE2's message and the offset on a bad pattern.
  Regex(std::string_view pattern, bool literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  struct Match {
    size_t start, end;
  };
  // All non-overlapping matches, left to right, in valid UTF-8 text (not re-validated). An empty match
  // is reported and the search resumes one character later, as Oniguruma's find_iter does.
  std::vector<Match> find_all(std::string_view text) const;

  const std::string& pattern() const { return source_; }

 private:
  struct Impl;
  std::string source_;
  std::unique_ptr<Impl> impl_;
};

// The rewriting described above, exposed for tests.
std::string translate_oniguruma_pattern(std::string_view pattern);

}  // namespace glm5rt
