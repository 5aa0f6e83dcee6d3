// Host memory for one session's cache records: per layer two pools addressed by the same slot
// (page * page_size + offset), MLA latent records (kv_lora_rank + qk_rope_head_dim floats) and indexer
// keys (index_head_dim floats), float32. The pools are paged: a page's memory (both pools, all layers)
// is allocated when the page is first written, so a large budget costs nothing until it is used.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "runtime/error.hpp"
#include "runtime/host_memory.hpp"

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

  // Records of (layer, slot) for writing; the page is allocated on first use.
  float* latent_for_write(int64_t layer, int64_t slot) { return page_for_write(slot) + latent_offset(layer, slot); }
  float* index_for_write(int64_t layer, int64_t slot) { return page_for_write(slot) + index_offset(layer, slot); }
  // Copies a whole page (both pools, all layers).
  void copy_page(int32_t src, int32_t dst) {
    const float* from = page(static_cast<int64_t>(src) * page_size_);
    std::copy(from, from + n_layers_ * page_size_ * (latent_ + index_), page_for_write(static_cast<int64_t>(dst) * page_size_));
  }
  // Records of (layer, slot) for reading.
  const float* latent(int64_t layer, int64_t slot) const { return page(slot) + latent_offset(layer, slot); }
  const float* index_key(int64_t layer, int64_t slot) const { return page(slot) + index_offset(layer, slot); }

 private:
  // page layout: latent pool [layer][offset][latent], then index pool [layer][offset][index]
  int64_t latent_offset(int64_t layer, int64_t slot) const { return (layer * page_size_ + slot % page_size_) * latent_; }
  int64_t index_offset(int64_t layer, int64_t slot) const {
    return n_layers_ * page_size_ * latent_ + (layer * page_size_ + slot % page_size_) * index_;
  }
  float* page_for_write(int64_t slot) {
    const int64_t p = slot / page_size_;
    require(p >= 0 && p < n_pages(), Status::internal, "cache slot ", slot, " is outside the pool");
    auto& mem = pages_[static_cast<size_t>(p)];
    if (!mem) mem = host_zeros(static_cast<size_t>(n_layers_ * page_size_ * (latent_ + index_)));
    return mem.get();
  }
  const float* page(int64_t slot) const {
    const int64_t p = slot / page_size_;
    require(p >= 0 && p < n_pages() && pages_[static_cast<size_t>(p)], Status::internal, "cache slot ", slot,
            " was never written");
    return pages_[static_cast<size_t>(p)].get();
  }

  int32_t page_size_;
  int64_t n_layers_, latent_, index_;
  std::vector<std::unique_ptr<float[], HostFree>> pages_;
};

}  // namespace glm5rt::cpu
