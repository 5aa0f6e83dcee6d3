#include "tokenizer/pre_tokenizer.hpp"

#include <functional>

#include "tokenizer/byte_level.hpp"
#include "tokenizer/json_fields.hpp"
#include "tokenizer/regex.hpp"
#include "tokenizer/unicode.hpp"
#include "tokenizer/utf8.hpp"

namespace glm5rt {
namespace {

using tokjson::json;

// A stretch of a piece: a delimiter match or the text between matches (HF's find_matches output).
struct Span {
  size_t start, end;
  bool is_match;
};

enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

Behavior parse_behavior(const std::string& s, const char* component) {
  if (s == "Removed") return Behavior::removed;
  if (s == "Isolated") return Behavior::isolated;
  if (s == "MergedWithPrevious") return Behavior::merged_with_previous;
  if (s == "MergedWithNext") return Behavior::merged_with_next;
  if (s == "Contiguous") return Behavior::contiguous;
  fail(Status::unsupported, "tokenizer.json: ", component, " has unsupported behavior \"", s, "\"");
}

// Matches as a cover of the whole text: (gap, match, gap, ...), like HF's Pattern::find_matches.
std::vector<Span> regex_spans(const Regex& re, std::string_view text) {
  std::vector<Span> out;
  size_t prev = 0;
  for (const auto& m : re.find_all(text)) {
    if (prev != m.start) out.push_back({prev, m.start, false});
    out.push_back({m.start, m.end, true});
    prev = m.end;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
  return out;
}

// Each character for which pred holds is a one-character match.
std::vector<Span> char_spans(std::string_view text, const std::function<bool(char32_t)>& pred) {
  std::vector<Span> out;
  size_t last = 0, i = 0;
  while (i < text.size()) {
    const size_t b = i;
    const char32_t c = utf8::decode(text, i);
    if (pred(c)) {
      if (last < b) out.push_back({last, b, false});
      out.push_back({b, i, true});
      last = i;
    }
  }
  if (i > last) out.push_back({last, i, false});
  return out;
}

// Applies a SplitDelimiterBehavior to the spans (HF NormalizedString::split) and appends the resulting
// non-empty sub-pieces of `piece` to `out`.
void split_piece(const Piece& piece, std::vector<Span> spans, Behavior behavior, bool invert,
                 std::vector<Piece>& out) {
  if (invert)
    for (auto& s : spans) s.is_match = !s.is_match;
  std::vector<std::pair<size_t, size_t>> kept;
  switch (behavior) {
    case Behavior::isolated:
      for (const auto& s : spans) kept.emplace_back(s.start, s.end);
      break;
    case Behavior::removed:
      for (const auto& s : spans)
        if (!s.is_match) kept.emplace_back(s.start, s.end);
      break;
    case Behavior::merged_with_previous: {
      bool previous_match = false;
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !kept.empty()) kept.back().second = s.end;
        else kept.emplace_back(s.start, s.end);
        previous_match = s.is_match;
      }
      break;
    }
    case Behavior::merged_with_next: {
      bool previous_match = false;
      std::vector<std::pair<size_t, size_t>> rev;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !rev.empty()) rev.back().first = it->start;
        else rev.emplace_back(it->start, it->end);
        previous_match = it->is_match;
      }
      kept.assign(rev.rbegin(), rev.rend());
      break;
    }
    case Behavior::contiguous: {
      bool previous_match = false;
      for (const auto& s : spans) {
        if (s.is_match == previous_match && !kept.empty()) kept.back().second = s.end;
        else kept.emplace_back(s.start, s.end);
        previous_match = s.is_match;
      }
      break;
    }
  }
  for (const auto& [s, e] : kept) {
    if (e <= s) continue;
    out.push_back({piece.text.substr(s, e - s), piece.at_start && s == 0});
  }
}

