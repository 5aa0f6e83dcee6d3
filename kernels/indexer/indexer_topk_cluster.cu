// Exact top-k of rows of at most 16384 scores, one *cluster* of 8 blocks per row (round 5; sm_90+, thread
// block clusters). Why: the one-block register select (indexer_topk_reg.cu) takes ~8 us for an 8K row on
// the H200, of which ~6 us is the selection; round 4 refuted shared-atomic contention as the cause (three
// histogram copies were slower), so this spreads the row over 8 SMs and keeps every per-block step short
// (8-16 warps per barrier and reduction instead of 32) at the price of cluster barriers and
// distributed-shared-memory (DSMEM) reads. Measured (H200, docs/PERFORMANCE.md, Indexer, round 5): alone
// 6.2 us against 8.1 at 8K; behind the scores kernel 11.19 us against 12.84. Its phase probe shows what is
// left: each cluster-barrier stage costs ~1700-1800 SM cycles (~0.9 us), each pass ~3100.
//
// Layout: block r of the cluster holds positions [r * 4T, (r + 1) * 4T) of its row (T threads, one float4
// each: T = 256 for rows of at most 8K keys, 512 up to 16K), the 32-bit order keys in registers.
// Algorithm (the register select's, with the block-wide steps made cluster-wide):
//  - the first digit: the key's top 11 bits (sign, exponent, 2 mantissa bits), not the range of the
//    cluster's min and max keys as in the register select: one cluster barrier and DSMEM round fewer;
//    three passes still cover all 32 bits, so rows of one sign or all-equal rows only cost more passes.
//    (The variant with the cluster min / max, row_kernel 3, measured slower, 12.00 against 11.19 us at
//    b1 8K on the H200, and was removed in session 4: row_kernel 3 now returns cudaErrorNotSupported);
//  - up to three radix passes (11 / 11 / <= 10 bits), each: local histogram (shared atomics) -> local
//    totals of 64 super-bins of 32 bins -> cluster barrier -> each block sums the 64 super-bins over the 8
//    blocks (DSMEM) -> every warp finds the super-bin, then reads that super-bin's 32 bins from the 8 blocks
//    and finds the digit; every block computes identical integers, so all blocks take the same decisions
//    (no broadcast). Histograms and super-bin totals are per pass, so no block overwrites what another may
//    still read. It stops when the digit's bin holds exactly the keys still needed;
//  - emission: per-thread counts of keys above the threshold and equal to it (packed 16 + 16 bits), a
//    block scan, a cluster barrier to exchange the block totals, then every thread writes its keys' slots;
//    keys equal to the threshold rank by position (block rank, thread, lane of the float4), so ties go to
//    the lower position exactly as in the reference. The last barrier (arrive before the stores, wait
//    after them) keeps every block resident until no block reads its shared memory any more.
// Launched behind the scores kernel with programmatic dependent launch where the caller asks: the
// prologue (row length, block-table slice, histogram clear) overlaps the scores kernel.
#include "kernels/indexer/indexer_common.cuh"
#include "kernels/indexer/indexer_internal.hpp"
#include "kernels/indexer/indexer_params.hpp"
#include "kernels/indexer/indexer_select.cuh"

#include <cstdint>
#include <cstdlib>

namespace glm5rt::kernels::indexer {
namespace {

constexpr int kCtas = 8;            // blocks per cluster (the portable maximum)
constexpr int kPasses = 3;          // 11 + 11 + 10 bits
constexpr int kSuperWidth = 32;     // bins per super-bin
constexpr int kSupers = detail::kBins / kSuperWidth;  // 64
constexpr int kClusterTableCap = 1024;
using detail::kBins;
using detail::wait_for_producer;
using detail::warp_inclusive_scan;

struct ClusterShared {
  uint32_t hist[kPasses][kBins];  // cleared in the prologue; pass p uses hist[p] only (read remotely)
  uint32_t super_local[kPasses][kSupers];  // this block's super-bin totals per pass (read remotely)
  uint32_t super_glob[kSupers];   // the cluster's super-bin totals of the current pass (local only)
  uint32_t wtot[16];
  uint32_t cta_total;  // read remotely
  int32_t table[kClusterTableCap];
};
static_assert(sizeof(ClusterShared) <= 48 * 1024, "cluster select shared memory must stay within 48 KB (static)");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}
// The word at `local` (a __shared__ address of this block) in block `rank` of the cluster.
__device__ __forceinline__ uint32_t ld_remote(const uint32_t* local, uint32_t rank) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(local));
  uint32_t remote, v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.u32 %0, [%1];\n" : "=r"(v) : "r"(remote) : "memory");
  return v;
}
#endif

