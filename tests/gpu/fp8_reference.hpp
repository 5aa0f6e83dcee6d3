// CPU references for the FP8 GEMM and MoE GPU tests: exact e4m3 decode, the round-to-nearest-even
// saturating e4m3 encoder (written from the OCP FP8 definition, independent of cuda_fp8.h), bf16
// rounding, per-token-group quantisation, the router (through router_math.h, so it is the same function
// the GPU evaluates), and multi-threaded float64 dot products.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "kernels/moe/router_math.h"

namespace fp8ref {

#define CUDA_OK(expr) REQUIRE_EQ(cudaSuccess, (expr))

// e4m3 (OCP "fn"): bias 7, no infinities, 0x7f/0xff are NaN, max finite 448.
inline float e4m3_decode(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
  if (exp == 15 && man == 7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                             : std::ldexp(1.0f + man / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

inline const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> a{};
    for (int i = 0; i < 256; ++i) a[i] = e4m3_decode(static_cast<uint8_t>(i));
    return a;
  }();
  return t;
}

// Round to nearest, ties to even code, saturate to +-448, NaN -> 0x7f.
inline uint8_t e4m3_encode(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 448.0) return sign | 0x7e;
  const auto& t = e4m3_table();  // codes 0..0x7e ascending for positive values
  int lo = 0, hi = 0x7e;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (t[mid] <= a) lo = mid; else hi = mid;
  }
  if (t[hi] <= a) lo = hi;
  if (t[lo] == a) return sign | lo;
  const int up = lo + 1;
  const double dl = a - t[lo], du = t[up] - a;
  const int code = dl < du ? lo : du < dl ? up : ((lo & 1) == 0 ? lo : up);
  return sign | static_cast<uint8_t>(code);
}

inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

// The GPU rule: scale = max(amax, 1e-10) / 448, q = rn_satfinite(x / scale), per row and 128-group.
inline void quantize_rows(const std::vector<float>& x, int rows, int k, std::vector<uint8_t>& q,
                          std::vector<float>& scale) {
  q.assign(static_cast<size_t>(rows) * k, 0);
  scale.assign(static_cast<size_t>(rows) * (k / 128), 0.f);
  for (int r = 0; r < rows; ++r)
    for (int g = 0; g < k / 128; ++g) {
      float amax = 0.f;
      for (int i = 0; i < 128; ++i) amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(r) * k + g * 128 + i]));
      const float s = std::fmax(amax, 1e-10f) / 448.0f;
      scale[static_cast<size_t>(r) * (k / 128) + g] = s;
      for (int i = 0; i < 128; ++i) {
        const size_t at = static_cast<size_t>(r) * k + g * 128 + i;
        q[at] = e4m3_encode(x[at] / s);
      }
    }
}

inline void parallel_for(int n, const std::function<void(int)>& f) {
  const int threads = std::max(1, std::min<int>(n, static_cast<int>(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = t; i < n; i += threads) f(i);
    });
  for (auto& th : pool) th.join();
}

// A block-scaled FP8 weight on the host: q [n, k], scale [ceil(n/128), k/128].
struct HostFp8Weight {
  int n = 0, k = 0;
  std::vector<uint8_t> q;
  std::vector<float> scale;
  float at(int r, int c) const {
    return e4m3_table()[q[static_cast<size_t>(r) * k + c]] * scale[static_cast<size_t>(r / 128) * (k / 128) + c / 128];
  }
};

// Random codes over the whole finite e4m3 range (NaN codes avoided) and scales around 2^-8.
inline HostFp8Weight random_weight(int n, int k, std::mt19937& rng) {
  HostFp8Weight w;
  w.n = n;
  w.k = k;
  w.q.resize(static_cast<size_t>(n) * k);
  std::mt19937_64 bits(rng());  // 8 random bytes per draw: GLM-5-sized weights are hundreds of MB
  for (size_t i = 0; i < w.q.size(); i += 8) {
    uint64_t r = bits();
    for (size_t j = i; j < i + 8 && j < w.q.size(); ++j, r >>= 8) {
      uint8_t v = static_cast<uint8_t>(r);
      if ((v & 0x7f) == 0x7f) v ^= 1;  // never a NaN code
      w.q[j] = v;
    }
  }
  std::uniform_real_distribution<float> sd(0.5f, 2.0f);
  w.scale.resize(static_cast<size_t>((n + 127) / 128) * (k / 128));
  for (auto& s : w.scale) s = sd(rng) / 256.0f;
  return w;
}

// Dequantised weight as floats [n, k] (for the references).
inline std::vector<float> dequant(const HostFp8Weight& w) {
  std::vector<float> d(static_cast<size_t>(w.n) * w.k);
  for (int r = 0; r < w.n; ++r)
    for (int c = 0; c < w.k; ++c) d[static_cast<size_t>(r) * w.k + c] = w.at(r, c);
  return d;
}
inline std::vector<float> dequant_act(const std::vector<uint8_t>& q, const std::vector<float>& s, int rows, int k) {
  std::vector<float> d(static_cast<size_t>(rows) * k);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < k; ++c)
      d[static_cast<size_t>(r) * k + c] = e4m3_table()[q[static_cast<size_t>(r) * k + c]] * s[static_cast<size_t>(r) * (k / 128) + c / 128];
  return d;
}

