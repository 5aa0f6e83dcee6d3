// Helpers shared by the GPU tests that compare the CUDA backend with the CPU backend on random models
// (test_cuda_fast_kernels.cpp, test_cuda_fast_moe.cpp): bf16-exact random weights, forwards of a row range
// with forced discrete choices, and the agreement measures the tests print and check.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "model/config.hpp"

namespace glm5rt_test {

using namespace glm5rt;

// Rounds to the nearest bf16 value: the CUDA backend stores float32 weights as bf16, so bf16-exact
// weights give both backends the same model and the comparison measures the kernels' arithmetic.
inline float bf16_representable(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = u(rng);
  return t;
}

// Rows [r0, r1) of every non-empty per-layer entry of rows x width.
template <typename T>
inline std::vector<std::vector<T>> slice_rows(const std::vector<std::vector<T>>& v, int64_t r0, int64_t r1, int64_t width) {
  std::vector<std::vector<T>> out(v.size());
  for (size_t l = 0; l < v.size(); ++l)
    if (!v[l].empty()) out[l].assign(v[l].begin() + r0 * width, v[l].begin() + r1 * width);
  return out;
}

struct Rows {
  std::vector<float> logits;
  ForwardProbe probe;
};

// One forward of rows [n_past, n_past + n_new) of `tokens` (positions n_past..), logits of every new row.
// force: rows x width slices to force (nullptr: free run). probe: whether to pass a probe (eager path).
inline Rows forward_rows(Backend& be, CacheStorage* cache, const std::vector<int32_t>& bt, int32_t ps,
                  const std::vector<int32_t>& tokens, int64_t n_past, int64_t n_new, const ForwardProbe* force,
                  bool probe = true) {
  const ModelConfig& c = be.config();
  BatchPlan plan;
  plan.add_sequence(cache, bt, ps, n_past, tokens.data() + n_past, n_new);
  for (int64_t r = 0; r < n_new; ++r) plan.logit_rows.push_back(r);
  Rows out;
  if (force) {
    out.probe.force_topk = slice_rows(force->topk, n_past, n_past + n_new, c.index_topk);
    out.probe.force_experts = slice_rows(force->experts, n_past, n_past + n_new, c.num_experts_per_tok);
    out.probe.force_expert_weights = slice_rows(force->expert_weights, n_past, n_past + n_new, c.num_experts_per_tok);
  }
  out.logits.assign(static_cast<size_t>(n_new * c.vocab_size), NAN);  // poisoned
  be.forward(plan, out.logits.data(), {}, probe ? &out.probe : nullptr);
  return out;
}

inline std::vector<int32_t> scrambled_pages(int64_t n_pages, uint64_t seed) {
  std::vector<int32_t> bt(static_cast<size_t>(n_pages));
  for (int64_t p = 0; p < n_pages; ++p) bt[p] = static_cast<int32_t>(p);
  std::shuffle(bt.begin(), bt.end(), std::mt19937_64(seed));
  return bt;
}

// The reference of the decode checks: rows 0..n of `tokens` through `cpu` in one forward, on a fresh cache
// of page size ps (pages scrambled with seed 3), probe on.
inline Rows reference_rows(Backend& cpu, int32_t ps, const std::vector<int32_t>& tokens, int64_t n) {
  auto cache = cpu.create_cache((n + ps - 1) / ps, ps);
  return forward_rows(cpu, cache.get(), scrambled_pages((n + ps - 1) / ps, 3), ps, tokens, 0, n, nullptr);
}

// Rows 0..p of `tokens` in one forward, then rows p..n one at a time (the T = 1 paths), on a fresh cache of
// `be` (page size ps, record dtypes dt, two spare pages, pages scrambled with seed 9), each with the
// reference's selections and expert choices forced (`force`): each(r, row r's Rows) after row r.
template <typename Each>
void prefill_then_decode(Backend& be, const CacheDtypes& dt, int32_t ps, const std::vector<int32_t>& tokens, int64_t p,
                         int64_t n, const ForwardProbe* force, Each&& each) {
  const int64_t n_pages = (n + ps - 1) / ps + 2;
  const std::vector<int32_t> bt = scrambled_pages(n_pages, 9);
  auto cache = be.create_cache(n_pages, ps, dt);
  (void)forward_rows(be, cache.get(), bt, ps, tokens, 0, p, force);
  for (int64_t r = p; r < n; ++r) each(r, forward_rows(be, cache.get(), bt, ps, tokens, r, 1, force));
}

// The CUDA backend behind a Backend (the tests' make_cuda_backend result).
inline cuda::CudaBackend& as_cuda(Backend& b) {
  auto* cb = dynamic_cast<cuda::CudaBackend*>(&b);
  REQUIRE(cb != nullptr);
  return *cb;
}

struct Agreement {
  double rel = 0, max_diff = 0, max_ref = 0, rel_l2 = 0;
  int64_t nan = 0, argmax_checked = 0, argmax_mismatch = 0;
};

// max |got - ref| / max |ref|; argmax compared on rows where the reference's top-2 gap exceeds 5% of its
// logit range.
inline Agreement compare(const std::vector<float>& got, const std::vector<float>& ref, int64_t V) {
  Agreement a;
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) ++a.nan;
    a.max_diff = std::max(a.max_diff, std::fabs(static_cast<double>(got[i]) - ref[i]));
    a.max_ref = std::max(a.max_ref, std::fabs(static_cast<double>(ref[i])));
  }
  a.rel = a.nan ? INFINITY : a.max_diff / a.max_ref;
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    d2 += d * d;
    r2 += static_cast<double>(ref[i]) * ref[i];
  }
  a.rel_l2 = a.nan ? INFINITY : std::sqrt(d2 / r2);
  for (size_t r = 0; r * V < ref.size(); ++r) {
    const float* c = &ref[r * V];
    const float* g = &got[r * V];
    const int64_t ca = std::max_element(c, c + V) - c, ga = std::max_element(g, g + V) - g;
    float second = -INFINITY;
    for (int64_t i = 0; i < V; ++i)
      if (i != ca) second = std::max(second, c[i]);
    if (c[ca] - second > 0.05f * (c[ca] - *std::min_element(c, c + V))) {
      ++a.argmax_checked;
      a.argmax_mismatch += ca != ga;
    }
  }
  return a;
}

inline void print(const char* tag, const std::string& what, const Agreement& a) {
  std::printf("[%s] %-52s rel %.3e (max diff %.3e, max ref %.3e), rms rel %.3e, argmax differs on %lld of %lld "
              "decisive rows, %lld non-finite\n",
              tag, what.c_str(), a.rel, a.max_diff, a.max_ref, a.rel_l2, static_cast<long long>(a.argmax_mismatch),
              static_cast<long long>(a.argmax_checked), static_cast<long long>(a.nan));
}

}  // namespace glm5rt_test