// kProbe (benchmarks only): thread 0 of block 0 of row 0 writes clock64() at the phase boundaries to
// probe[0..10].
template <int kThreads, bool kProbe>
__global__ void __launch_bounds__(kThreads, 1) topk_cluster_kernel(const TopkParams p, unsigned long long* probe) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kWarps = kThreads / 32;
  constexpr int kSpan = 4 * kThreads;           // positions per block
  constexpr int kTPS = kThreads / kSupers;      // threads per super-bin: 4 or 8
  constexpr int kBinsPT = kSuperWidth / kTPS;   // local bins summed per thread
  constexpr int kCtasPT = kCtas / kTPS;         // remote blocks read per thread
  static_assert(kWarps <= 16 && kTPS * kBinsPT == kSuperWidth && kTPS * kCtasPT == kCtas && kTPS <= 32, "layout");
  __shared__ ClusterShared s;
  const uint32_t rank = cluster_rank();
  const int row = blockIdx.x / kCtas, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int k = p.k;
  auto stamp = [&](int i) {
    if constexpr (kProbe) {
      if (tid == 0 && rank == 0 && row == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(t)::"memory");
        probe[i] = t;
      }
    }
  };
  stamp(0);
  // Prologue: nothing here reads what the scores kernel writes.
  const int len = max(0, min(__ldg(p.rows.row_len + row), kCtas * kSpan));  // rows never exceed max_row_len
  const int seq = __ldg(p.rows.row_seq + row);
  const int ps = p.rows.page_size;
  const bool pow2 = (ps & (ps - 1)) == 0;
  const int log2ps = __ffs(ps) - 1;
  const int base = static_cast<int>(rank) * kSpan;
  const int my_end = min(len, base + kSpan);
  const int page0 = my_end > base ? base / ps : 0;
  const int n_pages = my_end > base ? (my_end - 1) / ps - page0 + 1 : 0;
  const int32_t* table_g = p.rows.block_tables + static_cast<int64_t>(seq) * p.rows.block_table_stride;
  const bool staged = n_pages <= kClusterTableCap;
  if (staged)
    for (int i = tid; i < n_pages; i += kThreads) s.table[i] = __ldg(table_g + page0 + i);
  for (int i = tid; i < kPasses * kBins; i += kThreads) (&s.hist[0][0])[i] = 0;
  int32_t* out_slots = p.out_slots + static_cast<int64_t>(row) * k;
  float* out_scores = p.out_scores ? p.out_scores + static_cast<int64_t>(row) * k : nullptr;
  auto slot_of = [&](int pos) -> int32_t {
    const int page = pow2 ? pos >> log2ps : pos / ps;
    const int32_t entry = staged ? s.table[page - page0] : __ldg(table_g + page);
    return entry * ps + (pos - page * ps);
  };

  stamp(1);
  wait_for_producer();
  stamp(2);
  const int pos0 = base + 4 * tid;  // this thread's four positions: pos0 .. pos0 + 3
  const float4 x = pos0 < len ? __ldcg(reinterpret_cast<const float4*>(p.scores + static_cast<int64_t>(row) * p.score_stride + pos0))
                              : make_float4(0.f, 0.f, 0.f, 0.f);
  const float v[4] = {x.x, x.y, x.z, x.w};

  if (len <= k) {  // cluster-uniform: every key in position order, then -1 padding; no block reads another
    __syncthreads();  // staged table
#pragma unroll
    for (int q = 0; q < 4; ++q)
      if (pos0 + q < len) {
        out_slots[pos0 + q] = slot_of(pos0 + q);
        if (out_scores) out_scores[pos0 + q] = v[q];
      }
    for (int i = len + static_cast<int>(rank) * kThreads + tid; i < k; i += kCtas * kThreads) {
      out_slots[i] = -1;
      if (out_scores) out_scores[i] = -__int_as_float(0x7f800000);
    }
    return;
  }

  uint32_t key[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) key[q] = detail::order_key(v[q]);
  __syncthreads();  // orders the histogram clear and the staged table before their use
  stamp(3);
  stamp(4);  // (the probe keeps its "first digit known" stamp: fixed, nothing to compute)

  // Known so far: keys whose bits under `mask` equal `prefix` hold the k-th key; `need` of them (in key
  // order, then position order) complete the k after the keys whose masked bits exceed `prefix`. The
  // first digit is the top 11 bits: nothing known yet.
  uint32_t need = static_cast<uint32_t>(k), prefix = 0u, mask = 0u;
  {
    int top = 31;
    const int sid = tid / kTPS, sub = tid % kTPS;
#pragma unroll 1
    for (int pass = 0; pass < kPasses && top >= 0; ++pass) {
      const int width = min(top + 1, detail::kDigitBits);
      const int shift = top + 1 - width;
      const uint32_t dmask = (1u << width) - 1u;
      uint32_t* h = s.hist[pass];
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (pos0 + q < len && (key[q] & mask) == prefix) atomicAdd(&h[(key[q] >> shift) & dmask], 1u);
      __syncthreads();
      uint32_t sum = 0;  // this block's total of super-bin sid: kTPS neighbouring lanes, kBinsPT bins each
#pragma unroll
      for (int i = 0; i < kBinsPT; ++i) sum += h[sid * kSuperWidth + sub * kBinsPT + i];
#pragma unroll
      for (int o = 1; o < kTPS; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if (sub == 0) s.super_local[pass][sid] = sum;
      cluster_sync();  // every block's histogram and super-bin totals of this pass are visible
      uint32_t g = 0;
#pragma unroll
      for (int i = 0; i < kCtasPT; ++i) g += ld_remote(&s.super_local[pass][sid], static_cast<uint32_t>(sub * kCtasPT + i));
#pragma unroll
      for (int o = 1; o < kTPS; o <<= 1) g += __shfl_xor_sync(0xffffffffu, g, o);
      if (sub == 0) s.super_glob[sid] = g;
      __syncthreads();
      // Every warp: the super-bin holding the need-th key from the top (lane l: super-bins 63-2l, 62-2l)...
      const uint32_t a = s.super_glob[kSupers - 1 - 2 * lane], b = s.super_glob[kSupers - 2 - 2 * lane];
      const uint32_t xi = warp_inclusive_scan(a + b, lane);
      const int L = __ffs(__ballot_sync(0xffffffffu, xi >= need)) - 1;  // exists: the prefix holds >= need keys
      const uint32_t before_L = __shfl_sync(0xffffffffu, xi - a - b, L);
      const uint32_t a_L = __shfl_sync(0xffffffffu, a, L);
      int S;
      uint32_t before;
      if (before_L + a_L >= need) {
        S = kSupers - 1 - 2 * L;
        before = before_L;
      } else {
        S = kSupers - 2 - 2 * L;
        before = before_L + a_L;
      }
      // ... then its 32 bins over the 8 blocks, from the top (lane l: bin 32 S + 31 - l).
      const int bin = S * kSuperWidth + kSuperWidth - 1 - lane;
      uint32_t c = 0;
#pragma unroll
      for (int r = 0; r < kCtas; ++r) c += ld_remote(&h[bin], static_cast<uint32_t>(r));
      const uint32_t yi = warp_inclusive_scan(c, lane);
      const int l2 = __ffs(__ballot_sync(0xffffffffu, before + yi >= need)) - 1;
      const uint32_t count = __shfl_sync(0xffffffffu, c, l2);
      need -= before + __shfl_sync(0xffffffffu, yi, l2) - count;
      prefix |= static_cast<uint32_t>(S * kSuperWidth + kSuperWidth - 1 - l2) << shift;
      mask |= dmask << shift;
      top = shift - 1;
      stamp(5 + pass);
      if (count == need) break;  // the bin holds exactly the keys still needed: take it whole
    }
  }

  // Emission. Above: masked key > prefix (all taken); equal: masked key == prefix (the first `need` in
  // position order). Counts packed as above | equal << 16 (each at most 16384 per row: no carry).
  const uint32_t above_total = static_cast<uint32_t>(k) - need;
  uint32_t packed = 0;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint32_t mk = key[q] & mask;
    if (pos0 + q < len) packed += mk > prefix ? 1u : (mk == prefix ? 0x10000u : 0u);
  }
  const uint32_t xi = warp_inclusive_scan(packed, lane);
  if (lane == 31) s.wtot[warp] = xi;
  __syncthreads();
  const uint32_t wv = lane < kWarps ? s.wtot[lane] : 0u;
  const uint32_t wi = warp_inclusive_scan(wv, lane);
  const uint32_t warp_before = __shfl_sync(0xffffffffu, wi - wv, warp);
  const uint32_t cta_total = __shfl_sync(0xffffffffu, wi, 31);
  if (tid == 0) s.cta_total = cta_total;
  cluster_sync();  // block totals visible
  const uint32_t t_r = lane < kCtas ? ld_remote(&s.cta_total, lane) : 0u;
  const uint32_t cta_before = __reduce_add_sync(0xffffffffu, lane < static_cast<int>(rank) ? t_r : 0u);
  stamp(8);
  cluster_arrive();  // no more reads of other blocks' shared memory from this thread
  const uint32_t excl = cta_before + warp_before + xi - packed;
  uint32_t g_next = excl & 0xffffu, e_next = excl >> 16;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int pos = pos0 + q;
    const uint32_t mk = key[q] & mask;
    int idx = -1;
    if (pos < len) {
      if (mk > prefix) {
        idx = static_cast<int>(g_next++);
      } else if (mk == prefix) {
        const uint32_t r = e_next++;
        if (r < need) idx = static_cast<int>(above_total + r);
      }
    }
    if (idx >= 0 && idx < k) {
      out_slots[idx] = slot_of(pos);
      if (out_scores) out_scores[idx] = v[q];
    }
  }
  stamp(9);
  cluster_wait();  // keep this block's shared memory alive until every block has read it
  stamp(10);
