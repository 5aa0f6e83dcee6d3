// CUDA and cuBLASLt status checks: every call's status becomes a glm5rt::Error (device, or out_of_memory
// for allocation failures) with the runtime's own error text, never an abort.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "runtime/error.hpp"

namespace glm5rt::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clears a non-sticky error so that later calls report their own
  if (e == cudaErrorMemoryAllocation)
    fail(Status::out_of_memory, what, ": ", cudaGetErrorString(e));
  fail(Status::device, what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

inline void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) fail(Status::out_of_memory, what, ": ", cublasLtGetStatusString(s));
  fail(Status::device, what, ": ", cublasLtGetStatusName(s), " (", cublasLtGetStatusString(s), ")");
}

// Device memory owned by one object; allocation failure is Status::out_of_memory naming what it was for.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const char* what) { allocate(bytes, what); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  void allocate(size_t bytes, const char* what) {
    release();
    if (bytes == 0) return;
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      ptr_ = nullptr;
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      if (e == cudaErrorMemoryAllocation)
        fail(Status::out_of_memory, "device allocation of ", bytes, " bytes for ", what, " failed (", free_b,
             " of ", total_b, " bytes free)");
      fail(Status::device, "cudaMalloc for ", what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
    }
    bytes_ = bytes;
  }
  void release() {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace glm5rt::cuda
