// Device code shared by the sparse MLA kernels (round 1, the pipelined ring, the warp-specialized kernel,
// variant 7's in-register FP8 kernel): the CTA prologue (grid place, split span, index staging), the tile
// gather's chunk copy and the cp.async ring, the FP8 record dequantization, the online softmax of one
// 16-token step over k-split partial scores, the rescale + P.V update of the O^T accumulators, and the
// epilogue (softmax sums, normalise, stage, write the output or the split's partial). One copy each, so the
// kernels differ only in how they schedule these pieces. (Session 4 moved the repeated pieces here with the
// kernels' cubins byte-identical for sm_90 and sm_120; where a call would have changed a kernel's code, the
// kernel keeps its own copy and says so.)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/attention/mma_primitives.cuh"
#include "kernels/attention/sparse_mla.h"

namespace glm5rt::kernels::sparse_mla_detail {

struct KernelArgs {
  const __nv_bfloat16* q;
  const uint8_t* cache;
  int64_t num_slots;
  const int32_t* indices;
  const int32_t* lengths;
  __nv_bfloat16* out;
  float* lse;
  float* part_o;    // [nsplit, T, H, 512] normalised partial outputs (nsplit > 1 only)
  float* part_lse;  // [nsplit, T, H] log2-domain partial LSEs
  int num_tokens;
  int num_heads;
  int topk;
  int nsplit;
  int tiles_per_split;
  float scale_log2;  // softmax_scale * log2(e): the kernels work in base 2
  const MlaPool* pools;      // optional: row t reads pools[row_pool[t]] (SparseMlaParams::pools)
  const int32_t* row_pool;
  int num_pools;
  int pool_layer;
  int* counters;  // fused combine (SparseMlaParams::combine = 3): [T * H / HC] arrival counters, else nullptr
  // bf16 partials (SparseMlaParams::combine = 5, session 4): part_o holds bf16 values (same layout, half the
  // bytes), merged by the chunked combine's bf16 instance. 0 = fp32 partials.
  int part_bf16;
  // Session 5 (variant 5, bf16 records, sm_90+): how many producer warps issue a step's bulk copies (1: the
  // first warp's lanes 0..15, one copy each; 2 or 4: 16 / n rows per warp, so that the serialized per-lane
  // copy instructions of a step are spread over warps on different SM sub-partitions).
  int ws_copy_warps;
  // Session 8 (host side only; the kernels wait either way): launch the main kernel as a programmatic dependent
  // of the previous kernel in the stream (sm_90+, SparseMla launcher: GLM5RT_MLA_PDL=0 turns it off). Session 24:
  // 2 = the tail launch of a split last wave (variant 14's one-CTA form), which waits only before it exits
  // (sparse_mla_wsp_kernel, tail_waits_late in sparse_mla.cu).
  int pdl;
  // Session 9 (host side only): the device's compute capability major, for launch choices per architecture.
  int cc_major;
  // Session 12 (variant 14 with FP8 records): a pair converts step s at the end of its step s - wsp_lead (1..3).
  int wsp_lead;
  // Session 15 (benchmarks only, SparseMlaParams::debug_timeline): nullptr, or kTimelineSlots %globaltimer stamps
  // per CTA (variant 10's kernel only; see timeline_stamp).
  unsigned long long* timeline;
  // Session 15 (host side only): variant 10 with four GEMM1 accumulator chains (the default; GLM5RT_MLA_WSR_CHAINS=2:
  // two).
  int wsr_chains4;
  // Session 15: variant 10 stores its outputs from registers, no staging (the default; GLM5RT_MLA_WSR_DIRECT=0: off).
  int wsr_direct;
  // Session 17 (variant 14 only): 0 = one CTA per work item (token, split, head group); else the grid size, each CTA
  // taking items blockIdx.x, + grid_ctas, ... in turn (launch_grid caps the grid at it).
  int grid_ctas;
};

// The records row t reads: its pool's base at the launch's layer and that pool's slot count. Without a pool
// table every row reads a.cache. A bad table entry gives num_slots = 0 (every index cleaned to -1: the row
// attends to nothing) and a harmless base (the zero-byte cp.async of an unused entry still names it).
struct RowCache {
  const uint8_t* base;
  int64_t num_slots;
};
__device__ __forceinline__ RowCache row_cache(const KernelArgs& a, int t) {
  if (a.pools == nullptr) return RowCache{a.cache, a.num_slots};
  const int pi = __ldg(a.row_pool + t);
  const uint8_t* dummy = reinterpret_cast<const uint8_t*>(a.q);
  if (pi < 0 || pi >= a.num_pools) return RowCache{dummy, 0};
  const MlaPool* pool = a.pools + pi;
  const uint8_t* b = static_cast<const uint8_t*>(pool->base);
  const int64_t n = pool->num_slots;
  b += static_cast<int64_t>(a.pool_layer) * pool->layer_bytes;
  if (b == nullptr || n < 1 || (reinterpret_cast<uintptr_t>(b) & 15u) != 0) return RowCache{dummy, 0};
  return RowCache{b, n};
}

inline constexpr int kTileTokens = 32;
// A split's indices are staged in shared memory once, at the start (so the gathers never wait on an index
// load); the plan keeps tiles_per_split * 32 <= kMaxSplitEntries.
inline constexpr int kMaxSplitEntries = 2048;
inline constexpr int kStgStride = kMlaLatentDim + 4;  // floats per head in the epilogue staging
inline constexpr float kLn2 = 0.69314718055994531f;

// Prologue pieces every kernel shares. The grid is T * nsplit * (H / HC) CTAs, the head group fastest:
// blockIdx.x = (t * nsplit + split) * (H / HC) + hg.
struct CtaPlace {
  int hg, split, t;
};
// (Session 17: variant 14's CTAs may take several such places in turn, "work items": place_of(item).) groups: the
// head groups per token (num_heads / HC).
__device__ __forceinline__ CtaPlace place_in(int bid, int groups, int nsplit) {
  const int hg = bid % groups;
  bid /= groups;
  return CtaPlace{hg, bid % nsplit, bid / nsplit};
}
template <int HC>
__device__ __forceinline__ CtaPlace place_of(const KernelArgs& a, int bid) {
  return place_in(bid, a.num_heads / HC, a.nsplit);
}
template <int HC>
__device__ __forceinline__ CtaPlace cta_place(const KernelArgs& a) {
  return place_of<HC>(a, blockIdx.x);
}

// Session 8: every main kernel may be launched as a programmatic dependent of the previous kernel in its stream
// (KernelArgs::pdl), so that its launch and CTA placement overlap that kernel's tail (measured on the H200: 1-4%
// of a call at T <= 8, docs/PERFORMANCE.md "Session 8"). It must then wait here, before its first global read
// (q, indices, lengths, the pool table, the records: a predecessor may be writing them) and its first global
// write (the partials and counters a previous call's combine may still be reading). A no-op after a plain launch
// and below sm_90.
__device__ __forceinline__ void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Session 15: the T=1 timeline probe (SparseMlaParams::debug_timeline; benchmarks only). A CTA's slots:
// 0 entry, 1 past the PDL wait, 2 the producer's first cleaned index, 3 step 0's records landed (consumer warp 0),
// 4 step 0's GEMM1 done (warp 0), 5 all consumers past their last GEMM2, 6 outputs staged, 7 outputs stored (issued);
// 8 + s: step s's records landed (warp 0), s < 8; session 16: for splits of at most 4 steps, 12 + s: step s's
// records landed as the first producer thread sees them.
// (The chunked combine stamps its blocks with the same helper, `slots` per block.)
inline constexpr int kTimelineSlots = 16;
__device__ __forceinline__ unsigned long long globaltimer_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// (The CTA's index is read after the null test: read before it, variant 10's sm_90 code changes.)
__device__ __forceinline__ void timeline_stamp(unsigned long long* tl, int slot, int slots = kTimelineSlots) {
  if (tl == nullptr) return;
  tl[static_cast<int64_t>(blockIdx.x) * slots + slot] = globaltimer_now();
}

// Lets the combine kernel (a programmatic dependent launch, when there are splits) be launched once every
// CTA of this grid is resident; it waits for this grid's completion before reading anything.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The split's entries of row t in the 16-token-step kernels (pipelined, warp-specialized, variant 7):
// [first, first + cnt) of the row, the plan's tiles_per_split 32-token tiles clipped to the row's length,
// in nsteps steps of BT tokens.
struct SplitSpan {
  int first, cnt, nsteps;
};
template <int BT>
__device__ __forceinline__ SplitSpan split_span(const KernelArgs& a, int t, int split) {
  int len = a.topk;
  if (a.lengths != nullptr) len = min(max(__ldg(a.lengths + t), 0), a.topk);
  const int first = split * a.tiles_per_split * kTileTokens;
  const int cnt = max(min(len, first + a.tiles_per_split * kTileTokens) - first, 0);
  return SplitSpan{first, cnt, (cnt + BT - 1) / BT};
}

// The split's indices -> shared memory s_idx[0, entries), cleaned (-1 = unused: past the length, negative,
// outside the pool); every thread of the CTA (NTHREADS) takes part; the caller places the barrier.
template <int NTHREADS>
__device__ __forceinline__ void stage_split_indices(int* s_idx, const int32_t* row_idx, const SplitSpan& sp,
                                                    int entries, int64_t num_slots, int tid) {
#pragma unroll 4
  for (int i = tid; i < entries; i += NTHREADS) {
    const int pos = sp.first + i;
    const int v = i < sp.cnt ? __ldg(row_idx + pos) : -1;
    s_idx[i] = (v >= 0 && v < num_slots) ? v : -1;
  }
}

// Scores as C fragments with tokens on the MMA M side (lane (g, t): rows g / g + 8 = two tokens, columns 2t / 2t + 1 =
// two heads) scaled to base 2, the tokens not used (ok0: row g's, ok1: row g + 8's) -inf; mx0 / mx1: the two heads'
// maxima over the 16 rows (this lane's two, then the eight g lanes). Variants 1 and 16.
__device__ __forceinline__ void mask_scores_head_max(float (&c)[4], bool ok0, bool ok1, float scale_log2, float& mx0,
                                                     float& mx1) {
  constexpr float kNegInf = -__builtin_huge_valf();
  c[0] = ok0 ? c[0] * scale_log2 : kNegInf;
  c[1] = ok0 ? c[1] * scale_log2 : kNegInf;
  c[2] = ok1 ? c[2] * scale_log2 : kNegInf;
  c[3] = ok1 ? c[3] * scale_log2 : kNegInf;
  mx0 = fmaxf(c[0], c[2]);
  mx1 = fmaxf(c[1], c[3]);
#pragma unroll
  for (int off = 4; off < 32; off <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
  }
}

// Acc[..][..][4] = 0: the O^T accumulators before the first step.
template <int MT, int NT>
__device__ __forceinline__ void zero_acc(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
}

template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint32_t fp8x2_to_bf16x2(uint32_t two, float scale) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  return mma::pack_bf16x2(f.x * scale, f.y * scale);
}

