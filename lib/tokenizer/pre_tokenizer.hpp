// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split (String or Regex pattern, every
// SplitDelimiterBehavior, invert), ByteLevel (add_prefix_space, use_regex), Digits, Metaspace,
// Whitespace, WhitespaceSplit and Sequence. Anything else fails to load with UNSUPPORTED naming it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glm5rt {

// One piece of text on its way to the model. at_start: the piece begins at offset 0 of the input
// (Metaspace's prepend_scheme "first" depends on it).
struct Piece {
  std::string text;
  bool at_start = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and for ByteLevel, maps) every piece; empty pieces are dropped.
  virtual void apply(std::vector<Piece>& pieces) const = 0;
};

// nullptr for a JSON null.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j);

}  // namespace glm5rt
