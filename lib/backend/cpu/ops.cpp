#include "backend/cpu/ops.hpp"

#include <algorithm>
#include <cmath>

#include "runtime/thread_pool.hpp"

namespace glm5rt::cpu {

float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; l < 8 && i < n; ++i, ++l) acc[l] += a[i] * b[i];  // the tail: fewer than 8 left
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void matmul(ThreadPool& pool, const float* X, int64_t rows, const float* W, int64_t out, int64_t in, float* Y) {
  if (rows <= 0 || out <= 0) return;
  // Small problems run inline: waking the pool costs more than the work.
  const int64_t min_chunk = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, in * rows));
  pool.parallel_for(out, [&](int64_t o0, int64_t o1) {
    for (int64_t t = 0; t < rows; ++t) {
      const float* x = X + t * in;
      float* y = Y + t * out;
      for (int64_t o = o0; o < o1; ++o) y[o] = dot(x, W + o * in, in);
    }
  }, min_chunk);
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  float ss = 0.f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * r);
}

void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  float var = 0.f;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<float>(n);
  const float r = 1.0f / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - mean) * r * w[i] + b[i];
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

void indexer_select(const float* scores, int64_t n, int64_t k, std::vector<std::pair<float, int32_t>>& scratch,
                    std::vector<int32_t>& out) {
  scratch.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) scratch[t] = {scores[t], static_cast<int32_t>(t)};
  const int64_t m = std::min(k, n);
  // largest scores first; equal scores: the lower position wins
  std::partial_sort(scratch.begin(), scratch.begin() + m, scratch.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  out.resize(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) out[i] = scratch[i].second;
  std::sort(out.begin(), out.end());
}

}  // namespace glm5rt::cpu
