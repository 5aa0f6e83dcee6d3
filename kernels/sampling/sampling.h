// Token sampling on the device, one token per logits row, with the semantics of lib/engine/sampler.cpp
// (the CPU sampler every backend is checked against): repetition penalty over a window of past tokens,
// temperature, top-k, top-p, min-p, then one draw with a uniform the caller supplies (drawn on the host
// from the session's RNG, exactly as sample_token draws it). temperature <= 0 is greedy: argmax of the
// penalised logits, the lowest id winning ties (no uniform is read).
//
// Two implementations, the same tokens (docs/PERFORMANCE.md, "Device sampling"):
//   round 2 (default): top_k in [1, 2048] below the vocabulary runs kernels/indexer's exact radix top-k
//     and then sampler.cpp's own loops on the k sorted candidates (sampling_topk.cu); everything else
//     runs one block per row whose top-p / draw selects are one histogram pass over linear value bins
//     (sampling_v2.cu), falling back to round 1's radix select for heavily tied rows;
//   round 1: one block per row, radix selects over 8-bit digits of the key (sampling_v1.cu).
// SampleParams::kernel picks one (0: GLM5RT_SAMPLING_KERNEL=v1|v2 from the environment, read once,
// default v2), so that a device run can compare both against sample_token.
//
// Order: candidates rank by descending scaled logit, ties by ascending id (a total order). Instead of
// sorting the vocabulary, every cut is a radix select over the 64-bit key (order(value) << 32 | ~id),
// whose descending order is exactly that total order:
//   top-k: the k-th key by count (exact, integer);
//   top-p: the first key whose cumulative probability reaches top_p;
//   draw:  the first key whose cumulative probability exceeds u * (total kept probability).
// (Round 2's fast top-k path sorts its k candidates and then runs sampler.cpp's loops as written, sequential
// double sums included, so there only exp() ulps can differ.) Elsewhere probabilities are computed as
// sampler.cpp computes them (float c - max, exp in double, divided by the
// double sum over the top-k candidates); cumulative sums are taken in 62-bit fixed point (exact, order
// independent, so the result is deterministic). Where the token can differ from the CPU sampler's:
//   - the draw or the top-p / min-p threshold falls within ~1e-13 (relative) of a cumulative boundary:
//     the CPU sums doubles sequentially in sorted order, the device sums fixed-point values, and CUDA's
//     double exp() may differ from glibc's by an ulp (a probability ~1e-13 per draw);
//   - tokens whose probability is below 2^-62 are never drawn on the device (on the CPU they are drawn
//     with that probability);
//   - -inf logits are fine (probability 0, as on the CPU) unless the whole row is -inf; NaN / +inf logits
//     give an unspecified (but in-range) token.
//
// Launchers return cudaError_t (cudaErrorInvalidValue for bad arguments), never synchronise the host,
// never abort; all memory, including the workspace, belongs to the caller; capturable in a graph.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace glm5rt::kernels::sampling {

struct SampleParams {
  int num_rows = 0;
  int vocab = 0;                              // ids 0 .. vocab - 1, vocab < 2^31
  const float* const* logits = nullptr;       // device array [num_rows] of device rows of `vocab` floats
  // Repetition penalty: the tokens of row r's window are window[window_offsets[r] .. window_offsets[r+1])
  // (duplicates allowed, ids outside the vocabulary ignored). window_offsets may be null (no window).
  const int32_t* window = nullptr;
  const int32_t* window_offsets = nullptr;    // device [num_rows + 1]
  float repetition_penalty = 1.0f;            // 1: off
  float temperature = 0.0f;                   // <= 0: greedy
  int top_k = 0;                              // <= 0 or >= vocab: off
  float top_p = 1.0f;                         // >= 1: off
  float min_p = 0.0f;                         // <= 0: off
  const double* uniforms = nullptr;           // device [num_rows] in [0, 1); read when temperature > 0
  int32_t* out_tokens = nullptr;              // device [num_rows]
  void* workspace = nullptr;                  // sample_workspace_bytes(num_rows, vocab) bytes, 16-byte aligned
  size_t workspace_bytes = 0;
  int kernel = 0;                             // 0: default_sample_kernel(), 1: round 1, 2: round 2
};

// GLM5RT_SAMPLING_KERNEL=v1 (or 1): 1; otherwise 2. Read once per process.
int default_sample_kernel();

size_t sample_workspace_bytes(int num_rows, int vocab);

cudaError_t launch_sample_rows(const SampleParams& params, cudaStream_t stream);

}  // namespace glm5rt::kernels::sampling
