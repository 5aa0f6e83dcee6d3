// The device sampler (kernels/sampling) against engine/sampler.cpp's sample_token on the same logits:
// for many parameter sets (greedy, temperature, top-k on both sides of the fast path's 2048, top-p, min-p,
// repetition penalty, their mix), logit shapes (normal rows of several widths, heavy ties with +-0.0, one
// flat row, peaked rows, rows with -inf entries) and vocabulary sizes (GLM-5's 154880, the fixtures' 320,
// tiny ones), every draw must give the token the CPU sampler gives with the same RNG state (the device
// takes the uniform sample_token would draw). BOTH kernels run on every draw (SampleParams::kernel = 1:
// round 1, 2: round 2) and are counted separately, so one run shows which of them passes. Fresh random
// logits per run; the output is poisoned before every launch and the workspace once (0xff: the fast
// top-k path must not rely on a zeroed workspace); every first repetition also samples a 3-row prefix of
// the batch through the same dirty workspace (another row count moves the workspace's per-row parts).
#ifdef GLM5RT_GPU_TESTS_WITH_CORE
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/sampler.hpp"
#include "kernels/sampling/sampling.h"

using namespace glm5rt;

namespace {

#define SAMPLER_CUDA(x) REQUIRE((x) == cudaSuccess)

struct Case {
  std::string name;
  SamplerParams p;
};

std::vector<Case> cases(int V) {
  std::vector<Case> c;
  auto add = [&](std::string n, float t, int k, float tp, float mp, float pen, int last) {
    SamplerParams p;
    p.temperature = t;
    p.top_k = k;
    p.top_p = tp;
    p.min_p = mp;
    p.repetition_penalty = pen;
    p.penalty_last_n = last;
    c.push_back({std::move(n), p});
  };
  add("greedy", 0.f, 0, 1.f, 0.f, 1.f, 64);
  add("greedy+penalty", 0.f, 0, 1.f, 0.f, 1.5f, 32);
  add("T=1", 1.f, 0, 1.f, 0.f, 1.f, 64);
  add("T=0.7 k=40", 0.7f, 40, 1.f, 0.f, 1.f, 64);
  add("T=1.2 p=0.9", 1.2f, 0, 0.9f, 0.f, 1.f, 64);
  add("T=0.9 min_p=0.05", 0.9f, 0, 1.f, 0.05f, 1.f, 64);
  add("mix k=50 p=0.95 min_p=0.02 pen=1.3", 1.f, 50, 0.95f, 0.02f, 1.3f, 64);
  add("k=1", 1.f, 1, 1.f, 0.f, 1.f, 64);
  add("k=V-1", 1.f, V - 1, 1.f, 0.f, 1.f, 64);
  add("k=V+5", 1.f, V + 5, 1.f, 0.f, 1.f, 64);
  add("p=0.01", 1.f, 0, 0.01f, 0.f, 1.f, 64);
  add("T=0.8 penalty whole history", 0.8f, 0, 1.f, 0.f, 1.2f, -1);
  add("penalty < 1", 1.f, 0, 1.f, 0.f, 0.7f, 64);
  add("T=0.05", 0.05f, 0, 1.f, 0.f, 1.f, 64);
  add("T=2 k=3000 p=0.99", 2.f, 3000, 0.99f, 0.f, 1.f, 64);
  add("min_p=1", 1.f, 0, 1.f, 1.f, 1.f, 64);
  add("k=2048 (fast path's largest)", 1.f, 2048, 1.f, 0.f, 1.f, 64);
  add("k=2049 (general path)", 1.f, 2049, 1.f, 0.f, 1.f, 64);
  add("T=0.6 k=2000 p=0.8 min_p=0.1 pen=1.4", 0.6f, 2000, 0.8f, 0.1f, 1.4f, 48);
  add("T=1.5 k=7 p=0.5", 1.5f, 7, 0.5f, 0.f, 1.f, 64);
  add("T=1 p=0.999 min_p=0.001", 1.f, 0, 0.999f, 0.001f, 1.f, 64);
  return c;
}

// Logit shapes; every row of a launch gets a different one.
std::vector<float> make_row(int shape, int V, std::mt19937_64& g) {
  std::normal_distribution<float> n01(0.f, 1.f);
  std::vector<float> l(V);
  switch (shape % 7) {
    case 0:
      for (auto& x : l) x = n01(g);
      break;
    case 1:
      for (auto& x : l) x = 4.f * n01(g);
      break;
    case 2:  // heavy ties, +0.0 and -0.0 among them
      for (auto& x : l) {
        x = std::round(2.f * n01(g)) / 2.f;
        if (x == 0.f && (g() & 1)) x = -0.f;
      }
      break;
    case 3:  // flat: every value equal (only ids order the candidates)
      for (auto& x : l) x = 0.5f;
      break;
    case 4:  // peaked: a few far above the rest
      for (auto& x : l) x = n01(g);
      for (int i = 0; i < 4 && i < V; ++i) l[g() % V] = 30.f + static_cast<float>(i);
      break;
    case 5:
      for (auto& x : l) x = 25.f * n01(g);
      break;
    default:  // masked: about 10% -inf (never the whole row)
      for (auto& x : l) x = (g() % 10 == 0) ? -std::numeric_limits<float>::infinity() : 2.f * n01(g);
      l[g() % V] = 1.f;
      break;
  }
  return l;
}

// One launch of `kernel` over the first `rows` rows; returns the tokens (poisoned output first).
std::vector<int32_t> launch(int kernel, int rows, int V, const SamplerParams& sp, const float** d_ptrs, double* d_u,
                            int32_t* d_off, int32_t* d_win, bool windowed, int32_t* d_out, void* d_ws, size_t ws) {
  CAPTURE(kernel);  // a launch error or a device fault names the kernel
  CAPTURE(rows);
  SAMPLER_CUDA(cudaMemset(d_out, 0xff, size_t(rows) * 4));  // poison: -1
  kernels::sampling::SampleParams k;
  k.num_rows = rows;
  k.vocab = V;
  k.logits = d_ptrs;
  k.window = windowed ? d_win : nullptr;
  k.window_offsets = windowed ? d_off : nullptr;
  k.repetition_penalty = sp.repetition_penalty;
  k.temperature = sp.temperature;
  k.top_k = sp.top_k;
  k.top_p = sp.top_p;
  k.min_p = sp.min_p;
  k.uniforms = d_u;
  k.out_tokens = d_out;
  k.workspace = d_ws;
  k.workspace_bytes = ws;
  k.kernel = kernel;
  SAMPLER_CUDA(kernels::sampling::launch_sample_rows(k, nullptr));
  SAMPLER_CUDA(cudaDeviceSynchronize());
  std::vector<int32_t> got(rows);
  SAMPLER_CUDA(cudaMemcpy(got.data(), d_out, size_t(rows) * 4, cudaMemcpyDeviceToHost));
  return got;
}

void run_vocab(int V, int reps, uint64_t seed) {
  INFO("V ", V, ", seed ", seed);
  const int R = 7;
  std::mt19937_64 g(seed);
  std::vector<std::vector<float>> rows(R);
  for (int r = 0; r < R; ++r) rows[r] = make_row(r, V, g);
  std::vector<std::vector<int32_t>> history(R);
  for (int r = 0; r < R; ++r) {
    history[r].resize(40 + g() % 200);
    for (auto& t : history[r]) t = static_cast<int32_t>(g() % std::min<uint64_t>(V, 64 + r * 1000));
  }

  float* d_logits = nullptr;
  const float** d_ptrs = nullptr;
  double* d_u = nullptr;
  int32_t *d_off = nullptr, *d_win = nullptr, *d_out = nullptr;
  void* d_ws = nullptr;
  const size_t ws = kernels::sampling::sample_workspace_bytes(R, V);
  REQUIRE(ws >= kernels::sampling::sample_workspace_bytes(3, V));
  SAMPLER_CUDA(cudaMalloc(&d_logits, size_t(R) * V * 4));
  SAMPLER_CUDA(cudaMalloc(&d_ptrs, R * sizeof(float*)));
  SAMPLER_CUDA(cudaMalloc(&d_u, R * 8));
  SAMPLER_CUDA(cudaMalloc(&d_off, (R + 1) * 4));
  SAMPLER_CUDA(cudaMalloc(&d_win, 4096 * 4));
  SAMPLER_CUDA(cudaMalloc(&d_out, R * 4));
  SAMPLER_CUDA(cudaMalloc(&d_ws, ws));
  SAMPLER_CUDA(cudaMemset(d_ws, 0xff, ws));
  std::vector<const float*> ptrs(R);
  for (int r = 0; r < R; ++r) {
    SAMPLER_CUDA(cudaMemcpy(d_logits + size_t(r) * V, rows[r].data(), size_t(V) * 4, cudaMemcpyHostToDevice));
    ptrs[r] = d_logits + size_t(r) * V;
  }
  SAMPLER_CUDA(cudaMemcpy(d_ptrs, ptrs.data(), R * sizeof(float*), cudaMemcpyHostToDevice));

  int sets_ok[3] = {0, 0, 0}, draws_ok[3] = {0, 0, 0}, draws = 0, sets = 0;
  for (const Case& c : cases(V)) {
    int equal[3] = {0, 0, 0}, total = 0;
    std::set<int32_t> distinct;
    for (int rep = 0; rep < reps; ++rep) {
      std::vector<Rng> cpu_rng, dev_rng;
      for (int r = 0; r < R; ++r) {
        cpu_rng.emplace_back(seed * 1000003u + rep * 101u + r);
        dev_rng.emplace_back(seed * 1000003u + rep * 101u + r);
      }
      std::vector<int32_t> expect(R);
      for (int r = 0; r < R; ++r) expect[r] = sample_token(rows[r].data(), V, c.p, history[r], cpu_rng[r]);
      // The device: the penalty window and the uniform sample_token draws.
      std::vector<double> u(R, 0.0);
      std::vector<int32_t> off(R + 1, 0), win;
      for (int r = 0; r < R; ++r) {
        const auto w = penalty_window(c.p, history[r]);
        off[r] = static_cast<int32_t>(win.size());
        win.insert(win.end(), w.begin(), w.end());
        if (c.p.temperature > 0.f) u[r] = dev_rng[r].uniform();
        CHECK(dev_rng[r].state() == cpu_rng[r].state());  // one uniform exactly when sample_token draws one
      }
      off[R] = static_cast<int32_t>(win.size());
      REQUIRE(win.size() <= 4096);
      SAMPLER_CUDA(cudaMemcpy(d_u, u.data(), R * 8, cudaMemcpyHostToDevice));
      SAMPLER_CUDA(cudaMemcpy(d_off, off.data(), (R + 1) * 4, cudaMemcpyHostToDevice));
      if (!win.empty()) SAMPLER_CUDA(cudaMemcpy(d_win, win.data(), win.size() * 4, cudaMemcpyHostToDevice));
      const int sizes[2] = {R, 3};
      for (int pass = 0; pass < (rep == 0 ? 2 : 1); ++pass) {
        const int n = sizes[pass];
        total += n;
        for (int kernel = 1; kernel <= 2; ++kernel) {
          const auto got = launch(kernel, n, V, c.p, d_ptrs, d_u, d_off, d_win, !win.empty(), d_out, d_ws, ws);
          for (int r = 0; r < n; ++r) {
            distinct.insert(got[r]);
            if (got[r] == expect[r]) {
              ++equal[kernel];
            } else {
              MESSAGE("kernel v", kernel, " V ", V, " case '", c.name, "' rep ", rep, " rows ", n, " row ", r,
                      ": device ", got[r], ", cpu ", expect[r]);
            }
          }
        }
      }
    }
    ++sets;
    draws += total;
    for (int kernel = 1; kernel <= 2; ++kernel) {
      sets_ok[kernel] += equal[kernel] == total;
      draws_ok[kernel] += equal[kernel];
      std::printf("[sampler v%d] V %6d %-40s %d/%d draws equal, %zu distinct tokens\n", kernel, V, c.name.c_str(),
                  equal[kernel], total, distinct.size());
      CAPTURE(kernel);
      CHECK(equal[kernel] == total);
    }
  }
  // One line per kernel and vocabulary (the tag matches scripts/gpu_check.sh's summary filter).
  for (int kernel = 1; kernel <= 2; ++kernel)
    std::printf("[sampler-v%d] V %6d: %d/%d parameter sets and %d/%d draws equal sample_token\n", kernel, V,
                sets_ok[kernel], sets, draws_ok[kernel], draws);
  cudaFree(d_logits);
  cudaFree(d_ptrs);
  cudaFree(d_u);
  cudaFree(d_off);
  cudaFree(d_win);
  cudaFree(d_out);
  cudaFree(d_ws);
}

}  // namespace

