// Exact top-k of rows of at most 16384 scores, one block of 1024 threads per row, every score held in
// registers (round 3). Why the round-1 row kernel takes ~10 us for an 8K row (docs/PERFORMANCE.md): it
// reads the row from L2 twice, emits through warp-aggregated appends (ballot, shared atomic, shuffle: a
// chain of dependent steps per key and warp), writes positions to global memory and reads them back to
// convert them to slots, and clears and rescans a 2048-bin histogram with four barriers per radix level.
// This kernel instead:
//  - loads the row once (kVec coalesced float4 per thread: position j * 4096 + 4 * thread + q) and keeps
//    the 32-bit order keys in registers; the row's block table is staged in shared memory meanwhile;
//  - radix-selects the k-th largest *score key* (not the 64-bit composite): the first digit starts at the
//    highest bit in which the row's smallest and largest keys differ (a block min/max that shares the
//    barrier the histogram clear needs anyway), 11/11/<=10-bit digits, three histograms cleared up front
//    (no clear between passes), and the bin search done redundantly by every warp from the warp totals
//    (two barriers per pass); it stops as soon as the bin holding the k-th key holds exactly the keys
//    still needed;
//  - emits without atomics: per-thread counts of keys above the threshold and equal to it (per float4
//    column, so that equal keys rank in position order), one block-wide scan, and every thread writes
//    its chosen keys' slots directly (page through a shift when page_size is a power of two).
// Ties: keys equal to the threshold are taken lowest position first, exactly the reference order.
// (Round 4's variant, three lane-private copies of the first histogram and a sign split of the first
// digit's range, measured slower at 8K on the H200 (8.78 against 7.95 us) and was removed in session 4;
// TopkParams::row_kernel 2 now returns cudaErrorNotSupported.)
// Launched after the scores kernel with programmatic dependent launch where the caller asks for it: the
// prologue (row length, block table, histogram clear) runs while the scores kernel finishes, and
// griddepcontrol.wait precedes every read of the scores.
#include "kernels/indexer/indexer_common.cuh"
#include "kernels/indexer/indexer_internal.hpp"
#include "kernels/indexer/indexer_params.hpp"
#include "kernels/indexer/indexer_select.cuh"
#include "kernels/gemm/launch.cuh"

#include <cstdint>

namespace glm5rt::kernels::indexer {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kColumn = 4 * kThreads;  // positions covered by one float4 per thread
constexpr int kPasses = 3;             // 11 + 11 + 10 bits cover the 32-bit key
using detail::kBins;
using detail::kTableCap;
using detail::wait_for_producer;
using detail::warp_inclusive_scan;

struct RegShared {
  uint32_t hist[kPasses][kBins];  // all cleared in the prologue; pass p uses hist[p]
  uint32_t pass_total[kPasses][kWarps];
  uint32_t kmin[kWarps], kmax[kWarps];
  uint32_t g_total[kWarps];
  unsigned long long e_total[kWarps];
  int32_t table[kTableCap];
};
static_assert(sizeof(RegShared) <= 48 * 1024, "register select shared memory must stay within 48 KB (static)");


// kVec float4 per thread: rows of up to kVec * 4096 keys.
template <int kVec>
__global__ void __launch_bounds__(kThreads) topk_reg_kernel(const TopkParams p) {
  constexpr int kItems = 4 * kVec;
  __shared__ RegShared s;
  const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int k = p.k;
  // Prologue: nothing here reads what the scores kernel writes.
  const int len = max(0, min(__ldg(p.rows.row_len + row), kVec * kColumn));  // rows never exceed max_row_len
  const int seq = __ldg(p.rows.row_seq + row);
  const int ps = p.rows.page_size;
  const bool pow2 = (ps & (ps - 1)) == 0;
  const int log2ps = __ffs(ps) - 1;
  const int n_pages = (len + ps - 1) / ps;
  const int32_t* table_g = p.rows.block_tables + static_cast<int64_t>(seq) * p.rows.block_table_stride;
  const bool staged = n_pages <= kTableCap;
  if (staged)
    for (int i = tid; i < n_pages; i += kThreads) s.table[i] = __ldg(table_g + i);
  for (int i = tid; i < kPasses * kBins; i += kThreads) (&s.hist[0][0])[i] = 0;
  int32_t* out_slots = p.out_slots + static_cast<int64_t>(row) * k;
  float* out_scores = p.out_scores ? p.out_scores + static_cast<int64_t>(row) * k : nullptr;
  auto slot_of = [&](int pos) -> int32_t {
    const int page = pow2 ? pos >> log2ps : pos / ps;
    const int32_t entry = staged ? s.table[page] : __ldg(table_g + page);
    return entry * ps + (pos - page * ps);
  };

  wait_for_producer();
  const float4* row4 = reinterpret_cast<const float4*>(p.scores + static_cast<int64_t>(row) * p.score_stride);
  float v[kItems];
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    const int i4 = j * kThreads + tid;
    const float4 x = 4 * i4 < len ? __ldcg(row4 + i4) : make_float4(0.f, 0.f, 0.f, 0.f);
    v[4 * j] = x.x;
    v[4 * j + 1] = x.y;
    v[4 * j + 2] = x.z;
    v[4 * j + 3] = x.w;
  }
  auto pos_of = [&](int item) { return (item / 4) * kColumn + 4 * tid + item % 4; };

