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
  const std::string text = tok_->decode(s.ids, skip_special_);
  // Hold back a trailing run of U+FFFD: lossy decoding ends an incomplete character with one, and more
  // tokens may complete it. Everything before that run cannot change any more.
  size_t stable = text.size();
  const std::string_view rep = utf8::kReplacement;
  while (stable >= emitted_ + rep.size() && text.compare(stable - rep.size(), rep.size(), rep) == 0)
    stable -= rep.size();
  s.emitted = emitted_;
  if (stable > emitted_) {
    s.text = text.substr(emitted_, stable - emitted_);
    s.emitted = stable;
  }
  if (s.emitted == text.size() && s.ids.size() > 1) {
    // Nothing held back: keep only the last id as context for the next step.
    s.ids.erase(s.ids.begin(), s.ids.end() - 1);
    s.emitted = tok_->decode(s.ids, skip_special_).size();
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
