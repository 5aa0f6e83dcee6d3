// Normalizers of tokenizer.json ("normalizer"): none, NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend,
// Strip and Sequence of those. Any other type fails to load with an UNSUPPORTED error naming it.
// Offsets are not tracked: the runtime needs ids, not alignments.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace glm5rt {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

// nullptr for a JSON null (no normalizer).
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j);

}  // namespace glm5rt