// One 16-byte chunk of a bf16 tile row from a raw 656-byte FP8 record: chunks 0..63 are 8 latent values
// (e4m3 x the scale of their 128-value block), chunks 64..71 the bf16 rope copied.
__device__ __forceinline__ uint4 dequant_chunk(const uint8_t* rec, int col) {
  uint4 o;
  if (col < 64) {
    const uint2 v = *reinterpret_cast<const uint2*>(rec + col * 8);
    const float s = *reinterpret_cast<const float*>(rec + kMlaFp8ScaleOffset + (col >> 4) * 4);
    o.x = fp8x2_to_bf16x2(v.x, s);
    o.y = fp8x2_to_bf16x2(v.x >> 16, s);
    o.z = fp8x2_to_bf16x2(v.y, s);
    o.w = fp8x2_to_bf16x2(v.y >> 16, s);
  } else {
    o = *reinterpret_cast<const uint4*>(rec + kMlaFp8RopeOffset + (col - 64) * 16);
  }
  return o;
}

// Chunk c of a tile's dequantization (72 chunks a row): row c / 72 of the raw tile (rows of RAW_ROW bytes)
// -> 16 bytes of the bf16 tile (rows of ROW bytes). The kernels differ only in how they deal out the c.
template <int RAW_ROW, int ROW>
__device__ __forceinline__ void dequant_tile_chunk(const uint8_t* raw, uint8_t* tile, int c) {
  const int r = c / 72, col = c - r * 72;
  *reinterpret_cast<uint4*>(tile + r * ROW + col * 16) = dequant_chunk(raw + r * RAW_ROW, col);
}

