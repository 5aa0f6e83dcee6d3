// kernels/common/absorbed_heads (the decode-sized absorbed per-head products) alone against a float64 CPU
// reference of the same bf16 inputs: fresh random inputs per case, output poisoned (bf16 NaN) before each
// launch, the rope tail copy checked exactly, bad parameters rejected. Row counts 1 / 5 / 32 (decode),
// GLM-5's shapes (W_UK: k 192, n 512 with a 64-value tail; W_UV: k 512, n 256) with fewer heads, and the
// other supported k (8- and 16-lane forms, a last block with fewer outputs than its lanes cover).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/common/absorbed_heads.cuh"

namespace {

#define CK(x) REQUIRE((x) == cudaSuccess)

template <typename T>
struct Buf {
  T* p = nullptr;
  size_t n = 0;
  explicit Buf(size_t count) : n(count) { CK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
  explicit Buf(const std::vector<T>& v) : Buf(v.size()) { CK(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
  ~Buf() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    CK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937_64& g, float amp) {
  std::uniform_real_distribution<float> d(-amp, amp);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = __float2bfloat16(d(g));
  return v;
}

// rows, heads, n, k; the output row holds heads x (n + tail) values (the packed-query layout when tail > 0).
void run_case(int rows, int heads, int n, int k, int tail, bool pdl) {
  std::mt19937_64 g(std::random_device{}());
  const int cw = n + tail;  // output per head
  const auto a = random_bf16(static_cast<size_t>(rows) * heads * k, g, 1.f);
  const auto w = random_bf16(static_cast<size_t>(heads) * n * k, g, std::sqrt(3.f / k));
  std::vector<float> t(static_cast<size_t>(rows) * heads * std::max(tail, 1));
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  for (auto& x : t) x = d(g);
  Buf<__nv_bfloat16> da(a), dw(w), dc(static_cast<size_t>(rows) * heads * cw);
  Buf<float> dt(t);
  CK(cudaMemset(dc.p, 0xff, dc.n * 2));  // bf16 NaN everywhere
  glm5k::AbsorbedHeadsParams p;
  p.a = da.p;
  p.lda = static_cast<int64_t>(heads) * k;
  p.a_head_stride = k;
  p.w = dw.p;
  p.rows = rows;
  p.heads = heads;
  p.n = n;
  p.k = k;
  p.c = dc.p;
  p.ldc = static_cast<int64_t>(heads) * cw;
  p.c_head_stride = cw;
  p.tail = tail ? dt.p : nullptr;
  p.tail_n = tail;
  p.pdl = pdl;
  CK(glm5k::launch_absorbed_heads(p, nullptr));
  CK(cudaDeviceSynchronize());
  const auto c = dc.get();
  double worst = 0, scale = 0;
  int64_t bad_tail = 0, nan = 0;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h) {
      for (int j = 0; j < n; ++j) {
        double ref = 0;
        for (int q = 0; q < k; ++q)
          ref += static_cast<double>(__bfloat162float(a[(static_cast<size_t>(r) * heads + h) * k + q])) *
                 __bfloat162float(w[(static_cast<size_t>(h) * n + j) * k + q]);
        const float got = __bfloat162float(c[static_cast<size_t>(r) * heads * cw + h * cw + j]);
        if (!std::isfinite(got)) ++nan;
        worst = std::max(worst, std::fabs(got - ref));
        scale = std::max(scale, std::fabs(ref));
      }
      for (int i = 0; i < tail; ++i) {
        const float want = __bfloat162float(__float2bfloat16(t[(static_cast<size_t>(r) * heads + h) * tail + i]));
        bad_tail += __bfloat162float(c[static_cast<size_t>(r) * heads * cw + h * cw + n + i]) != want;
      }
    }
  const double rel = worst / std::max(scale, 1e-30);
  std::printf("[absorbed-heads] rows %2d heads %2d n %3d k %3d tail %2d pdl %d: max |err| / max |ref| %.3e, tail "
              "mismatches %lld\n",
              rows, heads, n, k, tail, pdl ? 1 : 0, rel, static_cast<long long>(bad_tail));
  CHECK(nan == 0);
  CHECK(bad_tail == 0);
  // One bf16 rounding of the result (2^-9 relative) on float32 sums of exact bf16 products.
  CHECK(rel <= 4e-3);
}

bool pdl_ok() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  return major >= 9;
}

}  // namespace

TEST_CASE("absorbed heads: GLM-5 shapes (W_UK with the rope tail, W_UV) at decode row counts") {
  for (const int rows : {1, 5, 32}) {
    run_case(rows, 8, 512, 192, 64, false);  // q_nope x W_UK into the packed query
    run_case(rows, 8, 256, 512, 0, false);   // o_lat x W_UV
  }
  if (pdl_ok()) {  // launched as a programmatic dependent (nothing precedes it here: the wait returns)
    run_case(3, 64, 512, 192, 64, true);
    run_case(3, 64, 256, 512, 0, true);
  }
}

TEST_CASE("absorbed heads: every supported k, partial output blocks") {
  for (const int k : {64, 128, 192, 256, 320, 384, 512}) run_case(4, 3, 37, k, k == 64 ? 5 : 0, false);
  run_case(2, 2, 1, 256, 0, false);
}

TEST_CASE("absorbed heads: bad parameters are rejected") {
  CHECK_FALSE(glm5k::absorbed_heads_supported(448));
  CHECK_FALSE(glm5k::absorbed_heads_supported(96));
  CHECK_FALSE(glm5k::absorbed_heads_supported(576));
  CHECK(glm5k::absorbed_heads_supported(192));
  CHECK(glm5k::absorbed_heads_supported(512));
  Buf<__nv_bfloat16> a(64 * 4 + 8), w(64 * 4 * 8), c(64 * 4);
  glm5k::AbsorbedHeadsParams p;
  p.a = a.p;
  p.lda = 64;
  p.a_head_stride = 64;
  p.w = w.p;
  p.rows = 4;
  p.heads = 1;
  p.n = 8;
  p.k = 64;
  p.c = c.p;
  p.ldc = 8;
  p.c_head_stride = 8;
  CHECK(glm5k::launch_absorbed_heads(p, nullptr) == cudaSuccess);
  auto q = p;
  q.k = 448;
  CHECK(glm5k::launch_absorbed_heads(q, nullptr) == cudaErrorInvalidValue);
  q = p;
  q.a = a.p + 1;  // not 16-byte aligned
  CHECK(glm5k::launch_absorbed_heads(q, nullptr) == cudaErrorInvalidValue);
  q = p;
  q.lda = 68;  // rows not 16-byte aligned
  CHECK(glm5k::launch_absorbed_heads(q, nullptr) == cudaErrorInvalidValue);
  q = p;
  q.w = nullptr;
  CHECK(glm5k::launch_absorbed_heads(q, nullptr) == cudaErrorInvalidValue);
  q = p;
  q.tail = reinterpret_cast<const float*>(a.p);
  q.tail_n = 0;
  CHECK(glm5k::launch_absorbed_heads(q, nullptr) == cudaErrorInvalidValue);
  CK(cudaDeviceSynchronize());
}
