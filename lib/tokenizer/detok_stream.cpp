#include "tokenizer/detok_stream.hpp"

#include <span>

#include "runtime/error.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace glm5rt {

DetokStream::DetokStream(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special)
    : tok_(std::move(tokenizer)), skip_special_(skip_special) {
  require(tok_ != nullptr, Status::invalid_argument, "DetokStream needs a tokenizer");
}

DetokStream::Step DetokStream::step(int32_t id) const {
  Step s;
  s.ids = ids_;
  s.ids.push_back(id);
  s.emitted = emitted_;
  const std::string text = tok_->decode(s.ids, skip_special_);
  if (tok_->is_byte_fallback_piece(id)) return s;  // the byte group is still open
  // Hold back a trailing run of U+FFFD: lossy decoding ends an incomplete character with one, and more
  // tokens may complete it. Everything before that run cannot change any more.
  size_t stable = text.size();
  const std::string_view rep = utf8::kReplacement;
  while (stable >= emitted_ + rep.size() && text.compare(stable - rep.size(), rep.size(), rep) == 0)
    stable -= rep.size();
  if (stable > emitted_) {
    s.text = text.substr(emitted_, stable - emitted_);
    s.emitted = stable;
  }
  if (s.emitted == text.size() && s.ids.size() > 1) {
    // Nothing held back: shrink the window to the shortest context that decodes on its own to the end
    // of the text (at most kMaxContext ids; if none does, keep the window).
    constexpr size_t kMaxContext = 8;
    for (size_t k = 1; k <= kMaxContext && k < s.ids.size(); ++k) {
      const std::vector<int32_t> ctx(s.ids.end() - static_cast<ptrdiff_t>(k), s.ids.end());
      const std::string d = tok_->decode(ctx, skip_special_);
      if (!d.empty() && d.size() <= text.size() && text.compare(text.size() - d.size(), d.size(), d) == 0) {
        s.ids = ctx;
        s.emitted = d.size();
        break;
      }
    }
  }
  return s;
}

std::string DetokStream::peek(int32_t id) const { return step(id).text; }

std::string DetokStream::push(int32_t id) {
  Step s = step(id);
  ids_ = std::move(s.ids);
  emitted_ = s.emitted;
  return std::move(s.text);
}

std::string DetokStream::flush() {
  std::string rest;
  if (!ids_.empty()) {
    const std::string text = tok_->decode(ids_, skip_special_);
    if (text.size() > emitted_) rest = text.substr(emitted_);
  }
  ids_.clear();
  emitted_ = 0;
  return rest;
}

}  // namespace glm5rt