// A cache record of either format in 16-byte chunks (bf16: 72, FP8: 41) and bytes.
template <bool FP8>
inline constexpr int kRecordChunks = FP8 ? kMlaFp8RecordBytes / 16 : kMlaBf16RecordBytes / 16;
template <bool FP8>
inline constexpr int kRecordBytes = FP8 ? kMlaFp8RecordBytes : kMlaBf16RecordBytes;

// One 16-byte cp.async with the tile gathers' L2 prefetch hint (256 / 128 bytes, or 0: none).
template <int L2_HINT>
__device__ __forceinline__ void cp_async_16_hint(uint32_t dst, const void* src, int src_bytes) {
  if constexpr (L2_HINT == 256)
    mma::cp_async_16(dst, src, src_bytes);
  else if constexpr (L2_HINT == 128)
    mma::cp_async_16_l2_128(dst, src, src_bytes);
  else
    mma::cp_async_16_nohint(dst, src, src_bytes);
}

// Chunk c of a tile gather (round 1, the pipelined and the warp-specialized kernels): 16-byte column
// c % chunks of the record of slot s_idx[first + c / chunks] -> row c / chunks of the tile at dst0 (rows of DST_ROW
// bytes). An unused entry (-1) copies 0 bytes from a harmless address, so cp.async zero-fills the chunk: V
// must stay finite (P is 0 there, and 0 * NaN would poison O). L2_HINT: the copy's L2 prefetch in bytes
// (256: round 1; 128: the bf16 records of the later kernels; 0: none, their FP8 records).
template <bool FP8, int DST_ROW, int L2_HINT>
__device__ __forceinline__ void gather_chunk(uint32_t dst0, const int* s_idx, int first, const uint8_t* base,
                                             int c) {
  constexpr int kChunks = kRecordChunks<FP8>;
  const int r = c / kChunks, col = c - r * kChunks;
  const int idx = s_idx[first + r];
  const bool ok = idx >= 0;
  const uint8_t* src = ok ? base + static_cast<int64_t>(idx) * kRecordBytes<FP8> + col * 16 : base;
  cp_async_16_hint<L2_HINT>(dst0 + r * DST_ROW + col * 16, src, ok ? 16 : 0);
}

