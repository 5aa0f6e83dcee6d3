// Exact top-k of each score row: radix select over a 64-bit composite key (score order key << 32 |
// ~position), so that all keys are distinct and "equal scores: lower position wins" falls out of the
// comparison. 11-bit digits, shared-memory histograms; d0 is the top digit's bin holding the k-th key.
//
// One block per row (many rows: prefill chunks, big batches):
//  pass 1 over the row: histogram of the top digit, d0 follows;
//  pass 2 over the row: keys whose top digit > d0 are emitted, keys in bin d0 become candidates (kept in
//          shared memory when they fit, the usual case) and are histogrammed on the next digit;
//  further digits over the candidates only, until the bin holding the k-th key holds exactly the number
//  still needed; then every candidate >= that bin's lower bound is emitted.
// Split (few long rows: decode): pass 1 (histogram of the top digit; counted by the scores kernel itself
// when launch_indexer runs both) and pass 2 (filter) run grid-wide over 2048-key chunks (global histogram,
// global candidate list), then one block per row finishes the candidates and clears the workspace header
// for the next call. Chosen for at most 64 rows longer than 16384 keys (H200: about 13 us flat from 32K
// to 200K keys, against 21 / 57 / 81 us for one block per row at 32K / 128K / 200K).
// When the candidates do not fit (heavily tied or very concentrated rows) the later digits re-read the
// row instead: slower, same result. Keys are distinct, so at the latest the last digit decides.
// Emission writes positions first and converts them to slots in a separate loop, so that no block-table
// load sits on a serial chain inside the passes.
#include "kernels/indexer/indexer_common.cuh"
#include "kernels/indexer/indexer_internal.hpp"
#include "kernels/indexer/indexer_params.hpp"
#include "kernels/indexer/indexer_select.cuh"

#include <cstdint>

namespace glm5rt::kernels::indexer {
namespace {

constexpr int kThreads = 1024;  // one-block-per-row and finishing kernels
constexpr int kSplitThreads = 256;
constexpr int kSplitChunk = 2048;  // keys per block in the split passes (8 per thread)
using detail::find_digit;
using detail::kBins;
using detail::kHeaderWords;
using detail::kLevels;
using detail::kRowWorkspaceBytes;
using detail::level_mask;
using detail::level_shift;
using detail::row_workspace;
using detail::warp_append;
using detail::Workspace;
constexpr int kCandCap = detail::kSplitCandCap;  // candidates kept in shared memory by the finishing kernel
static_assert(kBins * 4 + kCandCap * 8 + 256 <= 48 * 1024, "top-k shared memory must stay within 48 KB");
static_assert(kSplitChunk == kSplitThreads * 8, "split blocks read two float4 per thread");

// Calls f(valid, pos, score_key) for every position of row[0, len), all lanes of a warp together (f may
// use warp collectives; `valid` is false for padding lanes). float4 loads, unrolled, 1024 threads.
template <class F>
__device__ __forceinline__ void for_each_key(const float* row, int len, F&& f) {
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n4 = (len + 3) / 4;
  const float4* row4 = reinterpret_cast<const float4*>(row);
  constexpr int kUnroll = 4;
  for (int base = warp * 32; base < n4; base += kWarps * 32 * kUnroll) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * kWarps * 32 + lane;
      v[u] = i < n4 ? __ldcg(row4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * kWarps * 32 + lane;
      if (base + u * kWarps * 32 >= n4) break;  // warp-uniform
      const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int pos = 4 * i + q;
        f(pos < len, pos, detail::order_key(e[q]));
      }
    }
  }
}

struct TopkShared {
  uint32_t hist[kBins];
  uint32_t cand_key[kCandCap];
  uint32_t cand_pos[kCandCap];
  uint32_t warp_sum[kThreads / 32];
  uint32_t out_count;
  uint32_t cand_count;
  uint32_t digit;
  uint32_t above;
};

struct RowOut {
  int32_t* slots;
  float* scores;
  int k;
  // Positions first (converted to slots by finish_slots), so that emission never waits on a load.
  __device__ __forceinline__ void put(int idx, int pos, uint32_t score_key) const {
    if (idx < 0 || idx >= k) return;  // cannot happen when the selection is right; never write past the row
    slots[idx] = pos;
    if (scores) scores[idx] = detail::order_key_to_float(score_key);
  }
};

