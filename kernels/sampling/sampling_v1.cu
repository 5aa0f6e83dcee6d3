// Round 1's device sampler, kept selectable (SampleParams::kernel = 1, or GLM5RT_SAMPLING_KERNEL=v1) as the
// reference the round-2 kernels are compared against on the device. Measured on the H200 (docs/
// PERFORMANCE.md, "Device sampling"): exact in every test, but slow (1.9 ms for the whole vocabulary at
// temperature 1) because of 64-bit shared-memory atomics under contention.
//
// One block of 1024 threads per row:
//  1. the penalised, temperature-scaled row c (sampler.cpp's cand values, same float operations) is
//     written to the workspace (skipped for greedy rows without a penalty: c is the logits row);
//  2. the top key (max over key = order(c) << 32 | ~id) is the greedy token and gives max c;
//  3. top-k: radix select of the k-th key by count;
//  4. e[i] = exp(double(c[i] - max)) of the top-k candidates into the workspace, their double sum;
//  5. top-p: radix select of the first key whose cumulative probability (e / sum, 62-bit fixed point)
//     reaches top_p; min-p is a filter on the same probabilities (probabilities fall along the order, so
//     sampler.cpp's prefix is a filter);
//  6. the draw: radix select of the first key whose cumulative probability exceeds u * total.
#include "kernels/sampling/sampling_common.cuh"

namespace glm5rt::kernels::sampling::detail {
namespace {

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(const SampleParams p) {
  __shared__ Shared s;
  const int row = blockIdx.x, tid = threadIdx.x, V = p.vocab;
  const RowSetup setup = row_setup(p, row);
  const float* l = setup.logits;
  const bool greedy = setup.greedy, penalise = setup.penalise;
  const RowWork work = setup.work;

  // 1. c = penalised logits (greedy) or penalised logits / temperature, with sampler.cpp's float ops.
  const float* c = l;
  if (!greedy || penalise) {
    write_scaled_row(p, row, l, work.c);
    c = work.c;
  }

  // 2. The top key: the greedy token, and max c.
  u64 best = 0;
  for (int i = tid; i < V; i += kThreads) {
    const u64 k = full_key(c[i], i);
    best = k > best ? k : best;
  }
  const u64 top = block_max(best, s);
  const int32_t top_id = key_id(top);
  if (greedy) {
    if (tid == 0) p.out_tokens[row] = top_id;
    return;
  }
  const float mx = c[top_id];

  // 3. top-k cut.
  Filter f;
  f.top = top;
  if (p.top_k > 0 && p.top_k < V)
    f.lo = select_key<AddRound1>(c, V, f, Target::kCount, static_cast<double>(p.top_k), s);

  // 4. exp of the candidates and their sum.
  double local = 0.0;
  for (int i = tid; i < V; i += kThreads) {
    const float v = c[i];
    const double e = full_key(v, i) >= f.lo ? exp(static_cast<double>(__fsub_rn(v, mx))) : 0.0;
    work.e[i] = e;
    local += e;
  }
  const double sum = block_sum(local, s);  // its barriers also publish work.e
  f.by_count = false;
  f.e = work.e;
  f.sum = sum;

  // 5. top-p cut, then the min-p filter.
  if (p.top_p < 1.0f) f.lo = select_key<AddRound1>(c, V, f, Target::kAtLeast, static_cast<double>(p.top_p), s);
  if (p.min_p > 0.0f) f.floor = __dmul_rn(static_cast<double>(p.min_p), 1.0 / sum);  // min_p * prob[0]

  // 6. The draw.
  const u64 chosen = select_key<AddRound1>(c, V, f, Target::kDraw, p.uniforms[row], s);
  if (tid == 0) p.out_tokens[row] = key_id(chosen);
}

}  // namespace

cudaError_t launch_round1(const SampleParams& p, cudaStream_t stream) {
  sample_rows_kernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace glm5rt::kernels::sampling::detail
