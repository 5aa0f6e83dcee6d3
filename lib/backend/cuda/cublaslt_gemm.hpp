// bf16 x bf16 -> float32 GEMMs through cuBLASLt in the nn.Linear layout: Y[m][n] = X[m][k] . W[n][k].
// Algorithms are chosen once per shape by the heuristic and cached; the workspace is ours, so calls can
// be captured in CUDA graphs.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "backend/cuda/cuda_check.hpp"

namespace glm5rt::cuda {

class LtGemm {
 public:
  LtGemm();
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // false when cuBLASLt has no algorithm for the shape (the caller falls back to its own kernel).
  bool run(const __nv_bfloat16* x, int64_t lda, const __nv_bfloat16* w, int64_t ldw, float* y, int64_t ldy,
           int64_t m, int64_t n, int64_t k, cudaStream_t stream);
  size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  struct Plan {
    bool ok = false;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  Plan& plan_for(const Key& key);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<Key, Plan> plans_;
};

}  // namespace glm5rt::cuda
