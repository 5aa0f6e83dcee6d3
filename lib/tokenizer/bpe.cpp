#include "tokenizer/bpe.hpp"

#include <cstdio>
#include <queue>

#include "tokenizer/json_fields.hpp"
#include "tokenizer/utf8.hpp"

namespace glm5rt {

using tokjson::json;

Bpe::Bpe(const json& model) {
  const char* c = "model (BPE)";
  if (auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    require(it->is_number() && it->get<double>() == 0.0, Status::unsupported,
            "tokenizer.json: BPE dropout is random and not supported (set it to null)");
  }
  const json& vocab = tokjson::field(model, "vocab", c);
  require(vocab.is_object(), Status::format, "tokenizer.json: model.vocab must be an object");
  int32_t max_id = -1;
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    require(it.value().is_number_integer(), Status::format, "tokenizer.json: model.vocab[\"", it.key(),
            "\"] is not an integer id");
    const int64_t id = it.value().get<int64_t>();
    require(id >= 0 && id < (int64_t{1} << 30), Status::format, "tokenizer.json: model.vocab[\"", it.key(),
            "\"] has id ", id, " out of range");
    vocab_.emplace(it.key(), static_cast<int32_t>(id));
    if (id > max_id) max_id = static_cast<int32_t>(id);
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  id_present_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [tok, id] : vocab_) {
    id_to_token_[id] = tok;
    id_present_[id] = true;
  }

  prefix_ = tokjson::string_or(model, "continuing_subword_prefix", "");
  suffix_ = tokjson::string_or(model, "end_of_word_suffix", "");
  fuse_unk_ = tokjson::bool_or(model, "fuse_unk", false);
  byte_fallback_ = tokjson::bool_or(model, "byte_fallback", false);
  ignore_merges_ = tokjson::bool_or(model, "ignore_merges", false);
  if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) {
    auto id = token_to_id(it->get<std::string>());
    require(id.has_value(), Status::format, "tokenizer.json: model.unk_token \"", it->get<std::string>(),
            "\" is not in the vocabulary");
    unk_id_ = *id;
  }
  byte_tokens_.fill(-1);
  if (byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (auto id = token_to_id(name)) byte_tokens_[b] = *id;
    }
  }

  const json& merges = tokjson::field(model, "merges", c);
  require(merges.is_array(), Status::format, "tokenizer.json: model.merges must be an array");
  merges_.reserve(merges.size() * 2);
  int32_t rank = 0;
  for (const json& m : merges) {
    std::string a, b;
    if (m.is_string()) {
      // Legacy form "a b": the first space separates the two parts.
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      require(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, Status::format,
              "tokenizer.json: merge ", rank, " \"", s, "\" is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      fail(Status::format, "tokenizer.json: merge ", rank, " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto ia = token_to_id(a), ib = token_to_id(b);
    require(ia && ib, Status::format, "tokenizer.json: merge ", rank, " uses \"", ia ? b : a,
            "\", which is not in the vocabulary");
    // With a continuing-subword prefix the right part loses it when merged (HF does the same).
    std::string merged = a + (prefix_.empty() || b.compare(0, prefix_.size(), prefix_) != 0 ? b : b.substr(prefix_.size()));
    auto im = token_to_id(merged);
    require(im.has_value(), Status::format, "tokenizer.json: merge ", rank, " gives \"", merged,
            "\", which is not in the vocabulary");
    // A duplicated pair keeps its last rank: HF collects the merges into a HashMap in order.
    merges_.insert_or_assign(pair_key(*ia, *ib), Merge{rank, *im});
    ++rank;
  }
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(int32_t id) const {
  if (id < 0 || id >= size() || !id_present_[id]) return nullptr;
  return &id_to_token_[id];
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t before = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();  // simple bound; refills with current words
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + static_cast<ptrdiff_t>(before), out.end()));
  }
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // Symbols of a doubly linked list; len == 0 marks a symbol merged into its left neighbour.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  auto push = [&](int32_t id) {
    const int32_t idx = static_cast<int32_t>(sym.size());
    sym.push_back({id, idx - 1, idx + 1, true});
  };

  size_t i = 0;
  bool last_was_unk = false;
  std::string unit;
  while (i < word.size()) {
    const size_t start = i;
    size_t n = utf8::valid_sequence_length(word, i);
    if (n == 0) n = 1;  // cannot happen on valid input; stay safe on bytes
    i += n;
    unit.assign(word.substr(start, n));
    if (start > 0 && !prefix_.empty()) unit.insert(0, prefix_);
    if (i == word.size() && !suffix_.empty()) unit += suffix_;
    if (auto id = token_to_id(unit)) {
      push(*id);
      last_was_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t k = start; k < start + n; ++k) all = all && byte_tokens_[static_cast<uint8_t>(word[k])] >= 0;
      if (all) {
        for (size_t k = start; k < start + n; ++k) push(byte_tokens_[static_cast<uint8_t>(word[k])]);
        last_was_unk = false;
        continue;
      }
    }
    if (unk_id_) {
      if (!(fuse_unk_ && last_was_unk)) push(*unk_id_);
      last_was_unk = true;
    }
    // No unk token: HF drops the character; so do we, to give the same ids.
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t left) {
    const int32_t right = sym[left].next;
    if (right < 0) return;
    auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.new_id});
  };
  for (int32_t k = 0; k + 1 < static_cast<int32_t>(sym.size()); ++k) consider(k);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    // Stale entry: the pair at this position changed since it was queued.
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.rank != top.rank || it->second.new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int32_t k = 0; k >= 0; k = sym[k].next) out.push_back(sym[k].id);
}

}  // namespace glm5rt