// A whole tile gather by kThreads threads, one record row per group of kTPR = kThreads / kRows consecutive
// threads (session 9): thread j of row r's group copies the 16-byte columns j, j + kTPR, j + 2 kTPR, ... of the
// record of slot s_idx[r] to dst_of(r, column) (unused entries (-1) zero-filled from a harmless address, as
// gather_chunk). Why not gather_chunk per chunk: that pays a division, an index load and a 64-bit multiply for each
// of a thread's 5-9 chunks; the sm_90 SASS of variant 7's loop spent ~190 of its 539 instructions per warp and step
// there. Here each thread loads one index and forms one address per step, and the columns are immediate offsets.
// kTPR must be a power of two so that the column range of each unrolled copy is known at compile time.
template <bool FP8, int kThreads, int kRows, int L2_HINT, class DstOf>
__device__ __forceinline__ void gather_rows(const int* s_idx, const uint8_t* base, int tid, const DstOf& dst_of) {
  constexpr int kTPR = kThreads / kRows;
  static_assert(kTPR * kRows == kThreads && (kTPR & (kTPR - 1)) == 0, "gather_rows: rows x power-of-two threads");
  constexpr int kChunks = kRecordChunks<FP8>;
  const int r = tid / kTPR, j = tid & (kTPR - 1);
  const int idx = s_idx[r];
  const bool ok = idx >= 0;
  const uint8_t* src = (ok ? base + static_cast<int64_t>(idx) * kRecordBytes<FP8> : base) + j * 16;
  const int bytes = ok ? 16 : 0;
#pragma unroll
  for (int k = 0; k < (kChunks + kTPR - 1) / kTPR; ++k) {
    const int col = j + k * kTPR;
    if (kChunks % kTPR != 0 && col >= kChunks) break;  // only in the last round
    cp_async_16_hint<L2_HINT>(dst_of(r, col), src + k * kTPR * 16, bytes);
  }
}

// The cp.async ring of NST slots of the pipelined kernel and variant 7. issue(step, slot) gathers one step;
// every step opens one commit group (empty past the end), so that wait_group<NST - 2> always means "step
// it has landed". ring_fill: steps 0 .. NST-2 into slots 0 .. NST-2, before the loop.
template <int NST, class Issue>
__device__ __forceinline__ void ring_fill(const Issue& issue, int nsteps) {
#pragma unroll
  for (int s = 0; s < NST - 1; ++s) {
    if (s < nsteps) issue(s, s);
    mma::cp_async_commit();
  }
}
// Start of step it (ring slot `slot`): wait for its copies, barrier (A), then reuse the slot step it-1 read
// for step it + NST - 1.
template <int NST, class Issue>
__device__ __forceinline__ void ring_next(const Issue& issue, int it, int slot, int nsteps) {
  cp_async_wait_group<NST - 2>();
  __syncthreads();  // (A) step it's slot visible to all; everyone is done with step it-1
  const int nxt = it + NST - 1;
  if (nxt < nsteps) issue(nxt, slot == 0 ? NST - 1 : slot - 1);
  mma::cp_async_commit();
}

// Partial scores of a 16-token step, [kq][head][16 tok] fp32; the token is XORed with 8 on heads 2..3 mod 4
// so that the GEMM1 stores (lanes: 4 even heads x 8 tokens) hit two bank groups instead of one.
template <int NH>
__device__ __forceinline__ int spart_off(int kq, int h, int tok) {
  return (kq * NH + h) * 16 + (tok ^ ((h & 2) << 2));
}