__device__ void finish_slots(const RowOut& out, const RowLayout& rows, int seq, int from) {
  __syncthreads();  // positions written by other threads of the block are visible after the barrier
  for (int i = from + threadIdx.x; i < out.k; i += blockDim.x) out.slots[i] = detail::slot_of(rows, seq, out.slots[i]);
}

// Rows with at most k keys: all of them, in position order, then -1 padding.
__device__ void emit_short_row(const RowOut& out, const RowLayout& rows, int seq, const float* scores, int len) {
  for (int i = threadIdx.x; i < out.k; i += blockDim.x) {
    if (i < len) {
      out.slots[i] = detail::slot_of(rows, seq, i);
      if (out.scores) out.scores[i] = scores[i];
    } else {
      out.slots[i] = -1;
      if (out.scores) out.scores[i] = -__int_as_float(0x7f800000);
    }
  }
}

// With d0 known and `need` keys still to take from bin d0: walks the lower digits over the candidates
// (shared memory when in_smem, else the row filtered on d0) and emits the chosen ones from s.out_count
// on. hist_ready: s.hist already holds the next digit's histogram of the bin's keys.
__device__ void select_in_top_bin(TopkShared& s, const RowOut& out, const float* scores, int len, uint32_t d0,
                                  uint32_t need, bool in_smem, bool hist_ready) {
  const uint32_t ncand = s.cand_count;
  uint64_t prefix = static_cast<uint64_t>(d0) << 53;
  uint64_t threshold = prefix;
  for (int level = 1; level < kLevels; ++level) {
    if (level > 1 || !hist_ready) {
      // Histogram of this level's digit over the keys sharing the prefix so far.
      const int shift_above = level_shift(level - 1);
      const int this_shift = level_shift(level);
      const uint32_t this_mask = level_mask(level);
      const uint64_t high_mask = ~((uint64_t{1} << shift_above) - 1);
      for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = 0;
      __syncthreads();
      if (in_smem) {
        for (uint32_t i = threadIdx.x; i < ncand; i += kThreads) {
          const uint64_t key = detail::rank_key(s.cand_key[i], s.cand_pos[i]);
          if ((key & high_mask) == prefix) atomicAdd(&s.hist[(key >> this_shift) & this_mask], 1u);
        }
      } else {
        for_each_key(scores, len, [&](bool valid, int pos, uint32_t sk) {
          const uint64_t key = detail::rank_key(sk, pos);
          if (valid && (key & high_mask) == prefix) atomicAdd(&s.hist[(key >> this_shift) & this_mask], 1u);
        });
      }
      __syncthreads();
    }
    find_digit<kThreads>(s.hist, s.warp_sum, need, &s.digit, &s.above);
    const uint32_t d = s.digit;
    need -= s.above;
    prefix |= static_cast<uint64_t>(d) << level_shift(level);
    const bool exact = s.hist[d] == need;
    __syncthreads();
    if (exact || level == kLevels - 1) {
      threshold = prefix;
      break;
    }
  }
  if (in_smem) {
    for (uint32_t base = threadIdx.x - threadIdx.x % 32; base < ncand; base += kThreads) {
      const uint32_t i = base + threadIdx.x % 32;
      const bool valid = i < ncand;
      const uint32_t sk = valid ? s.cand_key[i] : 0u, pos = valid ? s.cand_pos[i] : 0u;
      const bool take = valid && detail::rank_key(sk, pos) >= threshold;
      const int idx = warp_append(take, &s.out_count);
      if (take) out.put(idx, static_cast<int>(pos), sk);
    }
  } else {
    for_each_key(scores, len, [&](bool valid, int pos, uint32_t sk) {
      const bool take = valid && (sk >> 21) == d0 && detail::rank_key(sk, pos) >= threshold;
      const int idx = warp_append(take, &s.out_count);
      if (take) out.put(idx, pos, sk);
    });
  }
}

__device__ __forceinline__ RowOut row_out(const TopkParams& p, int row) {
  return {p.out_slots + static_cast<int64_t>(row) * p.k, p.out_scores ? p.out_scores + static_cast<int64_t>(row) * p.k : nullptr,
          p.k};
}

