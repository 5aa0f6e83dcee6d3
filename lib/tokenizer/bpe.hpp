// The BPE model of tokenizer.json ("model": {"type": "BPE"}): vocab, merges (either the list-of-pairs
// form or the older "a b" strings), ignore_merges, byte_fallback, unk_token/fuse_unk,
// continuing_subword_prefix and end_of_word_suffix. dropout (random) is refused.
//
// Merging uses a priority queue over a linked list of symbols (lowest merge rank first, leftmost on a
// tie: the order HF applies), so a word of n characters costs O(n log n), not O(n^2). Results for short
// words are cached; the cache is shared by all threads (mutex) because a Tokenizer is immutable and
// used concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace glm5rt {

// Hash for heterogeneous lookup: find(std::string_view) without building a std::string per lookup.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

class Bpe {
 public:
  explicit Bpe(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when the id is not in the vocabulary.
  const std::string* id_to_token(int32_t id) const;
  // Largest vocab id + 1.
  int32_t size() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_present_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string prefix_, suffix_;
  std::array<int32_t, 256> byte_tokens_{};  // byte_fallback: id of "<0xXX>", -1 if absent

  // Word cache (HF keeps one too): words up to kCacheMaxWordBytes, at most kCacheCapacity entries.
  static constexpr size_t kCacheMaxWordBytes = 256;
  static constexpr size_t kCacheCapacity = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringViewHash, std::equal_to<>> cache_;
};

}  // namespace glm5rt
