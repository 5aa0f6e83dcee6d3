// Float32 building blocks of the CPU reference backend. Every output element is computed by a fixed
// sequence of operations that depends only on its own inputs, never on the batch or the thread count:
// that is what makes batched, chunked and single-token runs bit-identical.
#pragma once

#include <cmath>
#include <cstdint>

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

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x);

}  // namespace glm5rt::cpu