// ---- one block per row (unchanged from c483cf5; rows of k < len <= 16384 take the register select of
// indexer_topk_reg.cu by default) ----
// (block_select of indexer_select.cuh, linear bins from L2, replaced this kernel for one H200 run and was
// slower everywhere: 12.1 against 10.3 us at 8K, 27.9 / 71 / 99 against 21 / 57 / 81 us at 32K / 128K /
// 200K, 134 against 117 us for the prefill chunk; so this kernel stays.)
__global__ void __launch_bounds__(kThreads) topk_row_kernel(const TopkParams p) {
  __shared__ TopkShared s;
  const int row = blockIdx.x;
  const int len = p.rows.row_len[row], seq = p.rows.row_seq[row], k = p.k;
  const RowOut out = row_out(p, row);
  const float* scores = p.scores + static_cast<int64_t>(row) * p.score_stride;
  if (len <= k) {
    emit_short_row(out, p.rows, seq, scores, len);
    return;
  }
  if (threadIdx.x == 0) s.out_count = s.cand_count = 0;
  for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = 0;
  __syncthreads();
  for_each_key(scores, len, [&](bool valid, int, uint32_t sk) {
    if (valid) atomicAdd(&s.hist[sk >> 21], 1u);  // key bits 63..53 = score key bits 31..21
  });
  __syncthreads();
  find_digit<kThreads>(s.hist, s.warp_sum, k, &s.digit, &s.above);
  const uint32_t d0 = s.digit, need = k - s.above;
  const bool exact = s.hist[d0] == need;
  const bool in_smem = s.hist[d0] <= kCandCap;
  __syncthreads();
  for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = 0;
  __syncthreads();
  // Pass 2: emit keys above bin d0 (and bin d0 itself when it is exactly what is needed); collect the
  // bin's keys and histogram their next digit.
  for_each_key(scores, len, [&](bool valid, int pos, uint32_t sk) {
    const uint32_t dig = sk >> 21;
    const bool take = valid && (dig > d0 || (exact && dig == d0));
    const int idx = warp_append(take, &s.out_count);
    if (take) out.put(idx, pos, sk);
    if (!exact) {
      const bool cand = valid && dig == d0;
      if (in_smem) {
        const int c = warp_append(cand, &s.cand_count);
        if (cand) {
          s.cand_key[c] = sk;
          s.cand_pos[c] = pos;
        }
      }
      if (cand) atomicAdd(&s.hist[(detail::rank_key(sk, pos) >> 42) & (kBins - 1)], 1u);
    }
  });
  __syncthreads();
  if (!exact) select_in_top_bin(s, out, scores, len, d0, need, in_smem, true);
  finish_slots(out, p.rows, seq, 0);
}

