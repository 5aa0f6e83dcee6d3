// kernels/common/absorbed_heads (the decode-sized absorbed per-head products) alone against a float64 CPU
// reference of the same bf16 inputs: fresh random inputs per case, output poisoned (bf16 NaN) before each
// launch, the rope tail copy checked exactly, bad parameters rejected. Row counts 1 / 5 / 32 (decode),
// GLM-5's shapes (W_UK: k 192, n 512 with a 64-value tail; W_UV: k 512, n 256) with fewer heads, and the
// other supported k (8- and 16-lane forms, a last block with fewer outputs than its lanes cover); both
// input forms (bf16, and float32 rounded to bf16 with a rotated rope tail: the backend's fused query).
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
// f32: the input is float32 [rows, heads, k + tail] (q_b's output layout: the tail is each head's rope part,
// rotated with random cos / sin tables), as the backend's fused absorbed query reads it; else bf16
// [rows, heads, k] and a separate float32 tail [rows, heads, tail] copied unrotated.
void run_case(int rows, int heads, int n, int k, int tail, bool pdl, bool f32 = false) {
  std::mt19937_64 g(std::random_device{}());
  const int cw = n + tail;  // output per head
  const int aw = f32 ? k + tail : k;  // input per head
  std::uniform_real_distribution<float> d(-1.f, 1.f), dt4(-4.f, 4.f);
  std::vector<float> af(static_cast<size_t>(rows) * heads * aw);
  for (auto& x : af) x = d(g);
  std::vector<__nv_bfloat16> ab(af.size());
  for (size_t i = 0; i < af.size(); ++i) ab[i] = __float2bfloat16(af[i]);
  const auto w = random_bf16(static_cast<size_t>(heads) * n * k, g, std::sqrt(3.f / k));
  std::vector<float> t(static_cast<size_t>(rows) * heads * std::max(tail, 1));
  for (auto& x : t) x = dt4(g);
  const int half = std::max(tail / 2, 1);
  std::vector<float> cs(static_cast<size_t>(rows) * half), sn(cs.size());
  for (size_t i = 0; i < cs.size(); ++i) {
    const float ang = dt4(g);
    cs[i] = std::cos(ang);
    sn[i] = std::sin(ang);
  }
  Buf<__nv_bfloat16> da(ab), dw(w), dc(static_cast<size_t>(rows) * heads * cw);
  Buf<float> daf(af), dt(t), dcs(cs), dsn(sn);
  CK(cudaMemset(dc.p, 0xff, dc.n * 2));  // bf16 NaN everywhere
  glm5k::AbsorbedHeadsParams p;
  if (f32) p.a_f32 = daf.p;
  else p.a = da.p;
  p.lda = static_cast<int64_t>(heads) * aw;
  p.a_head_stride = aw;
  p.w = dw.p;
  p.rows = rows;
  p.heads = heads;
  p.n = n;
  p.k = k;
  p.c = dc.p;
  p.ldc = static_cast<int64_t>(heads) * cw;
  p.c_head_stride = cw;
  if (tail) {
    p.tail = f32 ? daf.p + k : dt.p;
    p.tail_ld = static_cast<int64_t>(heads) * (f32 ? aw : tail);
    p.tail_head_stride = f32 ? aw : tail;
    if (f32) {
      p.tail_cos = dcs.p;
      p.tail_sin = dsn.p;
    }
    p.tail_n = tail;
  }
  p.pdl = pdl;
  CK(glm5k::launch_absorbed_heads(p, nullptr));
  CK(cudaDeviceSynchronize());
  const auto c = dc.get();
  double worst = 0, scale = 0;
  int64_t bad_tail = 0, nan = 0;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h) {
      const size_t abase = (static_cast<size_t>(r) * heads + h) * aw;
      for (int j = 0; j < n; ++j) {
        double ref = 0;
        for (int q = 0; q < k; ++q)
          ref += static_cast<double>(__bfloat162float(ab[abase + q])) *
                 __bfloat162float(w[(static_cast<size_t>(h) * n + j) * k + q]);
        const float got = __bfloat162float(c[static_cast<size_t>(r) * heads * cw + h * cw + j]);
        if (!std::isfinite(got)) ++nan;
        worst = std::max(worst, std::fabs(got - ref));
        scale = std::max(scale, std::fabs(ref));
      }
      for (int i = 0; i < tail; ++i) {
        const float got = __bfloat162float(c[static_cast<size_t>(r) * heads * cw + h * cw + n + i]);
        if (!f32) {  // a plain conversion: exact
          bad_tail += got != __bfloat162float(__float2bfloat16(t[(static_cast<size_t>(r) * heads + h) * tail + i]));
          continue;
        }
        // Rotated pair (2m, 2m + 1): x0 c - x1 s, x1 c + x0 s; the device may contract into FMAs, so
        // allow one bf16 step (2^-8 relative) around the float64 value.
        const int m = i / 2;
        const double x0 = af[abase + k + 2 * m], x1 = af[abase + k + 2 * m + 1];
        const double cc = cs[static_cast<size_t>(r) * half + m], ss = sn[static_cast<size_t>(r) * half + m];
        const double want = i % 2 == 0 ? x0 * cc - x1 * ss : x1 * cc + x0 * ss;
        bad_tail += !(std::fabs(got - want) <= std::fabs(want) * (1.0 / 256) + 1e-6);
      }
    }
  const double rel = worst / std::max(scale, 1e-30);
  std::printf("[absorbed-heads] rows %2d heads %2d n %3d k %3d tail %2d%s pdl %d: max |err| / max |ref| %.3e, tail "
              "mismatches %lld\n",
              rows, heads, n, k, tail, f32 ? " (f32 input, rotated)" : "", pdl ? 1 : 0, rel,
              static_cast<long long>(bad_tail));
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
    run_case(rows, 8, 512, 192, 64, false, true);  // the backend's fused form: q_b's float32 output, rotated tail
  }
  if (pdl_ok()) {  // launched as a programmatic dependent (nothing precedes it here: the wait returns)
    run_case(3, 64, 512, 192, 64, true);
    run_case(3, 64, 512, 192, 64, true, true);
    run_case(3, 64, 256, 512, 0, true);
  }
}

TEST_CASE("absorbed heads: every supported k, partial output blocks") {
  for (const int k : {64, 128, 192, 256, 384, 512}) run_case(4, 3, 37, k, k == 64 ? 6 : 0, false);
  run_case(2, 3, 37, 128, 8, false, true);
  run_case(2, 2, 1, 256, 0, false);
}

TEST_CASE("absorbed heads: bad parameters are rejected") {
  CHECK_FALSE(glm5k::absorbed_heads_supported(448));
  CHECK_FALSE(glm5k::absorbed_heads_supported(320));
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
  q.tail_n = 3;  // odd: pairs are rotated
  CHECK(glm5k::launch_absorbed_heads(q, nullptr) == cudaErrorInvalidValue);
  q = p;
  q.a = nullptr;
  q.a_f32 = reinterpret_cast<const float*>(a.p);
  q.lda = 66;  // float rows not 16-byte aligned
  CHECK(glm5k::launch_absorbed_heads(q, nullptr) == cudaErrorInvalidValue);
  CK(cudaDeviceSynchronize());
}
