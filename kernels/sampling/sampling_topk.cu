// Round 2's fast path for top_k in [1, 2048] below the vocabulary (branch sampling-topk of round 1,
// reviewed and fixed in round 2):
//  1. prep_rows_kernel (many blocks per row): the scaled, penalised rows c (the same float operations as
//     sampler.cpp), the one-page row layout the indexer's top-k reads (every row is "sequence" 0 with one
//     page of `vocab` slots, so a slot is the token id), and the row's header of the indexer's split
//     workspace zeroed (that workspace must be zero before a call; its per-row placement depends on
//     num_rows, so a previous call with another row count does not leave it zero where this one looks);
//  2. kernels/indexer's exact top-k (launch_indexer_topk: split over many blocks for <= 64 rows of more
//     than 16384 keys, else one block per row). Its order is ours: value descending (-0.0 == +0.0), ties
//     by the lower position, i.e. the lower token id; so its k-set is exactly sampler.cpp's first k;
//  3. finish_topk_kernel: one block per row loads the k keys, sorts them (bitonic, descending) and runs
//     sampler.cpp's own loops in its order by one thread (sequential double sums, the same comparisons),
//     so only CUDA's exp() against glibc's (an ulp) can make a token differ. -inf logits give exp() = 0 as
//     on the CPU; an all -inf or NaN row goes through the same arithmetic as on the CPU.
#include "kernels/indexer/indexer_params.hpp"
#include "kernels/indexer/indexer_select.cuh"
#include "kernels/sampling/sampling_common.cuh"

