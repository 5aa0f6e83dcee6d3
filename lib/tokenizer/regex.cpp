#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.hpp"

#include <pcre2.h>

#include "runtime/error.hpp"

namespace glm5rt {
namespace {

// Unicode White_Space (what Oniguruma's \s and Rust's char::is_whitespace mean). Checked code point by
// code point against HF's Split regex (tokenizers 0.23.3): identical.
constexpr const char* kWhiteSpaceItems =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";
// Oniguruma's Unicode \w as HF's Split sees it (checked code point by code point against tokenizers
// 0.23.3): Alphabetic | Mark | Nd | Pc, plus the Latin-1 digits and fractions ² ³ ¹ ¼ ½ ¾. Code points
// assigned after PCRE2's Unicode version (Debian's 10.42: Unicode 14) are not covered.
constexpr const char* kWordItems = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})";

// One JIT stack per thread: the tokenizer is shared between threads, the stack is scratch space.
// 64 KiB grows to 8 MiB for patterns such as \s+(?!\S) on long whitespace runs.
struct JitScratch {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  JitScratch() {
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (stack && context) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~JitScratch() {
    if (context) pcre2_match_context_free(context);
    if (stack) pcre2_jit_stack_free(stack);
  }
};

JitScratch& scratch() {
  thread_local JitScratch s;
  return s;
}

}  // namespace

std::string translate_oniguruma_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  int class_depth = 0;  // inside [...] (PCRE2 has no nesting except POSIX [:x:], handled below)
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      ++i;
      const bool in_class = class_depth > 0;
      switch (e) {
        case 's':
          out += in_class ? std::string(kWhiteSpaceItems) : "[" + std::string(kWhiteSpaceItems) + "]";
          continue;
        case 'S':
          out += in_class ? std::string("\\S") : "[^" + std::string(kWhiteSpaceItems) + "]";
          continue;
        case 'd':
          out += in_class ? "\\p{Nd}" : "\\p{Nd}";
          continue;
        case 'D':
          out += in_class ? "\\D" : "\\P{Nd}";
          continue;
        case 'w':
          out += in_class ? std::string(kWordItems) : "[" + std::string(kWordItems) + "]";
          continue;
        case 'W':
          out += in_class ? std::string("\\W") : "[^" + std::string(kWordItems) + "]";
          continue;
        case 'h':
          out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
          continue;
        case 'H':
          out += in_class ? "\\H" : "[^0-9a-fA-F]";
          continue;
        default:
          out.push_back('\\');
          out.push_back(e);
          continue;
      }
    }
    if (c == '[') {
      if (class_depth > 0 && i + 1 < p.size() && p[i + 1] == ':') {
        // POSIX class [:alpha:] inside a bracket: copy through the closing ":]".
        const size_t close = p.find(":]", i + 2);
        if (close != std::string_view::npos) {
          out.append(p.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
      }
      if (class_depth == 0) {
        out.push_back(c);
        // A ']' right after '[' or '[^' is a literal member.
        if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
        if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
        class_depth = 1;
        continue;
      }
      out.push_back(c);
      continue;
    }
    if (c == ']' && class_depth > 0) {
      class_depth = 0;
      out.push_back(c);
      continue;
    }
    out.push_back(c);
  }
  return out;
}

struct Regex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(std::string_view pattern, bool literal) : source_(pattern), impl_(std::make_unique<Impl>()) {
  const std::string compiled = literal ? std::string(pattern) : translate_oniguruma_pattern(pattern);
  // PCRE2_LITERAL refuses UCP (it has no classes to affect), so a literal gets UTF only.
  const uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(), options, &err,
                              &err_offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail(Status::format, "regex /", std::string(pattern), "/ does not compile: ",
         reinterpret_cast<const char*>(msg), " at offset ", err_offset);
  }
  // JIT is an optimisation: if it is unavailable pcre2_match interprets the pattern instead.
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() = default;

std::vector<Regex::Match> Regex::find_all(std::string_view text) const {
  std::vector<Match> matches;
  JitScratch& js = scratch();
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (!md) fail(Status::out_of_memory, "regex match data");
  struct Free {
    pcre2_match_data* md;
    ~Free() { pcre2_match_data_free(md); }
  } guard{md};
  size_t start = 0;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (start <= text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, js.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail(Status::internal, "regex /", source_, "/ failed while matching: ", reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t s = ov[0], e = ov[1];
    matches.push_back({s, e});
    if (e > s) {
      start = e;
    } else {
      // Empty match: step over one whole character.
      if (e >= text.size()) break;
      size_t next = e + 1;
      while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
      start = next;
    }
  }
  return matches;
}

}  // namespace glm5rt
