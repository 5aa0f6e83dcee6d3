// Added tokens of tokenizer.json ("added_tokens"): found in the text before pre-tokenization, leftmost
// first and longest at a position (HF's aho-corasick LeftmostLongest), honouring special, lstrip, rstrip,
// single_word and normalized. Tokens with normalized = false are matched in the raw text, the others in
// the normalized text (their content normalized too), exactly the two passes HF makes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace glm5rt {

class Normalizer;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// A segment of input after added-token extraction: either an added token's id or text to tokenize.
struct Segment {
  int32_t id;        // >= 0 for an added token
  std::string text;  // the text otherwise
  bool at_start;     // the segment begins at offset 0 of the input
};

class AddedVocab {
 public:
  AddedVocab() = default;
  // normalizer may be null. Tokens must be given in file order.
  void build(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Splits one text into segments. parse_special = false leaves special tokens as plain text (HF's
  // encode_special_tokens); non-special added tokens are still matched.
  std::vector<Segment> split(std::string_view text, bool normalized_pass, bool parse_special, bool at_start) const;

  const AddedToken* by_id(int32_t id) const;
  std::optional<int32_t> id_of(std::string_view content) const;
  bool is_special(int32_t id) const {
    const AddedToken* t = by_id(id);
    return t && t->special;
  }
  int32_t max_id() const { return max_id_; }
  bool empty() const { return tokens_.empty(); }

 private:
  struct Matcher {
    // Candidates by first byte, longest first.
    std::array<std::vector<std::pair<std::string, size_t>>, 256> by_first;  // (pattern, token index)
    bool any = false;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> index_by_id_;
  std::unordered_map<std::string, int32_t> id_by_content_;
  Matcher raw_, normalized_;
  int32_t max_id_ = -1;
};

// Parses the "added_tokens" array.
std::vector<AddedToken> parse_added_tokens(const nlohmann::json& j);

}  // namespace glm5rt