// Online softmax of one 16-token step for NH heads, done by NH * TPH threads: thread (head sh, sub ssub)
// owns tokens ssub * (16 / TPH) + j. Sums the KQ k-split partial scores, masks unused entries (sidx < 0),
// reduces the step max over the head's TPH consecutive lanes, writes P[head][tok] (bf16, row stride
// p_row elements) and the rescale factor alpha[head], and updates the running max / this thread's share
// of the running sum (base-2 units).
// Its first half, shared with variant 7's softmax_step_fp8reg: this thread's kTokPT scaled scores sv (-inf
// for unused entries), the step's max over the head's TPH threads, the new running max m_run, the value mu
// to subtract from the scores and the rescale factor al of the old sums.
template <int NH, int KQ, int TPH>
__device__ __forceinline__ void softmax_scores(const float* spart, const int* sidx, float scale_log2, int sh,
                                               int ssub, float (&sv)[16 / TPH], float& m_run, float& mu,
                                               float& al) {
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int kTokPT = 16 / TPH;
  float mx = kNegInf;
#pragma unroll
  for (int j = 0; j < kTokPT; ++j) {
    const int tok = ssub * kTokPT + j;
    float v = 0.f;
#pragma unroll
    for (int k2 = 0; k2 < KQ; ++k2) v += spart[spart_off<NH>(k2, sh, tok)];
    sv[j] = sidx[tok] >= 0 ? v * scale_log2 : kNegInf;
    mx = fmaxf(mx, sv[j]);
  }
#pragma unroll
  for (int off = 1; off < TPH; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const float mn = fmaxf(m_run, mx);
  // A head with nothing valid so far keeps max -inf; subtract 0 then so that exp2 gives 0, not NaN.
  mu = mn == kNegInf ? 0.f : mn;
  al = exp2f(m_run - mu);
  m_run = mn;
}
template <int NH, int KQ, int TPH>
__device__ __forceinline__ void softmax_step(const float* spart, const int* sidx, float scale_log2, int sh,
                                             int ssub, __nv_bfloat16* p_s, int p_row, float* alpha_s,
                                             float& m_run, float& l_run) {
  constexpr int kTokPT = 16 / TPH;
  float sv[kTokPT], mu, al;
  softmax_scores<NH, KQ, TPH>(spart, sidx, scale_log2, sh, ssub, sv, m_run, mu, al);
  float ps = 0.f;
#pragma unroll
  for (int j = 0; j < kTokPT; ++j) {
    const __nv_bfloat16 pb = __float2bfloat16(exp2f(sv[j] - mu));
    ps += __bfloat162float(pb);  // sum the rounded probabilities: exactly what GEMM2 multiplies V with
    p_s[sh * p_row + ssub * kTokPT + j] = pb;
  }
  l_run = l_run * al + ps;
  if (ssub == 0) alpha_s[sh] = al;
}

// Q^T as GEMM1 B fragments for NTW n8 head tiles (heads q_heads + nt * 8 + g, rows of 576 bf16) over KSTEPS
// k16 steps starting at k-step ks0.
template <int KSTEPS, int NTW>
__device__ __forceinline__ void load_q_fragments(uint32_t (&qf)[KSTEPS][NTW][2], const __nv_bfloat16* q_heads,
                                                 int ks0, int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt) {
    const uint32_t* qrow = reinterpret_cast<const uint32_t*>(q_heads + (nt * 8 + g) * kMlaQkDim);
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      const int k0 = (ks0 + ks) * 16;
      qf[ks][nt][0] = __ldg(qrow + (k0 + 2 * tq) / 2);
      qf[ks][nt][1] = __ldg(qrow + (k0 + 8 + 2 * tq) / 2);
    }
  }
}

// GEMM1 partial of a 16-token step, in pieces (round 3 measured a variant that interleaved them with GEMM2
// of the previous step: 0-9% slower, removed): S^T[16 tok x NTW*8 heads] over this warp's KSTEPS k16 steps
// (k-slice kq), K from the bf16 tile through ldmatrix, Q^T from registers; stored to
// spart[kq][h_first + ...][tok] for the softmax threads to sum. Two independent accumulator chains in
// flight (two head tiles, or for one head tile two chains over alternating k-steps).
template <int NTW>
struct QkAcc {
  static constexpr int kChains = NTW == 1 ? 2 : 1;
  float s[kChains][NTW][4];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int c2 = 0; c2 < kChains; ++c2)
#pragma unroll
      for (int nt = 0; nt < NTW; ++nt) s[c2][nt][0] = s[c2][nt][1] = s[c2][nt][2] = s[c2][nt][3] = 0.f;
  }
};
__device__ __forceinline__ uint32_t qk_a_base(uint32_t tile_addr, int row_bytes, int kq, int ksteps, int lane) {
  return tile_addr + (lane & 15) * row_bytes + (lane >> 4) * 16 + kq * ksteps * 32;
}
template <int KSTEPS, int NTW>
__device__ __forceinline__ void qk_kstep(QkAcc<NTW>& q, const uint32_t (&qf)[KSTEPS][NTW][2], uint32_t a_base,
                                         int ks) {
  uint32_t af[4];
  mma::ldmatrix_x4(af, a_base + ks * 32);
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt)
    mma::mma_bf16_16816(q.s[ks % QkAcc<NTW>::kChains][nt], af, qf[ks][nt][0], qf[ks][nt][1]);
}
template <int NH, int NTW>
__device__ __forceinline__ void qk_store(const QkAcc<NTW>& q, float* spart, int kq, int h_first, int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt) {
    const int h = h_first + nt * 8 + 2 * tq;
    float v[4] = {q.s[0][nt][0], q.s[0][nt][1], q.s[0][nt][2], q.s[0][nt][3]};
    if constexpr (QkAcc<NTW>::kChains == 2) {
      v[0] += q.s[1][nt][0];
      v[1] += q.s[1][nt][1];
      v[2] += q.s[1][nt][2];
      v[3] += q.s[1][nt][3];
    }
    spart[spart_off<NH>(kq, h, g)] = v[0];
    spart[spart_off<NH>(kq, h + 1, g)] = v[1];
    spart[spart_off<NH>(kq, h, g + 8)] = v[2];
    spart[spart_off<NH>(kq, h + 1, g + 8)] = v[3];
  }
}
template <int NH, int KSTEPS, int NTW>
__device__ __forceinline__ void qk_partial_step(const uint32_t (&qf)[KSTEPS][NTW][2], uint32_t tile_addr,
                                                int row_bytes, int kq, int h_first, int lane, float* spart) {
  QkAcc<NTW> q;
  q.zero();
  const uint32_t a_base = qk_a_base(tile_addr, row_bytes, kq, KSTEPS, lane);
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) qk_kstep(q, qf, a_base, ks);
  qk_store<NH>(q, spart, kq, h_first, lane);
}

