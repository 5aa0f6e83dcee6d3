#include "cache/page_pool.hpp"

#include <algorithm>

#include "runtime/error.hpp"

namespace glm5rt {

PagePool::PagePool(int64_t n_pages) : refcount_(static_cast<size_t>(n_pages), 0) {
  free_.reserve(static_cast<size_t>(n_pages));
  for (int64_t p = n_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

std::vector<int32_t> PagePool::allocate(int64_t n) {
  require(n <= n_free(), Status::cache_full, "the cache needs ", n, " more pages but only ", n_free(), " of ",
          n_pages(), " are free");
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = free_.back();
    free_.pop_back();
    refcount_[p] = 1;
    out.push_back(p);
  }
  return out;
}

void PagePool::retain(int32_t page) { ++refcount_.at(page); }

void PagePool::release(int32_t page) {
  int32_t& rc = refcount_.at(page);
  if (rc <= 0) return;  // defensive: double release is a bug upstream, never a crash
  if (--rc == 0) {
    // keep free_ sorted descending so allocation order stays deterministic
    auto it = std::lower_bound(free_.begin(), free_.end(), page, std::greater<int32_t>());
    free_.insert(it, page);
  }
}

}  // namespace glm5rt