#endif
}

template <int kThreads, bool kProbe = false>
cudaError_t launch_cluster(const TopkParams& p, bool pdl, cudaStream_t stream, unsigned long long* probe = nullptr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(kCtas * p.rows.num_rows);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kCtas;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 2 : 1;
  return cudaLaunchKernelEx(&cfg, topk_cluster_kernel<kThreads, kProbe>, p, probe);
}

}  // namespace

namespace detail {

bool cluster_select_supported() {
  int dev = 0, major = 0, cluster = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&cluster, cudaDevAttrClusterLaunch, dev) != cudaSuccess) return false;
  return major >= 9 && cluster != 0;
}

// The one-line flip: return false here (or set GLM5RT_INDEXER_CLUSTER=0) to make row_kernel -1 take the
// register select again (read once per process).
bool cluster_select_default() {
  static const bool on = [] {
    const char* e = std::getenv("GLM5RT_INDEXER_CLUSTER");
    return !(e && e[0] == '0');
  }();
  return on;
}

bool use_cluster_select(const TopkParams& p) {
  if (p.row_kernel == 4) return cluster_select_supported();
  return p.row_kernel == -1 && p.rows.max_row_len > p.k && p.rows.max_row_len <= kRegSelectMaxRowLen &&
         p.rows.num_rows <= kClusterSelectMaxRows && cluster_select_default() && cluster_select_supported();
}

cudaError_t launch_topk_cluster(const TopkParams& p, bool after_scores, cudaStream_t stream) {
  if (p.rows.num_rows == 0) return cudaSuccess;
  if (p.rows.max_row_len > kRegSelectMaxRowLen) return cudaErrorInvalidValue;
  const bool pdl = after_scores;  // sm_90+ only reaches here
  const bool narrow = p.rows.max_row_len <= kCtas * 4 * 256;
  // H200 (be223c0), b1 8K FP8 scores + select: 11.19 us against 12.84 with the register select.
  const cudaError_t err = narrow ? launch_cluster<256>(p, pdl, stream) : launch_cluster<512>(p, pdl, stream);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

cudaError_t launch_topk_cluster_probe(const TopkParams& p, unsigned long long* probe, cudaStream_t stream) {
  if (p.rows.num_rows == 0 || p.rows.max_row_len > kCtas * 4 * 256 || !cluster_select_supported()) return cudaErrorInvalidValue;
  const cudaError_t err = launch_cluster<256, true>(p, false, stream, probe);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

}  // namespace detail
}  // namespace glm5rt::kernels::indexer
