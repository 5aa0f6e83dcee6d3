// Float32 building blocks of the CPU reference backend. Every output element is computed by a fixed
// sequence of operations that depends only on its own inputs, never on the batch or the thread count:
// that is what makes batched, chunked and single-token runs bit-identical.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace glm5rt {
class ThreadPool;
}

namespace glm5rt::cpu {

// sum_i a[i] * b[i], in 8 fixed lanes then a fixed reduction (vectorisable, deterministic).
float dot(const float* a, const float* b, int64_t n);

// Y[t][o] = dot(X[t], W[o]) for t < rows, o < out; X is rows x in, W is out x in (nn.Linear layout).
// Threads split the output features.
void matmul(ThreadPool& pool, const float* X, int64_t rows, const float* W, int64_t out, int64_t in, float* Y);

// out = w * (x / sqrt(mean(x^2) + eps)), one row of n (transformers' RMSNorm in float32).
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);
// out = (x - mean) / sqrt(var + eps) * w + b (biased variance), one row of n (torch LayerNorm).
void layer_norm(const float* x, const float* w, const float* b, int64_t n, float eps, float* out);

// The lightning indexer's selection rule (GLM5.md step 5): the positions of the min(k, n) largest of
// scores[0..n), equal scores ranked by the lower position, written to out in ascending order (out is
// resized). scratch is storage the caller may reuse between calls. Shared by the CPU backend and the
// tests that recompute its selection from the indexer's inputs (ForwardProbe::indexer_q / _k / _w).
void indexer_select(const float* scores, int64_t n, int64_t k, std::vector<std::pair<float, int32_t>>& scratch,
                    std::vector<int32_t>& out);

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x);

}  // namespace glm5rt::cpu