namespace glm5rt::kernels::sampling::detail {
namespace {

// Grid (chunks, rows): each block scales its chunk of the row, then applies the penalty to the window's
// tokens that fall inside its chunk (so the overwrite is ordered after the scaling by the block's own
// barrier; a token repeated in the window writes the same value). The same float operations as
// write_scaled_row / sampler.cpp; many blocks per row, so a batch of one row is not left to one SM.
constexpr int kPrepThreads = 256;
constexpr int kPrepChunk = 4096;
__global__ void __launch_bounds__(kPrepThreads) prep_rows_kernel(const SampleParams p) {
  const int row = blockIdx.y, V = p.vocab;
  const int lo = blockIdx.x * kPrepChunk, hi = min(V, lo + kPrepChunk);
  char* base = static_cast<char*>(p.workspace);
  const Layout L = layout(p.num_rows, p.vocab);
  const float* l = p.logits[row];
  float* c = row_work(p, row).c;
  if (blockIdx.x == 0) {
    // Zero this row's split-workspace header before the indexer's kernels (same stream, later) read it.
    uint32_t* header = indexer::detail::row_workspace(base + L.topk_ws, p.num_rows, row).hist;
    for (int i = threadIdx.x; i < indexer::detail::kHeaderWords; i += blockDim.x) header[i] = 0;
    if (threadIdx.x == 0) {
      reinterpret_cast<int32_t*>(base + L.row_seq)[row] = 0;
      reinterpret_cast<int32_t*>(base + L.row_len)[row] = p.vocab;
      if (row == 0) reinterpret_cast<int32_t*>(base + L.block_table)[0] = 0;
    }
  }
  const bool greedy = !(p.temperature > 0.0f);
  constexpr int kU = kPrepChunk / kPrepThreads;  // 16 loads in flight per thread
  float x[kU];
#pragma unroll
  for (int q = 0; q < kU; ++q) {
    const int i = lo + q * kPrepThreads + static_cast<int>(threadIdx.x);
    x[q] = i < hi ? l[i] : 0.0f;
  }
#pragma unroll
  for (int q = 0; q < kU; ++q) {
    const int i = lo + q * kPrepThreads + static_cast<int>(threadIdx.x);
    if (i < hi) c[i] = greedy ? x[q] : __fdiv_rn(x[q], p.temperature);
  }
  if (p.repetition_penalty == 1.0f || !p.window_offsets) return;
  __syncthreads();
  const int w0 = p.window_offsets[row], w1 = p.window_offsets[row + 1];
  for (int j = w0 + static_cast<int>(threadIdx.x); j < w1; j += blockDim.x) {
    const int32_t t = p.window[j];
    if (t < lo || t >= hi) continue;  // another block's chunk (or outside the vocabulary)
    const float v = l[t];
    const float y = v > 0 ? __fdiv_rn(v, p.repetition_penalty) : __fmul_rn(v, p.repetition_penalty);
    c[t] = greedy ? y : __fdiv_rn(y, p.temperature);
  }
}

__global__ void __launch_bounds__(kThreads) finish_topk_kernel(const SampleParams p) {
  __shared__ u64 keys[kFastTopK];
  __shared__ double prob[kFastTopK];
  __shared__ double sum_s;
  const int row = blockIdx.x, tid = threadIdx.x, k = p.top_k;
  const char* base = static_cast<const char*>(p.workspace);
  const Layout L = layout(p.num_rows, p.vocab);
  const int32_t* ids = reinterpret_cast<const int32_t*>(base + L.ids) + static_cast<size_t>(row) * k;  // [rows][k]
  const float* c = row_work(p, row).c;
  int n2 = 1;
  while (n2 < k) n2 <<= 1;
  for (int j = tid; j < n2; j += kThreads) {
    const int32_t id = j < k ? ids[j] : -1;
    // Real keys are > 0 (~id has its top bit set for id < 2^31): padding sorts last.
    keys[j] = (id >= 0 && id < p.vocab) ? full_key(c[id], id) : 0ull;
  }
  __syncthreads();
  bitonic_sort_desc<double>(keys, nullptr, n2);
  // sampler.cpp: prob[i] = exp(double(cand[i].first - mx)), sum in order, prob /= sum.
  const float mx = key_value(keys[0]);
  for (int j = tid; j < k; j += kThreads) prob[j] = exp(static_cast<double>(__fsub_rn(key_value(keys[j]), mx)));
  __syncthreads();
  if (tid == 0) {
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += prob[j];
    sum_s = sum;
  }
  __syncthreads();
  for (int j = tid; j < k; j += kThreads) prob[j] = __ddiv_rn(prob[j], sum_s);
  __syncthreads();
  if (tid == 0) {
    int keep = k;
    if (p.top_p < 1.0f) {
      double cum = 0;
      int n = 0;
      while (n < keep) {
        cum += prob[n++];
        if (cum >= static_cast<double>(p.top_p)) break;
      }
      keep = n > 1 ? n : 1;
    }
    if (p.min_p > 0.0f) {
      const double floor = __dmul_rn(static_cast<double>(p.min_p), prob[0]);
      int n = 1;
      while (n < keep && prob[n] >= floor) ++n;
      keep = n;
    }
    double total = 0;
    for (int j = 0; j < keep; ++j) total += prob[j];
    const double u = __dmul_rn(p.uniforms[row], total);
    double cum = 0;
    int32_t token = key_id(keys[keep - 1]);
    for (int j = 0; j < keep; ++j) {
      cum += prob[j];
      if (u < cum) {
        token = key_id(keys[j]);
        break;
      }
    }
    p.out_tokens[row] = token;
  }
}

}  // namespace

cudaError_t launch_fast_topk(const SampleParams& p, cudaStream_t stream) {
  prep_rows_kernel<<<dim3((p.vocab + kPrepChunk - 1) / kPrepChunk, p.num_rows), kPrepThreads, 0, stream>>>(p);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  char* base = static_cast<char*>(p.workspace);
  const Layout L = layout(p.num_rows, p.vocab);
  indexer::TopkParams tp;
  tp.rows.num_rows = p.num_rows;
  tp.rows.row_seq = reinterpret_cast<const int32_t*>(base + L.row_seq);
  tp.rows.row_len = reinterpret_cast<const int32_t*>(base + L.row_len);
  tp.rows.block_tables = reinterpret_cast<const int32_t*>(base + L.block_table);
  tp.rows.block_table_stride = 1;
  tp.rows.page_size = p.vocab;  // one page: slot = position = token id
  tp.rows.max_row_len = p.vocab;
  tp.k = p.top_k;
  tp.scores = reinterpret_cast<const float*>(base + L.c);
  tp.score_stride = c_stride(p.vocab);
  tp.out_slots = reinterpret_cast<int32_t*>(base + L.ids);
  tp.workspace = base + L.topk_ws;
  tp.workspace_bytes = indexer::indexer_topk_workspace_bytes(p.num_rows);
  e = indexer::launch_indexer_topk(tp, stream);
  if (e != cudaSuccess) return e;
  finish_topk_kernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace glm5rt::kernels::sampling::detail
