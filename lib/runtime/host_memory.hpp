// Host memory for large, long-lived buffers (decoded weights, cache pages) from mimalloc, through its own
// API (never as a replacement of malloc inside the library, so a host program's allocator is untouched).
// Why mimalloc: 64-byte aligned blocks for the vectorised float32 loops, and cheap reuse of freed
// same-size blocks when cache pages come and go with sessions.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

#include <mimalloc.h>

namespace glm5rt {

inline constexpr size_t kHostAlignment = 64;

// std::allocator-compatible adapter: std::vector<float, HostAllocator<float>> gets aligned mimalloc memory.
template <typename T>
struct HostAllocator {
  using value_type = T;
  HostAllocator() noexcept = default;
  template <typename U>
  HostAllocator(const HostAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_alloc();
    void* p = mi_malloc_aligned(n * sizeof(T), kHostAlignment);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { mi_free(p); }
  template <typename U>
  bool operator==(const HostAllocator<U>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const HostAllocator<U>&) const noexcept { return false; }
};

struct HostFree {
  void operator()(void* p) const noexcept { mi_free(p); }
};

// A zero-filled, aligned array of n floats (throws std::bad_alloc when memory is short).
inline std::unique_ptr<float[], HostFree> host_zeros(size_t n) {
  if (n > static_cast<size_t>(-1) / sizeof(float)) throw std::bad_alloc();
  void* p = mi_zalloc_aligned(n * sizeof(float), kHostAlignment);
  if (!p) throw std::bad_alloc();
  return std::unique_ptr<float[], HostFree>(static_cast<float*>(p));
}

}  // namespace glm5rt
