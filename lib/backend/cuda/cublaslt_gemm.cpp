#include "backend/cuda/cublaslt_gemm.hpp"

namespace glm5rt::cuda {

namespace {
constexpr size_t kWorkspaceBytes = 32u << 20;
}

LtGemm::LtGemm() {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
  workspace_.allocate(kWorkspaceBytes, "the cuBLASLt workspace");
}

LtGemm::~LtGemm() {
  for (auto& [key, p] : plans_) {
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
    if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  }
  if (handle_) cublasLtDestroy(handle_);
}

LtGemm::Plan& LtGemm::plan_for(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan& p = plans_[key];
  const auto [m, n, k, lda, ldw, ldy] = key;
  // Column-major view: Y^T [n, m] = W^T^T ... i.e. D(n x m) = op(A = W as k x n, transposed) * B (X as k x m).
  check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  check(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n, ldw), "cublasLtMatrixLayoutCreate(A)");
  check(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, m, lda), "cublasLtMatrixLayoutCreate(B)");
  check(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, n, m, ldy), "cublasLtMatrixLayoutCreate(C)");
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const size_t ws = workspace_.bytes();
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
        "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    p.algo = result.algo;
    p.ok = true;
  }
  return p;
}

bool LtGemm::run(const __nv_bfloat16* x, int64_t lda, const __nv_bfloat16* w, int64_t ldw, float* y, int64_t ldy,
                 int64_t m, int64_t n, int64_t k, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return true;
  Plan& p = plan_for(Key{m, n, k, lda, ldw, ldy});
  if (!p.ok) return false;
  const float alpha = 1.0f, beta = 0.0f;
  check(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo, workspace_.get(),
                       workspace_.bytes(), stream),
        "cublasLtMatmul");
  return true;
}

}  // namespace glm5rt::cuda