// GEMM2 of a 16-token step, in pieces: O^T[d0 .. d0 + 16 MT) x NT*8 heads] = alpha * O^T + V^T P^T. V^T comes
// from the bf16 tile (rows of row_bytes, token r at tile_addr + r * row_bytes) through ldmatrix.trans, P^T
// from P[head][tok] (rows of p_row_bytes). Once the maxima settle most steps change no head's max
// (alpha = exp2(0) = 1 exactly), so the warp skips the multiplies when none of its heads moved.
template <int MT, int NT>
__device__ __forceinline__ void pv_rescale(float (&acc)[MT][NT][4], const float* alpha_s, int lane) {
  const int tq = lane & 3;
  float al[NT][2];
  bool moved = false;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    al[nt][0] = alpha_s[nt * 8 + 2 * tq];
    al[nt][1] = alpha_s[nt * 8 + 2 * tq + 1];
    moved |= al[nt][0] != 1.f || al[nt][1] != 1.f;
  }
  if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        acc[mt][nt][0] *= al[nt][0];
        acc[mt][nt][1] *= al[nt][1];
        acc[mt][nt][2] *= al[nt][0];
        acc[mt][nt][3] *= al[nt][1];
      }
  }
}
template <int NT>
__device__ __forceinline__ void pv_load_p(uint32_t (&bfr)[NT][2], uint32_t p_addr, int p_row_bytes, int lane) {
  if constexpr (NT == 1) {
    uint32_t r2[2];
    mma::ldmatrix_x2(r2, p_addr + (lane & 7) * p_row_bytes + ((lane >> 3) & 1) * 16);
    bfr[0][0] = r2[0];
    bfr[0][1] = r2[1];
  } else {
#pragma unroll
    for (int nt = 0; nt < NT; nt += 2) {
      uint32_t r4[4];
      mma::ldmatrix_x4(r4, p_addr + (nt * 8 + (lane & 7) + ((lane >> 4) << 3)) * p_row_bytes + ((lane >> 3) & 1) * 16);
      bfr[nt][0] = r4[0];
      bfr[nt][1] = r4[1];
      bfr[nt + 1][0] = r4[2];
      bfr[nt + 1][1] = r4[3];
    }
  }
}
template <int MT, int NT>
__device__ __forceinline__ void pv_mt(float (&acc)[MT][NT][4], const uint32_t (&bfr)[NT][2], uint32_t tile_addr,
                                      int row_bytes, int d0, int mt, int lane) {
  uint32_t af[4];
  mma::ldmatrix_x4_trans(af, tile_addr + ((lane & 7) + ((lane >> 4) << 3)) * row_bytes +
                                 (d0 + mt * 16 + ((lane >> 3) & 1) * 8) * 2);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) mma::mma_bf16_16816(acc[mt][nt], af, bfr[nt][0], bfr[nt][1]);
}
template <int MT, int NT>
__device__ __forceinline__ void pv_step(float (&acc)[MT][NT][4], const float* alpha_s, uint32_t p_addr,
                                        int p_row_bytes, uint32_t tile_addr, int row_bytes, int d0, int lane) {
  pv_rescale(acc, alpha_s, lane);
  uint32_t bfr[NT][2];
  pv_load_p(bfr, p_addr, p_row_bytes, lane);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) pv_mt(acc, bfr, tile_addr, row_bytes, d0, mt, lane);
}

