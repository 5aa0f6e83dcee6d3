// Incremental decoding for streamed generation. Each push returns only text that can no longer change:
// complete UTF-8, with the bytes of an incomplete character (and a trailing U+FFFD, which more bytes may
// still turn into a character, as with ByteFallback tokens) held back. The concatenation of all pushes
// and the final flush equals Tokenizer::decode of the same ids.
//
// How: the stream decodes a small window of ids (context + new) and emits what lies beyond the text
// already emitted. Held back as well: everything while the last token is a ByteFallback byte token (its
// group of bytes may still turn from U+FFFDs into a character, or from a character into U+FFFDs). When
// nothing is held back the window shrinks to a short context: the fewest last ids whose own decode is
// non-empty and ends the window's text, so that decoders that treat the first token specially
// (Metaspace, Strip) or join neighbours (ByteFallback) continue exactly as in a full decode. Costs stay
// O(window) per token instead of O(all tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace glm5rt {

class Tokenizer;

class DetokStream {
 public:
  explicit DetokStream(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special = false);

  // The text this id completes (possibly empty). Throws invalid_argument for an id outside the vocab;
  // the stream is unchanged then.
  std::string push(int32_t id);
  // What the next push(id) would return, without changing the stream (for a caller whose buffer is too
  // small: the ABI reports the size and the token is not consumed).
  std::string peek(int32_t id) const;
  // Everything held back (incomplete bytes become U+FFFD), then a reset to the initial state.
  std::string flush();

 private:
  struct Step {
    std::string text;          // newly emitted text
    std::vector<int32_t> ids;  // window after the step
    size_t emitted = 0;        // bytes of decode(window) already emitted after the step
  };
  Step step(int32_t id) const;

  std::shared_ptr<const Tokenizer> tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // the window
  size_t emitted_ = 0;        // bytes of decode(ids_) already handed out
};

}  // namespace glm5rt
