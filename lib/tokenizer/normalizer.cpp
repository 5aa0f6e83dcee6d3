#include "tokenizer/normalizer.hpp"

#include <vector>

#include "tokenizer/json_fields.hpp"
#include "tokenizer/regex.hpp"
#include "tokenizer/unicode.hpp"
#include "tokenizer/utf8.hpp"

namespace glm5rt {
namespace {

using tokjson::json;

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(unicode::Form f) : form_(f) {}
  std::string normalize(std::string text) const override {
    // Pure ASCII is invariant under every normalization form: skip ICU for it.
    for (unsigned char c : text)
      if (c >= 0x80) return unicode::normalize(text, form_);
    return text;
  }

 private:
  unicode::Form form_;
};

class Lowercase final : public Normalizer {
 public:
  std::string normalize(std::string text) const override { return unicode::lowercase(text); }
};

class Replace final : public Normalizer {
 public:
  Replace(std::string pattern, bool is_regex, std::string content)
      : regex_(pattern, !is_regex), content_(std::move(content)) {}
  std::string normalize(std::string text) const override {
    std::string out;
    size_t last = 0;
    for (const auto& m : regex_.find_all(text)) {
      if (m.end == m.start) continue;
      out.append(text, last, m.start - last);
      out += content_;
      last = m.end;
    }
    out.append(text, last, std::string::npos);
    return out;
  }

 private:
  Regex regex_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  std::string normalize(std::string text) const override {
    return text.empty() ? text : prepend_ + text;
  }

 private:
  std::string prepend_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      size_t i = 0;
      while (i < end) {
        size_t j = i;
        if (!unicode::is_whitespace(utf8::decode(text, j))) break;
        i = j;
      }
      begin = i;
    }
    if (right_) {
      // Walk back over whole characters.
      while (end > begin) {
        size_t s = end - 1;
        while (s > begin && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
        size_t j = s;
        if (!unicode::is_whitespace(utf8::decode(text, j))) break;
        end = s;
      }
    }
    return text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string normalize(std::string text) const override {
    for (const auto& p : parts_) text = p->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = tokjson::type_of(j, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeForm>(unicode::Form::nfc);
  if (type == "NFD") return std::make_unique<UnicodeForm>(unicode::Form::nfd);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(unicode::Form::nfkc);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(unicode::Form::nfkd);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Replace") {
    bool is_regex = false;
    std::string pattern = tokjson::pattern_of(j, "normalizer Replace", is_regex);
    return std::make_unique<Replace>(std::move(pattern), is_regex,
                                     tokjson::get_string(j, "content", "normalizer Replace"));
  }
  if (type == "Prepend") return std::make_unique<Prepend>(tokjson::get_string(j, "prepend", "normalizer Prepend"));
  if (type == "Strip")
    return std::make_unique<Strip>(tokjson::bool_or(j, "strip_left", false), tokjson::bool_or(j, "strip_right", false));
  if (type == "Sequence") {
    const json& list = tokjson::field(j, "normalizers", "normalizer Sequence");
    require(list.is_array(), Status::format, "tokenizer.json: normalizer Sequence.normalizers must be an array");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const json& item : list) {
      auto n = make_normalizer(item);
      if (n) parts.push_back(std::move(n));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  fail(Status::unsupported, "tokenizer.json: unsupported normalizer type \"", type,
       "\" (supported: NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip, Sequence)");
}

}  // namespace glm5rt