TEST_CASE("device sampler equals sample_token: GLM-5 vocabulary (154880)") {
  run_vocab(154880, 6, std::random_device{}());
}

TEST_CASE("device sampler equals sample_token: small vocabularies") {
  const uint64_t seed = std::random_device{}();
  for (int V : {320, 8256, 33, 7, 1}) run_vocab(V, V > 100 ? 20 : 8, seed + static_cast<uint64_t>(V));
}

TEST_CASE("device sampler: bad arguments are cudaErrorInvalidValue, not a crash") {
  kernels::sampling::SampleParams k;
  k.num_rows = 1;
  k.vocab = 10;
  CHECK(kernels::sampling::launch_sample_rows(k, nullptr) == cudaErrorInvalidValue);  // no rows, no output
  k.vocab = 0;
  CHECK(kernels::sampling::launch_sample_rows(k, nullptr) == cudaErrorInvalidValue);
  k.num_rows = 0;  // nothing to do is a success, but not with a kernel that does not exist
  k.vocab = 10;
  CHECK(kernels::sampling::launch_sample_rows(k, nullptr) == cudaSuccess);
  k.kernel = 3;
  CHECK(kernels::sampling::launch_sample_rows(k, nullptr) == cudaErrorInvalidValue);
  k.kernel = -1;
  CHECK(kernels::sampling::launch_sample_rows(k, nullptr) == cudaErrorInvalidValue);
}
#endif