class Split final : public PreTokenizer {
 public:
  Split(std::string pattern, bool is_regex, Behavior b, bool invert)
      : regex_(pattern, !is_regex), empty_literal_(!is_regex && pattern.empty()), behavior_(b), invert_(invert) {}
  void apply(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 2);
    for (const auto& p : pieces) {
      // An empty literal pattern never matches (HF: the whole text is one non-match).
      std::vector<Span> spans =
          empty_literal_ ? std::vector<Span>{{0, p.text.size(), false}} : regex_spans(regex_, p.text);
      split_piece(p, std::move(spans), behavior_, invert_, out);
    }
    pieces.swap(out);
  }

 private:
  Regex regex_;
  bool empty_literal_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's pattern, what ByteLevel uses when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {
    if (use_regex_) regex_ = std::make_unique<Regex>(kGpt2Pattern, false);
  }
  void apply(std::vector<Piece>& pieces) const override {
    std::vector<Piece> split;
    split.reserve(pieces.size() * 2);
    for (auto& p : pieces) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(p.text.begin(), ' ');
      if (use_regex_) split_piece(p, regex_spans(*regex_, p.text), Behavior::isolated, false, split);
      else if (!p.text.empty()) split.push_back(std::move(p));
    }
    const auto& tb = byte_level::table();
    std::string mapped;
    for (auto& p : split) {
      // Every stand-in character is 1 or 2 bytes of UTF-8 (U+0021..U+0143).
      mapped.resize(p.text.size() * 2);
      size_t n = 0;
      for (unsigned char c : p.text) {
        const std::string& u = tb.byte_to_utf8[c];
        mapped[n++] = u[0];
        if (u.size() > 1) mapped[n++] = u[1];
      }
      p.text.assign(mapped.data(), n);
    }
    pieces.swap(split);
  }

 private:
  bool add_prefix_space_, use_regex_;
  std::unique_ptr<Regex> regex_;
};

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void apply(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const auto& p : pieces)
      split_piece(p, char_spans(p.text, unicode::is_numeric),
                  individual_ ? Behavior::isolated : Behavior::contiguous, false, out);
    pieces.swap(out);
  }

 private:
  bool individual_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { always, first, never };
  Metaspace(std::string replacement, Prepend scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {
    size_t i = 0;
    replacement_cp_ = utf8::decode(replacement_, i);
  }
  void apply(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (auto& p : pieces) {
      std::string t;
      t.reserve(p.text.size() + replacement_.size());
      for (char c : p.text) {
        if (c == ' ') t += replacement_;
        else t.push_back(c);
      }
      const bool starts = t.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == Prepend::always || (scheme_ == Prepend::first && p.at_start)))
        t.insert(0, replacement_);
      Piece np{std::move(t), p.at_start};
      if (split_) {
        const char32_t r = replacement_cp_;
        split_piece(np, char_spans(np.text, [r](char32_t c) { return c == r; }), Behavior::merged_with_next,
                    false, out);
      } else if (!np.text.empty()) {
        out.push_back(std::move(np));
      }
    }
    pieces.swap(out);
  }

 private:
  std::string replacement_;
  char32_t replacement_cp_ = 0;
  Prepend scheme_;
  bool split_;
};

class Whitespace final : public PreTokenizer {
 public:
  // HF compiles this one pattern, \w+|[^\w\s]+, with Rust's regex crate (not Oniguruma), whose \w is
  // Alphabetic | Mark | Nd | Pc | Join_Control (UTS #18): spelled out so the Oniguruma rewrite of \w
  // does not apply.
  Whitespace()
      : regex_(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}\s]+)",
               false) {}
  void apply(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const auto& p : pieces) split_piece(p, regex_spans(regex_, p.text), Behavior::removed, true, out);
    pieces.swap(out);
  }

 private:
  Regex regex_;
};

class WhitespaceSplit final : public PreTokenizer {
 public:
  void apply(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const auto& p : pieces)
      split_piece(p, char_spans(p.text, unicode::is_whitespace), Behavior::removed, false, out);
    pieces.swap(out);
  }
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void apply(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = tokjson::type_of(j, "pre_tokenizer");
  if (type == "Split") {
    bool is_regex = false;
    std::string pattern = tokjson::pattern_of(j, "pre_tokenizer Split", is_regex);
    const Behavior b = parse_behavior(tokjson::get_string(j, "behavior", "pre_tokenizer Split"), "pre_tokenizer Split");
    return std::make_unique<Split>(std::move(pattern), is_regex, b, tokjson::bool_or(j, "invert", false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(tokjson::bool_or(j, "add_prefix_space", true), tokjson::bool_or(j, "use_regex", true));
  if (type == "Digits") return std::make_unique<Digits>(tokjson::bool_or(j, "individual_digits", false));
  if (type == "Metaspace") {
    const std::string replacement = tokjson::string_or(j, "replacement", "\xE2\x96\x81");
    require(!replacement.empty() && utf8::is_valid(replacement), Status::format,
            "tokenizer.json: pre_tokenizer Metaspace.replacement must be one character");
    Metaspace::Prepend scheme = Metaspace::Prepend::always;
    if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string()) {
      const std::string s = it->get<std::string>();
      if (s == "always") scheme = Metaspace::Prepend::always;
      else if (s == "first") scheme = Metaspace::Prepend::first;
      else if (s == "never") scheme = Metaspace::Prepend::never;
      else fail(Status::unsupported, "tokenizer.json: pre_tokenizer Metaspace has unknown prepend_scheme \"", s, "\"");
    } else if (!tokjson::bool_or(j, "add_prefix_space", true)) {
      scheme = Metaspace::Prepend::never;  // the legacy field
    }
    return std::make_unique<Metaspace>(replacement, scheme, tokjson::bool_or(j, "split", true));
  }
  if (type == "Whitespace") return std::make_unique<Whitespace>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
  if (type == "Sequence") {
    const json& list = tokjson::field(j, "pretokenizers", "pre_tokenizer Sequence");
    require(list.is_array(), Status::format, "tokenizer.json: pre_tokenizer Sequence.pretokenizers must be an array");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const json& item : list) {
      auto p = make_pre_tokenizer(item);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  fail(Status::unsupported, "tokenizer.json: unsupported pre_tokenizer type \"", type,
       "\" (supported: Split, ByteLevel, Digits, Metaspace, Whitespace, WhitespaceSplit, Sequence)");
}

}  // namespace glm5rt
