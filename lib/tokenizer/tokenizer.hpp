// A Hugging Face tokenizer.json (byte-level BPE family) loaded into an immutable object: encode text to
// ids and decode ids to text with the same results as the `tokenizers` library. Components that are not
// implemented fail at load time with an error naming them; nothing is silently approximated.
//
// Encoding: added tokens in the raw text -> normalizer -> added tokens in the normalized text ->
// pre-tokenizer -> BPE per word -> post-processor. Decoding: tokens -> decoder chain -> UTF-8 with
// U+FFFD for ill-formed bytes (String::from_utf8_lossy).
//
// Thread-safe: every method is const; the BPE word cache has its own lock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_vocab.hpp"

namespace glm5rt {

class Bpe;
class Decoder;
class Normalizer;
class PreTokenizer;
class PostProcessor;

class Tokenizer {
 public:
  // tokenizer.json plus, when present in the same directory, tokenizer_config.json (eos_token),
  // config.json and generation_config.json (eos_token_id). Errors: io, format, unsupported.
  static std::shared_ptr<const Tokenizer> load_dir(const std::string& dir);
  // From the text of a tokenizer.json. eos ids: the given ids plus the id of eos_token when non-empty
  // (format error if it is not a token).
  static std::shared_ptr<const Tokenizer> from_json(std::string_view tokenizer_json,
                                                    std::vector<int32_t> eos_ids = {},
                                                    std::string_view eos_token = {});
  ~Tokenizer();

  // Encodes valid UTF-8 (invalid_argument otherwise). parse_special: match special added tokens in the
  // text. add_special: apply the post-processor (HF's add_special_tokens).
  std::vector<int32_t> encode(std::string_view text, bool parse_special, bool add_special = true) const;

  // Full decode as HF's Tokenizer::decode. Ids outside [0, vocab_size) are invalid_argument; ids inside
  // the range without a token are skipped (as HF does).
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;
  // The decoder chain's bytes before the final UTF-8 replacement (may end in an incomplete character).
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special) const;
  // The raw bytes of one token (decode_bytes of that id alone).
  std::string token_bytes(int32_t id) const { return decode_bytes(std::span<const int32_t>(&id, 1), false); }

  // The id of an added token by its exact content.
  std::optional<int32_t> added_token_id(std::string_view content) const { return added_.id_of(content); }
  // Any token (added or in the vocab) by its exact string.
  std::optional<int32_t> token_to_id(std::string_view token) const;

  // True when the decoder chain has ByteFallback and `id` is one of its "<0xXX>" byte tokens: such
  // tokens join their neighbours into one UTF-8 sequence, so a stream must not emit text while the last
  // token is one of them.
  bool is_byte_fallback_piece(int32_t id) const;

  int32_t vocab_size() const { return vocab_size_; }
  bool is_eos(int32_t id) const;
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

 private:
  Tokenizer() = default;
  void encode_text(const std::string& text, bool at_start, bool parse_special, std::vector<int32_t>& out) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Bpe> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  AddedVocab added_;
  int32_t vocab_size_ = 0;
  std::vector<int32_t> eos_ids_;
  bool decoder_byte_fallback_ = false;
};

}  // namespace glm5rt