inline double dot(const float* a, const float* b, int k) {
  double s = 0;
  for (int i = 0; i < k; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Relative L2 error, max element error scaled by rms(ref); any non-finite output counts as failure.
struct Compare {
  double rel_l2 = 0, max_abs_over_rms = 0;
  long long non_finite = 0, bad = 0;
};
inline Compare compare(const std::vector<float>& out, const std::vector<double>& ref, double elem_rel,
                       double elem_abs_rms) {
  Compare c;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) den += ref[i] * ref[i];
  const double rms = std::sqrt(den / std::max<size_t>(1, ref.size()));
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++c.non_finite;
      continue;
    }
    const double d = out[i] - ref[i];
    num += d * d;
    c.max_abs_over_rms = std::max(c.max_abs_over_rms, std::fabs(d) / rms);
    if (std::fabs(d) > elem_rel * std::fabs(ref[i]) + elem_abs_rms * rms) ++c.bad;
  }
  c.rel_l2 = den > 0 ? std::sqrt(num / den) : (num > 0 ? 1.0 : 0.0);
  if (c.non_finite) c.rel_l2 = std::numeric_limits<double>::infinity();
  return c;
}

// ---- router reference (GLM5.md step 9), in router_math's order ----
struct RouterConfig {
  int num_experts = 256, top_k = 8, n_group = 1, topk_group = 1;
  bool norm = true;
  float scale = 2.5f;
};

inline float router_logit(const uint16_t* x, const uint16_t* w, int hidden) {
  using glm5rt::kernels::router_math::fma_f;
  float lanes[32];
  for (int l = 0; l < 32; ++l) {
    float acc = 0.f;
    for (int ch = l; ch < hidden / 8; ch += 32)
      for (int j = 0; j < 8; ++j) acc = fma_f(bf16_to_float(x[ch * 8 + j]), bf16_to_float(w[ch * 8 + j]), acc);
    lanes[l] = acc;
  }
  for (int m = 16; m > 0; m >>= 1) {
    float next[32];
    for (int l = 0; l < 32; ++l) next[l] = lanes[l] + lanes[l ^ m];
    std::memcpy(lanes, next, sizeof(lanes));
  }
  return lanes[0];
}

inline void router_select(const float* logits, const float* bias, const RouterConfig& cfg, int* ids, float* wts) {
  const int E = cfg.num_experts, gs = E / cfg.n_group;
  std::vector<float> s(E), c(E);
  for (int e = 0; e < E; ++e) {
    s[e] = glm5rt::kernels::router_math::sigmoid(logits[e]);
    c[e] = s[e] + bias[e];
  }
  std::vector<bool> keep(cfg.n_group, true);
  if (cfg.n_group > 1) {
    std::vector<float> gscore(cfg.n_group);
    for (int g = 0; g < cfg.n_group; ++g) {
      std::vector<float> v(c.begin() + g * gs, c.begin() + (g + 1) * gs);
      std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
      gscore[g] = v[0] + v[1];
    }
    std::fill(keep.begin(), keep.end(), false);
    for (int r = 0; r < cfg.topk_group; ++r) {
      int best = -1;
      for (int g = 0; g < cfg.n_group; ++g)
        if (!keep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
      keep[best] = true;
    }
  }
  std::vector<float> cand(E);
  for (int e = 0; e < E; ++e) cand[e] = keep[e / gs] ? c[e] : 0.0f;
  std::vector<bool> taken(E, false);
  for (int r = 0; r < cfg.top_k; ++r) {
    int best = -1;
    for (int e = 0; e < E; ++e)
      if (!taken[e] && (best < 0 || cand[e] > cand[best])) best = e;  // strict '>': lower id wins ties
    taken[best] = true;
    ids[r] = best;
    wts[r] = s[best];
  }
  float denom = 1.f;
  if (cfg.norm) {
    float sum = 0.f;
    for (int r = 0; r < cfg.top_k; ++r) sum += wts[r];
    denom = sum + 1e-20f;
  }
  for (int r = 0; r < cfg.top_k; ++r) {
    float w = wts[r];
    if (cfg.norm) w = w / denom;
    wts[r] = w * cfg.scale;
  }
}

// Device buffer RAII for tests.
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    if (cudaMalloc(&ptr, std::max<size_t>(1, n) * sizeof(T)) != cudaSuccess) ptr = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr); }
  void upload(const std::vector<T>& v) { cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> download() const {
    std::vector<T> v(count);
    cudaMemcpy(v.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  void poison() { cudaMemset(ptr, 0xff, count * sizeof(T)); }  // bf16 0xffff and f32 0xffffffff are NaN
};

// FP8 weights on the device for a grouped GEMM: each added weight's e4m3 bytes and block scales in buffers
// owned here, and, after upload_pointers(), the device arrays of their pointers that Fp8GemmParams::w /
// w_scale take (weight i at index i).
struct DeviceWeights {
  std::vector<std::unique_ptr<DeviceBuffer<uint8_t>>> q;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> scale;
  std::vector<const uint8_t*> q_ptrs;
  std::vector<const float*> scale_ptrs;
  std::unique_ptr<DeviceBuffer<const uint8_t*>> d_q_ptrs;
  std::unique_ptr<DeviceBuffer<const float*>> d_scale_ptrs;
  void add(const HostFp8Weight& w) {
    q.push_back(std::make_unique<DeviceBuffer<uint8_t>>(w.q.size()));
    scale.push_back(std::make_unique<DeviceBuffer<float>>(w.scale.size()));
    q.back()->upload(w.q);
    scale.back()->upload(w.scale);
    q_ptrs.push_back(q.back()->ptr);
    scale_ptrs.push_back(scale.back()->ptr);
  }
  void upload_pointers() {
    d_q_ptrs = std::make_unique<DeviceBuffer<const uint8_t*>>(q_ptrs.size());
    d_scale_ptrs = std::make_unique<DeviceBuffer<const float*>>(scale_ptrs.size());
    d_q_ptrs->upload(q_ptrs);
    d_scale_ptrs->upload(scale_ptrs);
  }
};

inline std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> nd(0.f, sigma);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16(nd(rng));
  return v;
}

}  // namespace fp8ref