// Epilogue, part 0 (16-token-step kernels): head h's softmax sum, the TPH threads' shares of it (shuffle
// lanes 1 .. TPH-1 apart) added up; its thread ssub == 0 writes 1 / l and the base-2 LSE (0 and -inf for a
// head that saw no valid entry).
template <int TPH>
__device__ __forceinline__ void finish_softmax_sums(float l_run, float m_run, int ssub, int h, float* inv_l_s,
                                                    float* lse_s) {
  constexpr float kNegInf = -__builtin_huge_valf();
  float l = l_run;
#pragma unroll
  for (int off = 1; off < TPH; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
  if (ssub == 0) {
    inv_l_s[h] = l > 0.f ? 1.f / l : 0.f;
    lse_s[h] = l > 0.f ? m_run + log2f(l) : kNegInf;
  }
}

// Epilogue, part 1: this warp's O^T accumulators (output dims d0 + 16 mt + {g, g + 8}, heads h_base + nt * 8
// + {2 tq, 2 tq + 1}), normalised by 1 / l, into the fp32 staging area stg[head][kStgStride].
template <int MT, int NT>
__device__ __forceinline__ void stage_outputs(const float (&acc)[MT][NT][4], const float* inv_l_s, float* stg,
                                              int h_base, int d0, int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int h = h_base + nt * 8 + 2 * tq;
    const float s0 = inv_l_s[h], s1 = inv_l_s[h + 1];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int d = d0 + mt * 16 + g;
      stg[h * kStgStride + d] = acc[mt][nt][0] * s0;
      stg[(h + 1) * kStgStride + d] = acc[mt][nt][1] * s1;
      stg[h * kStgStride + d + 8] = acc[mt][nt][2] * s0;
      stg[(h + 1) * kStgStride + d + 8] = acc[mt][nt][3] * s1;
    }
  }
}

