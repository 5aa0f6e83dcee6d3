// moe_forward with the routing given by the caller (MoeParams::topk_ids_in / topk_weights_in, what the
// CUDA backend uses for ForwardProbe::force_experts): handing it the routing it chose itself reproduces
// its output, and handing it another routing changes the output (the given ids are used, not ignored).
// Both fronts: the fused single-kernel front (<= 32 tokens) and the separate kernels (front_path 1, and
// every batch above 32 tokens).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/common/simple_forward.cuh"
#include "kernels/moe/moe.h"
#include "tests/gpu/fp8_reference.hpp"

using namespace fp8ref;
namespace k = glm5rt::kernels;

namespace {

double rel_l2(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int64_t* non_finite) {
  double d2 = 0, r2 = 0;
  *non_finite = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = bf16_to_float(a[i]), y = bf16_to_float(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) ++*non_finite;
    d2 += (x - y) * (x - y);
    r2 += y * y;
  }
  return std::sqrt(d2 / r2);
}

}  // namespace

TEST_CASE("moe_forward with caller routing (topk_ids_in) reproduces its own routing's output") {
  const int H = 256, I = 256, E = 16, K = 4;
  std::mt19937 rng(std::random_device{}());
  // Experts 0..E-1 and the shared expert E: gate, up [I, H] and down [H, I], e4m3 with 128 x 128 scales.
  const size_t w_elems = static_cast<size_t>(I) * H, s_elems = static_cast<size_t>(I / 128) * (H / 128);
  DeviceBuffer<uint8_t> w(3 * (E + 1) * w_elems);
  DeviceBuffer<float> s(3 * (E + 1) * s_elems);
  REQUIRE(glm5k::launch_fill_random_fp8(w.ptr, static_cast<int64_t>(w.count), rng(), 448.f, nullptr) == cudaSuccess);
  const float base = std::sqrt(3.f / H) / 448.f;
  REQUIRE(glm5k::launch_fill_random_f32(s.ptr, static_cast<int64_t>(s.count), rng(), 0.5f * base, 1.5f * base,
                                        nullptr) == cudaSuccess);
  std::vector<const uint8_t*> gu_w, d_w;
  std::vector<const float*> gu_s, d_s;
  for (int e = 0; e <= E; ++e) {
    for (int part = 0; part < 2; ++part) {  // gate, up
      gu_w.push_back(w.ptr + (3 * e + part) * w_elems);
      gu_s.push_back(s.ptr + (3 * e + part) * s_elems);
    }
    d_w.push_back(w.ptr + (3 * e + 2) * w_elems);
    d_s.push_back(s.ptr + (3 * e + 2) * s_elems);
  }
  DeviceBuffer<const uint8_t*> dgu_w(gu_w.size()), dd_w(d_w.size());
  DeviceBuffer<const float*> dgu_s(gu_s.size()), dd_s(d_s.size());
  dgu_w.upload(gu_w);
  dd_w.upload(d_w);
  dgu_s.upload(gu_s);
  dd_s.upload(d_s);

  for (const int T : {6, 100}) {
    for (const int front : {0, 1}) {
      CAPTURE(T);
      CAPTURE(front);
      DeviceBuffer<uint16_t> x(static_cast<size_t>(T) * H), rw(static_cast<size_t>(E) * H);
      DeviceBuffer<float> bias(E);
      x.upload(random_bf16(x.count, rng));
      rw.upload(random_bf16(rw.count, rng, 0.1f));
      std::vector<float> b(E);
      for (auto& v : b) v = std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng);
      bias.upload(b);
      DeviceBuffer<int> ids(static_cast<size_t>(T) * K), ids_shifted(static_cast<size_t>(T) * K);
      DeviceBuffer<float> wts(static_cast<size_t>(T) * K);
      DeviceBuffer<uint16_t> out1(x.count), out2(x.count), out3(x.count);
      const size_t ws_bytes = k::moe_workspace_size(T, H, I, E, K);
      DeviceBuffer<char> ws(ws_bytes);

      k::MoeParams p;
      p.tokens = T;
      p.hidden = H;
      p.inter = I;
      p.num_experts = E;
      p.top_k = K;
      p.n_group = 4;
      p.topk_group = 2;
      p.routed_scaling_factor = 2.5f;
      p.x = reinterpret_cast<const __nv_bfloat16*>(x.ptr);
      p.router_weight = reinterpret_cast<const __nv_bfloat16*>(rw.ptr);
      p.router_bias = bias.ptr;
      p.gate_up_w = dgu_w.ptr;
      p.gate_up_s = dgu_s.ptr;
      p.down_w = dd_w.ptr;
      p.down_s = dd_s.ptr;
      p.front_path = front;

      // 1. Its own routing, reported.
      ids.poison();
      wts.poison();
      out1.poison();
      p.out = reinterpret_cast<__nv_bfloat16*>(out1.ptr);
      p.topk_ids_out = ids.ptr;
      p.topk_weights_out = wts.ptr;
      REQUIRE(k::moe_forward(p, ws.ptr, ws_bytes, nullptr) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      const std::vector<int> chosen = ids.download();
      for (int id : chosen) REQUIRE((id >= 0 && id < E));

      // 2. The same routing handed in: the router must not run (its inputs are withdrawn) and the
      // output must match.
      out2.poison();
      k::MoeParams q = p;
      q.router_weight = nullptr;
      q.router_bias = nullptr;
      q.topk_ids_out = nullptr;
      q.topk_weights_out = nullptr;
      q.topk_ids_in = ids.ptr;
      q.topk_weights_in = wts.ptr;
      q.out = reinterpret_cast<__nv_bfloat16*>(out2.ptr);
      REQUIRE(k::moe_forward(q, ws.ptr, ws_bytes, nullptr) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      int64_t nf = 0;
      const std::vector<uint16_t> o1 = out1.download();
      const double same = rel_l2(out2.download(), o1, &nf);
      CHECK(nf == 0);
      CHECK(same <= 1e-3);  // same inputs and kernels: equal up to the GEMMs' summation order

      // 3. Another routing (every token's experts shifted by one, same weights): the output changes.
      std::vector<int> shifted = chosen;
      for (int& id : shifted) id = (id + 1) % E;
      ids_shifted.upload(shifted);
      out3.poison();
      q.topk_ids_in = ids_shifted.ptr;
      q.out = reinterpret_cast<__nv_bfloat16*>(out3.ptr);
      REQUIRE(k::moe_forward(q, ws.ptr, ws_bytes, nullptr) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      const double other = rel_l2(out3.download(), o1, &nf);
      CHECK(nf == 0);
      CHECK(other >= 0.2);
      std::printf("[moe-caller-routing] T=%d front_path=%d: given its own routing rel_l2 %.3e, shifted routing %.3e\n",
                  T, front, same, other);
    }
  }
}