  if (len <= k) {  // block-uniform: every key, in position order, then -1 padding
    __syncthreads();  // staged table
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int pos = pos_of(it);
      if (pos < len) {
        out_slots[pos] = slot_of(pos);
        if (out_scores) out_scores[pos] = v[it];
      }
    }
    for (int i = len + tid; i < k; i += kThreads) {
      out_slots[i] = -1;
      if (out_scores) out_scores[i] = -__int_as_float(0x7f800000);
    }
    return;
  }

  uint32_t key[kItems];
  // Known so far: keys whose bits under `mask` equal `prefix` hold the k-th key; `need` of them (in key
  // order, then position order) complete the k after the keys whose masked bits exceed `prefix`.
  // The first digit starts at the highest bit in which the smallest (lo) and largest (hi) candidate differ.
  uint32_t need = static_cast<uint32_t>(k), prefix, mask;
  uint32_t kmin = 0xffffffffu, kmax = 0u;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    key[it] = detail::order_key(v[it]);
    if (pos_of(it) < len) {
      kmin = min(kmin, key[it]);
      kmax = max(kmax, key[it]);
    }
  }
  kmin = __reduce_min_sync(0xffffffffu, kmin);
  kmax = __reduce_max_sync(0xffffffffu, kmax);
  if (lane == 0) {
    s.kmin[warp] = kmin;
    s.kmax[warp] = kmax;
  }
  __syncthreads();  // also orders the histogram clear and the staged table before their use
  const uint32_t lo = __reduce_min_sync(0xffffffffu, s.kmin[lane]);
  const uint32_t hi = __reduce_max_sync(0xffffffffu, s.kmax[lane]);
  const uint32_t diff = lo ^ hi;
  if (diff == 0) {  // all candidates equal: the first `need` of them in position order
    prefix = hi;
    mask = 0xffffffffu;
  } else {
    const int hb = 31 - __clz(diff);
    mask = ~((2u << hb) - 1u);  // the common high bits (none when hb == 31: 2u << 31 == 0)
    prefix = hi & mask;
    int top = hb;
#pragma unroll 1
    for (int pass = 0; pass < kPasses && top >= 0; ++pass) {
      const int width = min(top + 1, detail::kDigitBits);
      const int shift = top + 1 - width;
      const uint32_t dmask = (1u << width) - 1u;
      uint32_t* h = s.hist[pass];
#pragma unroll
      for (int it = 0; it < kItems; ++it)
        if (pos_of(it) < len && (key[it] & mask) == prefix) atomicAdd(&h[(key[it] >> shift) & dmask], 1u);
      __syncthreads();
      // Warp w owns bins from the top: lane l of warp w the bins kBins-1-2(32w+l) and the one below.
      const int mine = kBins - 1 - 2 * tid;
      const uint32_t wt = __reduce_add_sync(0xffffffffu, h[mine] + h[mine - 1]);
      if (lane == 0) s.pass_total[pass][warp] = wt;
      __syncthreads();
      // Every warp finds the bin holding the need-th key itself (no third barrier to broadcast it).
      const uint32_t x = s.pass_total[pass][lane];
      const uint32_t xi = warp_inclusive_scan(x, lane);
      const int w = __ffs(__ballot_sync(0xffffffffu, xi >= need)) - 1;  // exists: the prefix holds >= need keys
      const uint32_t before_w = __shfl_sync(0xffffffffu, xi - x, w);
      const int b = kBins - 1 - 2 * (32 * w + lane);
      const uint32_t c0 = h[b], c1 = h[b - 1];
      const uint32_t yi = warp_inclusive_scan(c0 + c1, lane);
      const int l = __ffs(__ballot_sync(0xffffffffu, before_w + yi >= need)) - 1;
      const uint32_t before = __shfl_sync(0xffffffffu, before_w + yi - c0 - c1, l);
      const uint32_t e0 = __shfl_sync(0xffffffffu, c0, l), e1 = __shfl_sync(0xffffffffu, c1, l);
      const uint32_t hi_bin = kBins - 1 - 2 * (32 * w + l);
      uint32_t digit, count;
      if (before + e0 >= need) {
        digit = hi_bin;
        count = e0;
        need -= before;
      } else {
        digit = hi_bin - 1;
        count = e1;
        need -= before + e0;
      }
      prefix |= digit << shift;
      mask |= dmask << shift;
      top = shift - 1;
      if (count == need) break;  // the bin holds exactly the keys still needed: take it whole
    }
  }

  // Emission. Above: masked key > prefix (all taken); equal: masked key == prefix (the first `need` in
  // position order). Equal keys are counted per float4 column (16-bit fields) so that the scan ranks them
  // by (column, thread, lane of the float4) = by position.
  static_assert(kVec <= 4, "four 16-bit column counters per thread");
  const uint32_t above_total = static_cast<uint32_t>(k) - need;
  uint32_t g = 0;
  unsigned long long e = 0;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const bool valid = pos_of(it) < len;
    const uint32_t mk = key[it] & mask;
    g += (valid && mk > prefix) ? 1u : 0u;
    e += (valid && mk == prefix) ? (1ull << (16 * (it / 4))) : 0ull;
  }
  const uint32_t gi = warp_inclusive_scan(g, lane);
  const unsigned long long ei = warp_inclusive_scan(e, lane);
  if (lane == 31) {
    s.g_total[warp] = gi;
    s.e_total[warp] = ei;
  }
  __syncthreads();
  const uint32_t gw = warp_inclusive_scan(s.g_total[lane], lane);
  const unsigned long long ew = warp_inclusive_scan(s.e_total[lane], lane);
  const int prev = (warp + 31) & 31;
  const uint32_t g_warp = __shfl_sync(0xffffffffu, gw, prev);
  const unsigned long long e_warp = __shfl_sync(0xffffffffu, ew, prev);
  const unsigned long long e_all = __shfl_sync(0xffffffffu, ew, 31);
  uint32_t g_next = (warp ? g_warp : 0u) + gi - g;
  const unsigned long long e_excl = (warp ? e_warp : 0ull) + ei - e;
  uint32_t e_next[kVec];
  uint32_t columns_before = 0;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    e_next[j] = columns_before + static_cast<uint32_t>((e_excl >> (16 * j)) & 0xffffu);
    columns_before += static_cast<uint32_t>((e_all >> (16 * j)) & 0xffffu);
  }
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const int pos = pos_of(it);
    const uint32_t mk = key[it] & mask;
    int idx = -1;
    if (pos < len) {
      if (mk > prefix) {
        idx = static_cast<int>(g_next++);
      } else if (mk == prefix) {
        const uint32_t r = e_next[it / 4]++;
        if (r < need) idx = static_cast<int>(above_total + r);
      }
    }
    if (idx >= 0 && idx < k) {
      out_slots[idx] = slot_of(pos);
      if (out_scores) out_scores[idx] = v[it];
    }
  }
}

template <int kVec>
cudaError_t launch_reg(const TopkParams& p, bool pdl, cudaStream_t stream) {
  return kernels::detail::launch(topk_reg_kernel<kVec>, dim3(p.rows.num_rows), dim3(kThreads), 0, stream, pdl, p);
}

}  // namespace

namespace detail {

cudaError_t launch_topk_reg(const TopkParams& p, bool after_scores, cudaStream_t stream) {
  if (p.rows.num_rows == 0) return cudaSuccess;
  if (p.rows.max_row_len > kRegSelectMaxRowLen) return cudaErrorInvalidValue;
  const bool pdl = after_scores && kernels::detail::pdl_supported();
  cudaError_t err;
  if (p.rows.max_row_len <= kColumn) err = launch_reg<1>(p, pdl, stream);
  else if (p.rows.max_row_len <= 2 * kColumn) err = launch_reg<2>(p, pdl, stream);
  else err = launch_reg<4>(p, pdl, stream);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

}  // namespace detail
}  // namespace glm5rt::kernels::indexer
