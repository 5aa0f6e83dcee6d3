#include "tokenizer/added_vocab.hpp"

#include <algorithm>

#include "tokenizer/json_fields.hpp"
#include "tokenizer/normalizer.hpp"
#include "tokenizer/unicode.hpp"
#include "tokenizer/utf8.hpp"

namespace glm5rt {
namespace {

// The last character of s, or 0 if s is empty (s is valid UTF-8).
char32_t last_char(std::string_view s) {
  if (s.empty()) return 0;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return utf8::decode(s, i);
}

bool is_word_char(char32_t c) { return c == '_' || unicode::is_alphanumeric(c); }

// Start offset of the run of whitespace that ends s.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t i = end - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    size_t j = i;
    if (!unicode::is_whitespace(utf8::decode(s, j))) break;
    end = i;
  }
  return end;
}

// Length of the run of whitespace that starts s.
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!unicode::is_whitespace(utf8::decode(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& j) {
  std::vector<AddedToken> out;
  if (j.is_null()) return out;
  require(j.is_array(), Status::format, "tokenizer.json: added_tokens must be an array");
  for (const auto& t : j) {
    AddedToken a;
    const auto& idv = tokjson::field(t, "id", "added_tokens entry");
    require(idv.is_number_integer() && idv.get<int64_t>() >= 0 && idv.get<int64_t>() < (int64_t{1} << 30),
            Status::format, "tokenizer.json: added_tokens entry has a bad id");
    a.id = static_cast<int32_t>(idv.get<int64_t>());
    a.content = tokjson::get_string(t, "content", "added_tokens entry");
    require(utf8::is_valid(a.content), Status::format, "tokenizer.json: added token ", a.id, " is not valid UTF-8");
    a.special = tokjson::bool_or(t, "special", false);
    a.lstrip = tokjson::bool_or(t, "lstrip", false);
    a.rstrip = tokjson::bool_or(t, "rstrip", false);
    a.single_word = tokjson::bool_or(t, "single_word", false);
    // HF's default: normalized unless special.
    a.normalized = tokjson::bool_or(t, "normalized", !a.special);
    out.push_back(std::move(a));
  }
  return out;
}

void AddedVocab::build(std::vector<AddedToken> tokens, const Normalizer* normalizer) {
  tokens_ = std::move(tokens);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    index_by_id_[t.id] = i;
    id_by_content_[t.content] = t.id;
    max_id_ = std::max(max_id_, t.id);
    if (t.content.empty()) continue;
    Matcher& m = t.normalized ? normalized_ : raw_;
    std::string pattern = (t.normalized && normalizer) ? normalizer->normalize(t.content) : t.content;
    if (pattern.empty()) continue;
    m.by_first[static_cast<unsigned char>(pattern[0])].emplace_back(std::move(pattern), i);
    m.any = true;
  }
  for (Matcher* m : {&raw_, &normalized_})
    for (auto& list : m->by_first)
      std::stable_sort(list.begin(), list.end(),
                       [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

const AddedToken* AddedVocab::by_id(int32_t id) const {
  auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocab::id_of(std::string_view content) const {
  auto it = id_by_content_.find(std::string(content));
  if (it == id_by_content_.end()) return std::nullopt;
  return it->second;
}

std::vector<Segment> AddedVocab::split(std::string_view text, bool normalized_pass, bool parse_special,
                                       bool at_start) const {
  std::vector<Segment> out;
  const Matcher& m = normalized_pass ? normalized_ : raw_;
  if (!m.any || text.empty()) {
    if (!text.empty()) out.push_back({-1, std::string(text), at_start});
    return out;
  }
  size_t emitted = 0;  // end of the last segment pushed
  size_t pos = 0;
  while (pos < text.size()) {
    // Leftmost-longest: the first position with any match, the longest candidate there.
    const auto& cands = m.by_first[static_cast<unsigned char>(text[pos])];
    const std::pair<std::string, size_t>* hit = nullptr;
    for (const auto& c : cands) {
      if (text.compare(pos, c.first.size(), c.first) == 0) {
        hit = &c;
        break;
      }
    }
    if (!hit) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[hit->second];
    size_t start = pos, stop = pos + hit->first.size();
    pos = stop;  // the automaton resumes after a match even when the match is then skipped
    if (tok.special && !parse_special) continue;
    if (tok.single_word) {
      const bool space_before = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      size_t k = stop;
      const bool space_after = stop == text.size() || !is_word_char(utf8::decode(text, k));
      if (!space_before || !space_after) continue;
    }
    if (start < emitted) continue;  // overlaps an rstrip extension of the previous token
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), emitted);
    if (tok.rstrip) stop += leading_space_len(text.substr(stop));
    if (emitted < start) out.push_back({-1, std::string(text.substr(emitted, start - emitted)), at_start && emitted == 0});
    out.push_back({tok.id, std::string(), false});
    emitted = stop;
    pos = stop;
  }
  if (emitted < text.size()) out.push_back({-1, std::string(text.substr(emitted)), at_start && emitted == 0});
  return out;
}

}  // namespace glm5rt
