// The paged cache bookkeeping of DESIGN.md: a pool of fixed-size pages (page_size token slots each) and
// per-sequence block tables. A token at position p of a sequence lives in physical slot
// block_table[p / page_size] * page_size + p % page_size, in every layer's pools (MLA latent records and
// indexer keys are addressed by the same slot). Pages are reference counted so that a later fork /
// prefix-sharing feature can share them; today every page has one owner.
// The records themselves live in backend memory (CacheStorage), see backend/backend.hpp.
#pragma once

#include <cstdint>
#include <vector>

namespace glm5rt {

class PagePool {
 public:
  explicit PagePool(int64_t n_pages);

  int64_t n_pages() const { return static_cast<int64_t>(refcount_.size()); }
  int64_t n_free() const { return static_cast<int64_t>(free_.size()); }

  // Takes n free pages (refcount 1), lowest ids first. Throws Error(cache_full) and takes nothing when
  // fewer than n are free.
  std::vector<int32_t> allocate(int64_t n);
  void retain(int32_t page);
  // Drops one reference; the page becomes free at zero.
  void release(int32_t page);
  int32_t refcount(int32_t page) const { return refcount_.at(page); }

 private:
  std::vector<int32_t> refcount_;
  std::vector<int32_t> free_;  // kept sorted descending so that back() is the lowest id
};

// The pages of one sequence, in position order.
struct BlockTable {
  std::vector<int32_t> pages;

  int64_t capacity(int32_t page_size) const { return static_cast<int64_t>(pages.size()) * page_size; }
  int64_t slot(int64_t position, int32_t page_size) const {
    return static_cast<int64_t>(pages[position / page_size]) * page_size + position % page_size;
  }
};

}  // namespace glm5rt
