// Decoders of tokenizer.json ("decoder"): ByteLevel, Replace, Fuse, Strip, ByteFallback, Metaspace and
// Sequence. Anything else fails to load with UNSUPPORTED naming it.
//
// Tokens travel as byte strings that may hold incomplete or invalid UTF-8 (ByteLevel yields raw bytes);
// the caller applies String::from_utf8_lossy once at the end. HF applies it inside ByteLevel instead;
// the later string decoders (Replace with a valid-UTF-8 pattern, Strip, Fuse) give the same result either
// way, and keeping bytes raw lets the streaming decoder hold back an incomplete character.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glm5rt {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // HF's decode_chain: tokens in, tokens out (joined by the caller).
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
};

// nullptr for a JSON null (no decoder: tokens are joined with spaces).
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j);

}  // namespace glm5rt