// ---- split: pass 1 (histogram of the top digit into the row's global histogram) ----
__global__ void __launch_bounds__(kSplitThreads) topk_split_hist_kernel(const TopkParams p) {
  __shared__ uint32_t hist[kBins];
  const int row = blockIdx.y, len = p.rows.row_len[row];
  const int start = blockIdx.x * kSplitChunk;
  if (len <= p.k || start >= len) return;
  for (int i = threadIdx.x; i < kBins; i += kSplitThreads) hist[i] = 0;
  __syncthreads();
  const float4* row4 = reinterpret_cast<const float4*>(p.scores + static_cast<int64_t>(row) * p.score_stride + start);
  float4 v[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int i = threadIdx.x + u * kSplitThreads;
    v[u] = start + 4 * i < len ? __ldcg(row4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int i = threadIdx.x + u * kSplitThreads;
    const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
    for (int q = 0; q < 4; ++q)
      if (start + 4 * i + q < len) atomicAdd(&hist[detail::order_key(e[q]) >> 21], 1u);
  }
  __syncthreads();
  uint32_t* global_hist = row_workspace(p.workspace, p.rows.num_rows, row).hist;
  for (int i = threadIdx.x; i < kBins; i += kSplitThreads)
    if (hist[i]) atomicAdd(&global_hist[i], hist[i]);
}

// ---- split: pass 2 (emit keys above bin d0, append bin d0's keys to the row's candidate list) ----
struct FilterShared {
  uint32_t hist[kBins];
  uint32_t warp_sum[kSplitThreads / 32];
  uint32_t digit, above, n_take, n_cand, take_base, cand_base;
  uint32_t take_pos[kSplitChunk], take_key[kSplitChunk];
  uint32_t cand_pos[kSplitChunk], cand_key[kSplitChunk];
};
static_assert(sizeof(FilterShared) <= 48 * 1024, "filter shared memory must stay within 48 KB");

__global__ void __launch_bounds__(kSplitThreads) topk_split_filter_kernel(const TopkParams p) {
  __shared__ FilterShared s;
  const int row = blockIdx.y, len = p.rows.row_len[row], k = p.k;
  const int start = blockIdx.x * kSplitChunk;
  if (len <= k || start >= len) return;
  const Workspace ws = row_workspace(p.workspace, p.rows.num_rows, row);
  for (int i = threadIdx.x; i < kBins; i += kSplitThreads) s.hist[i] = __ldcg(ws.hist + i);
  if (threadIdx.x == 0) s.n_take = s.n_cand = 0;
  // Issue this block's score loads before the scan so that their latency overlaps it.
  const float4* row4 = reinterpret_cast<const float4*>(p.scores + static_cast<int64_t>(row) * p.score_stride + start);
  float4 v[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int i = threadIdx.x + u * kSplitThreads;
    v[u] = start + 4 * i < len ? __ldcg(row4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  __syncthreads();
  find_digit<kSplitThreads>(s.hist, s.warp_sum, k, &s.digit, &s.above);
  const uint32_t d0 = s.digit, need = k - s.above, bin = s.hist[d0];
  const bool exact = bin == need;
  const bool collect = !exact && bin <= kCandCap;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int i = threadIdx.x + u * kSplitThreads;
    const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int pos = start + 4 * i + q;
      const uint32_t sk = detail::order_key(e[q]);
      const uint32_t dig = sk >> 21;
      const bool valid = pos < len;
      const bool take = valid && (dig > d0 || (exact && dig == d0));
      const bool cand = valid && collect && dig == d0;
      const int t = warp_append(take, &s.n_take);
      if (take) {
        s.take_pos[t] = pos;
        s.take_key[t] = sk;
      }
      const int c = warp_append(cand, &s.n_cand);
      if (cand) {
        s.cand_pos[c] = pos;
        s.cand_key[c] = sk;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    s.take_base = s.n_take ? atomicAdd(ws.out_count, s.n_take) : 0u;
    s.cand_base = s.n_cand ? atomicAdd(ws.cand_count, s.n_cand) : 0u;
  }
  __syncthreads();
  const RowOut out = row_out(p, row);
  const int seq = p.rows.row_seq[row];
  for (uint32_t i = threadIdx.x; i < s.n_take; i += kSplitThreads) {
    const uint32_t idx = s.take_base + i;
    if (idx < static_cast<uint32_t>(k)) {
      out.slots[idx] = detail::slot_of(p.rows, seq, s.take_pos[i]);
      if (out.scores) out.scores[idx] = detail::order_key_to_float(s.take_key[i]);
    }
  }
  for (uint32_t i = threadIdx.x; i < s.n_cand; i += kSplitThreads) {
    const uint32_t idx = s.cand_base + i;
    if (idx < static_cast<uint32_t>(kCandCap)) {
      ws.cand_pos[idx] = s.cand_pos[i];
      ws.cand_key[idx] = s.cand_key[i];
    }
  }
}

// ---- split: one block per row finishes bin d0 from the candidate list (or the row when it overflowed) ----
__global__ void __launch_bounds__(kThreads) topk_split_finish_kernel(const TopkParams p) {
  __shared__ TopkShared s;
  const int row = blockIdx.x;
  const int len = p.rows.row_len[row], seq = p.rows.row_seq[row], k = p.k;
  const RowOut out = row_out(p, row);
  const float* scores = p.scores + static_cast<int64_t>(row) * p.score_stride;
  if (len <= k) {
    emit_short_row(out, p.rows, seq, scores, len);
    return;
  }
  const Workspace ws = row_workspace(p.workspace, p.rows.num_rows, row);
  for (int i = threadIdx.x; i < kBins; i += kThreads) s.hist[i] = __ldcg(ws.hist + i);
  __syncthreads();
  // The histogram and counters are consumed: leave the header zero for the next call (no memset node).
  for (int i = threadIdx.x; i < kBins; i += kThreads) ws.hist[i] = 0;
  if (threadIdx.x == 0) *ws.out_count = *ws.cand_count = 0;
  find_digit<kThreads>(s.hist, s.warp_sum, k, &s.digit, &s.above);
  const uint32_t d0 = s.digit, above = s.above, need = k - above, bin = s.hist[d0];
  if (bin == need) return;  // the filter emitted bin d0 whole: nothing left
  const bool in_smem = bin <= kCandCap;
  if (threadIdx.x == 0) {
    s.out_count = above;  // the filter wrote entries [0, above)
    s.cand_count = in_smem ? bin : 0u;
  }
  if (in_smem)
    for (uint32_t i = threadIdx.x; i < bin; i += kThreads) {
      s.cand_key[i] = __ldcg(ws.cand_key + i);
      s.cand_pos[i] = __ldcg(ws.cand_pos + i);
    }
  __syncthreads();
  select_in_top_bin(s, out, scores, len, d0, need, in_smem, false);
  finish_slots(out, p.rows, seq, static_cast<int>(above));
}

}  // namespace

size_t indexer_topk_workspace_bytes(int num_rows) { return num_rows > 0 ? size_t(num_rows) * kRowWorkspaceBytes : 0; }

cudaError_t clear_indexer_topk_workspace(void* workspace, size_t bytes, cudaStream_t stream) {
  if (!workspace || bytes == 0) return cudaSuccess;
  return cudaMemsetAsync(workspace, 0, bytes, stream);
}

namespace detail {

cudaError_t check_topk(const TopkParams& p) {
  const RowLayout& rows = p.rows;
  if (rows.num_rows < 0 || p.k < 1 || p.k > kMaxTopK || rows.page_size <= 0 || p.split < -1 || p.split > 1 ||
      p.row_kernel < -1 || p.row_kernel > 4)
    return cudaErrorInvalidValue;
  // Removed in session 4 (measured slower than the paths kept): a clear status rather than another kernel.
  if (p.row_kernel == kRowKernelRemovedRound4 || p.row_kernel == kRowKernelRemovedClusterMinMax)
    return cudaErrorNotSupported;
  if (p.row_kernel >= 1 && rows.max_row_len > kRegSelectMaxRowLen) return cudaErrorInvalidValue;
  if (rows.num_rows == 0) return cudaSuccess;
  if (!rows.row_seq || !rows.row_len || !rows.block_tables || !p.scores || !p.out_slots) return cudaErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(p.scores) & 15u) != 0 || p.score_stride % 4 != 0 || p.score_stride < rows.max_row_len)
    return cudaErrorInvalidValue;
  if (p.split == 1 && (!topk_workspace_ok(p) || rows.num_rows > 65535)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

bool topk_workspace_ok(const TopkParams& p) {
  return p.workspace && p.workspace_bytes >= indexer_topk_workspace_bytes(p.rows.num_rows) &&
         (reinterpret_cast<uintptr_t>(p.workspace) & 15u) == 0;
}

// Few long rows (decode): one block per row would leave most SMs idle while it reads its row.
bool use_split(const TopkParams& p) {
  return p.split == 1 || (p.split == -1 && topk_workspace_ok(p) && p.rows.num_rows <= 64 && p.rows.max_row_len > 16384);
}

// The register select by default where it measured faster (H200, 58665b5): rows longer than k and at
// most 16384 keys (8K, top-k alone: 7.65 against 8.95 us; prefill 4K x 4K: 83.5 against 118 us). When no
// row needs a selection (max_row_len <= k) the round-1 kernel's short-row path is faster (1.40 against
// 2.06 us at 1K), so it stays there.
bool use_reg_select(const TopkParams& p) {
  return p.row_kernel >= 1 || (p.row_kernel == -1 && p.rows.max_row_len > p.k && p.rows.max_row_len <= kRegSelectMaxRowLen);
}

cudaError_t launch_topk_row(const TopkParams& p, cudaStream_t stream, bool after_scores) {
  if (use_cluster_select(p)) return launch_topk_cluster(p, after_scores, stream);
  if (use_reg_select(p)) return launch_topk_reg(p, after_scores, stream);
  topk_row_kernel<<<p.rows.num_rows, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_topk_split(const TopkParams& p, bool histogram_done, cudaStream_t stream) {
  const dim3 grid((p.rows.max_row_len + kSplitChunk - 1) / kSplitChunk, p.rows.num_rows);
  if (grid.x > 0) {
    if (!histogram_done) topk_split_hist_kernel<<<grid, kSplitThreads, 0, stream>>>(p);
    topk_split_filter_kernel<<<grid, kSplitThreads, 0, stream>>>(p);
  }
  topk_split_finish_kernel<<<p.rows.num_rows, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace detail

cudaError_t launch_indexer_topk(const TopkParams& p, cudaStream_t stream) {
  const cudaError_t err = detail::check_topk(p);
  if (err != cudaSuccess || p.rows.num_rows == 0) return err;
  return detail::use_split(p) ? detail::launch_topk_split(p, false, stream) : detail::launch_topk_row(p, stream);
}

}  // namespace glm5rt::kernels::indexer