// A 16-byte L2 load (ld.global.cg) the compiler keeps where it is written: the combines issue every partial
// load before the barriers that compute the weights, and nvcc sinks ordinary read-only loads past
// bar.sync to their first use (measured in the PTX: one load, then its FMAs, then the next load).
__device__ __forceinline__ float4 ld_cg_pinned(const float* p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}
// The bf16 form (combine = 5): 4 partial values = 8 bytes, kept raw until they are used.
__device__ __forceinline__ uint2 ld_cg_pinned_u2(const void* p) {
  uint2 v;
  asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// Fused combine (SparseMlaParams::combine = 3), after this CTA wrote its split's partial: the CTA that
// finishes last among the nsplit CTAs of (t, head group hg) merges all their partials (L2-resident, read
// with ld.cg) into out / lse. The arrival counter is reset by that CTA, so the next call (or graph replay)
// finds it zero. Partials are small here by the plan (nsplit * HC <= kMlaFusedMaxPartials, enforced by the
// launcher): its loads go out in batches of 16 per thread. Scratch = the free staging area (>= HC * kStgStride
// floats).
template <int HC, int NTHREADS>
__device__ __forceinline__ void fused_combine(const KernelArgs& a, float* scratch, int t, int hg, int tid) {
  __shared__ int s_last;
  __threadfence();  // release: this thread's partial stores before the counter increment below
  __syncthreads();
  const int groups = a.num_heads / HC;
  if (tid == 0) {
    int* ctr = a.counters + static_cast<int64_t>(t) * groups + hg;
    const int prev = atomicAdd(ctr, 1);
    const int last = prev == a.nsplit - 1;
    if (last) atomicExch(ctr, 0);  // every other CTA of the group has already counted itself
    s_last = last;
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();  // acquire: the other CTAs' partials (they fenced before counting)
  const int64_t rows = static_cast<int64_t>(a.num_tokens) * a.num_heads;
  const int64_t row0 = static_cast<int64_t>(t) * a.num_heads + hg * HC;
  const int ns = a.nsplit;
  // This thread's (head, 4-dim) items (kItems of them, up to kMaxNs splits each: compile-time bounds from
  // nsplit * HC <= kMlaFusedMaxPartials) in batches of at most 16 loads in flight: the first batch is
  // issued under the LSE loads and the weights (8-head CTAs of 192 threads with 4 splits: 6 items x 4 loads,
  // two batches; with 2 splits: one); 16 float4 = 64 registers, so that the 16-head kernels'
  // 168-register budget (two CTAs per SM) holds without spills on sm_120.
  constexpr int kMaxNs = kMlaFusedMaxPartials / HC;
  constexpr int kItems = (HC * 128 + NTHREADS - 1) / NTHREADS;
  constexpr int kBatchItems = 16 / kMaxNs < kItems ? 16 / kMaxNs : kItems;
  constexpr int kBatches = (kItems + kBatchItems - 1) / kBatchItems;
  float4 x[kBatchItems][kMaxNs];
  auto load_batch = [&](int b) {
#pragma unroll
    for (int j = 0; j < kBatchItems; ++j) {
      const int c = tid + (b * kBatchItems + j) * NTHREADS;
      const int h = c >> 7, d = (c & 127) * 4;
#pragma unroll
      for (int s = 0; s < kMaxNs; ++s)
        x[j][s] = c < HC * 128 && s < ns ? ld_cg_pinned(a.part_o + (s * rows + row0 + h) * kMlaLatentDim + d)
                                          : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  load_batch(0);
  float* w_s = scratch;               // [HC][ns] weights
  float* fin_s = scratch + HC * ns;   // [HC] 1 / sum of weights (0 for an empty row)
  for (int c = tid; c < HC * ns; c += NTHREADS) {
    const int h = c / ns, s = c - h * ns;
    w_s[c] = __ldcg(a.part_lse + s * rows + row0 + h);
  }
  __syncthreads();
  if (tid < HC) {
    float m = -__builtin_huge_valf();
    for (int s = 0; s < ns; ++s) m = fmaxf(m, w_s[tid * ns + s]);
    const float mu = m == -__builtin_huge_valf() ? 0.f : m;
    float sum = 0.f;
    for (int s = 0; s < ns; ++s) {
      const float ls = w_s[tid * ns + s];
      const float w = ls == -__builtin_huge_valf() ? 0.f : exp2f(ls - mu);
      w_s[tid * ns + s] = w;
      sum += w;
    }
    fin_s[tid] = sum > 0.f ? 1.f / sum : 0.f;
    a.lse[row0 + tid] = sum > 0.f ? (m + log2f(sum)) * kLn2 : -__builtin_huge_valf();
  }
  __syncthreads();
#pragma unroll
  for (int b = 0; b < kBatches; ++b) {
    if (b > 0) load_batch(b);
#pragma unroll
    for (int j = 0; j < kBatchItems; ++j) {
      const int c = tid + (b * kBatchItems + j) * NTHREADS;
      if (c >= HC * 128) break;
      const int h = c >> 7, d = (c & 127) * 4;
      const float inv = fin_s[h];
      float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int s = 0; s < kMaxNs; ++s) {
        const float w = s < ns ? w_s[h * ns + s] : 0.f;
        o.x += w * x[j][s].x;
        o.y += w * x[j][s].y;
        o.z += w * x[j][s].z;
        o.w += w * x[j][s].w;
      }
      uint2 packed;
      packed.x = mma::pack_bf16x2(o.x * inv, o.y * inv);
      packed.y = mma::pack_bf16x2(o.z * inv, o.w * inv);
      *reinterpret_cast<uint2*>(a.out + (row0 + h) * kMlaLatentDim + d) = packed;
    }
  }
}

// The staged fp32 rows of HC heads -> bf16 rows of kMlaLatentDim values at dst (8 values per thread and
// iteration: two float4 loads, one 16-byte store).
template <int HC, int NTHREADS>
__device__ __forceinline__ void store_staged_bf16(const float* stg, __nv_bfloat16* dst, int tid) {
  for (int c = tid; c < HC * 64; c += NTHREADS) {
    const int h = c >> 6, d = (c & 63) * 8;
    const float4 x = *reinterpret_cast<const float4*>(stg + h * kStgStride + d);
    const float4 y = *reinterpret_cast<const float4*>(stg + h * kStgStride + d + 4);
    uint4 o;
    o.x = mma::pack_bf16x2(x.x, x.y);
    o.y = mma::pack_bf16x2(x.z, x.w);
    o.z = mma::pack_bf16x2(y.x, y.y);
    o.w = mma::pack_bf16x2(y.z, y.w);
    *reinterpret_cast<uint4*>(dst + static_cast<int64_t>(h) * kMlaLatentDim + d) = o;
  }
}

// Epilogue, part 2 (after a barrier that makes the staging complete): the HC heads of group hg of token t
// -> out (bf16) and lse (natural log), or for nsplit > 1 -> the split's fp32 partial and log2 LSE.
template <int HC, int NTHREADS>
__device__ __forceinline__ void write_outputs(const KernelArgs& a, const float* stg, const float* lse_s, int t,
                                              int hg, int split, int tid) {
  const int64_t row0 = static_cast<int64_t>(t) * a.num_heads + hg * HC;  // first (t, head) row of the group
  if (a.nsplit == 1) {
    store_staged_bf16<HC, NTHREADS>(stg, a.out + row0 * kMlaLatentDim, tid);
    if (tid < HC) a.lse[row0 + tid] = lse_s[tid] * kLn2;  // -inf stays -inf
  } else {
    const int64_t prow0 = static_cast<int64_t>(split) * a.num_tokens * a.num_heads + row0;
    if (a.part_bf16) {
      // combine = 5: the normalised partial rounded to bf16 (half the bytes to write and to merge); the
      // split LSE stays fp32.
      __nv_bfloat16* pb = reinterpret_cast<__nv_bfloat16*>(a.part_o);
      store_staged_bf16<HC, NTHREADS>(stg, pb + prow0 * kMlaLatentDim, tid);
    } else {
      for (int c = tid; c < HC * 128; c += NTHREADS) {
        const int h = c >> 7, d = (c & 127) * 4;
        *reinterpret_cast<float4*>(a.part_o + (prow0 + h) * kMlaLatentDim + d) =
            *reinterpret_cast<const float4*>(stg + h * kStgStride + d);
      }
    }
    if (tid < HC) a.part_lse[prow0 + tid] = lse_s[tid];
    // Fused merge: only where it can run (nsplit >= 2, so HC <= 16); the 32-head kernels never compile it
    // (their register budget, e.g. variant 3's 128, stays as it was).
    if constexpr (kMlaFusedMaxPartials / HC >= 2)
      if (a.counters != nullptr) fused_combine<HC, NTHREADS>(a, const_cast<float*>(stg), t, hg, tid);
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail
