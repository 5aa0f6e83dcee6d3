// Host memory for one session's cache records. A page holds, for every layer, page_size records of
// [MLA latent (kv_lora_rank + qk_rope_head_dim) | indexer key (index_head_dim)] float32 values. Page
// memory is allocated when a page is first written, so a large budget costs nothing until it is used.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "runtime/error.hpp"

namespace glm5rt::cpu {

class CpuCache final : public CacheStorage {
 public:
  CpuCache(int64_t n_pages, int32_t page_size, int64_t n_layers, int64_t latent, int64_t index)
      : page_size_(page_size), n_layers_(n_layers), latent_(latent), index_(index),
        pages_(static_cast<size_t>(n_pages)) {}

  int64_t n_pages() const override { return static_cast<int64_t>(pages_.size()); }
  int32_t page_size() const override { return page_size_; }
  int64_t latent_dim() const { return latent_; }
  int64_t index_dim() const { return index_; }

  // The record of (layer, slot) for writing; allocates its page on first use.
  float* record_for_write(int64_t layer, int64_t slot) {
    const int64_t page = slot / page_size_;
    require(page >= 0 && page < n_pages(), Status::internal, "cache slot ", slot, " is outside the pool");
    auto& mem = pages_[static_cast<size_t>(page)];
    if (!mem) mem.reset(new float[static_cast<size_t>(n_layers_ * page_size_ * (latent_ + index_))]());
    return mem.get() + (layer * page_size_ + slot % page_size_) * (latent_ + index_);
  }
  // The record of (layer, slot) for reading: [latent | index key].
  const float* record(int64_t layer, int64_t slot) const {
    const int64_t page = slot / page_size_;
    require(page >= 0 && page < n_pages() && pages_[static_cast<size_t>(page)], Status::internal, "cache slot ",
            slot, " was never written");
    return pages_[static_cast<size_t>(page)].get() + (layer * page_size_ + slot % page_size_) * (latent_ + index_);
  }

 private:
  int32_t page_size_;
  int64_t n_layers_, latent_, index_;
  std::vector<std::unique_ptr<float[]>> pages_;
};

}  // namespace glm5rt::cpu
