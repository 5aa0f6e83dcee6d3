// Variant 14 (session 11): 64 heads per CTA in four independent warp pairs, the FlashAttention-2 layout per pair.
// Why: variants 10 / 11 spend their time in per-step rendezvous, not in the tensor pipe (session 7: 0.5 eligible
// warps per scheduler, ~30% of the mma.sync rate): every warp of a 16- or 32-head group waits each 16-token step for
// all four or eight k parts of the scores (and variant 11 for every owner's P as well), and each of those warps runs
// only 34 MMAs per step between the waits. Here
//   pair hb (warps 2 hb, 2 hb + 1) owns heads 16 hb .. 16 hb + 15; warp kh of the pair
//   GEMM1  S[16 heads x 16 tok] over its k half (latent dims 256 kh .. + 255 and rope dims 512 + 32 kh .. + 31:
//          18 k steps), heads on the MMA M side, Q as A fragments in registers (72 per thread), K through ldmatrix
//          as B (one x4 = both n tiles of a k step), two accumulator chains per n tile;
//   exchange its C fragments with its partner (one float4 pair each way, double-buffered) on the pair's named
//          barrier, the only rendezvous of the step; both add the same two halves (a + b == b + a), so both hold the
//          same scores and run the same online softmax in registers (two shuffles per row max);
//   GEMM2  O[16 heads x 256 dims (half kh)] += P V: P is the C fragment of S (as variant 10), V through
//          ldmatrix.trans; 128 fp32 accumulators per thread.
// Per warp and step: 36 + 32 MMAs between two waits (the slot's "full" mbarrier and the pair barrier); the four pairs
// drift against each other within the ring. One tile slot feeds 64 heads (variants 10 / 11: 32), so a head group's
// records cross L2 -> shared memory once per token instead of twice.
// No producer warp: a ninth warp would put three warps on one SM sub-partition and cap registers at 168 (its 16K
// registers / 96 threads), below Q (72) + O (128) + scores. Step s is copied by pair s % 4 (each warp 8 rows, one bulk
// copy per lane; sm_80: 16-byte cp.async) at the end of its step s - 3, after its GEMM2, once every warp has
// released the slot step s - 4 used (its "empty" mbarrier; only the filling pair waits). The split's indices are
// staged in shared memory by the prologue. Measured on the H200 (docs/PERFORMANCE.md "Session 11"): the refill after
// the exchange instead of after GEMM2 0.94x, two rows by every warp instead of a pair's 0.96x, all warps waiting
// for the slot 0.96x, the next step's GEMM1 beside the softmax 0.90x.
// Shared memory: 4 tile slots (rows padded to 1168 bytes: 4 banks apart, conflict-free ldmatrix), the exchange area,
// the staged indices and the barriers (99,648 bytes of SM120's 101,376). Registers: 254 on sm_90, 255 on sm_80, 255 on
// sm_120 with 12 bytes spilled (outside the loop but for one L1 reload per step in GEMM1). 64 heads per CTA only.
// FP8 records (session 12): each 656-byte record lands in the last 656 bytes of its row (its own "land" mbarrier) and
// the pair that copied step s turns its latent in place into bf16 (f16 since session 29) at the end of its step s - 2
// (wsp_convert_rows; the rope stays where it landed and GEMM1 reads it there), then arrives on "full"; the MMA loop is
// the bf16 one (since session 29 with f16 MMAs on the latent and for P V). H200
// (docs/PERFORMANCE.md "Session 12"): 1.73-1.75x over variant 7 at T=128 and prefill, 1.47x at T=32; 1.21x bf16's
// time. Leaving the rope in place (no divergent copy by lanes 0-7) gained 1.18x; the conversion's math costs nothing
// measurable. Measured and dropped: the conversion one step later (lead 1, 0.78x) or right after the copy (lead 3,
// 0.94x), spread over every warp at the end of a step (0.96x) or before GEMM1 (0.95x), four rows at a time (0.99x,
// spills), the copies by cp.async (0.94x), deferred when its copy has not landed (0.99-1.00x). 99,680 bytes; sm_90 255
// registers (12 / 24 bytes of spill in the prologue / epilogue), sm_80 254, sm_120 255 with 24 / 16 bytes (session 29:
// sm_90 no spill, sm_120 12 bytes in the one-CTA form, none in the persistent one).
// Session 29: the records read raw instead, each warp converting its own K / V operands in registers (variant 7's way;
// code at 1c1546e): 0.83-0.93x, 1.4x the instructions, the conversion repeated by all four pairs (docs/PERFORMANCE.md
// "Session 29"). Kept: the rows converted to f16 instead of bf16 (dequant_chunk_f16: cvt and one packed multiply per
// value pair instead of six instructions; 11 significant bits instead of 8), Q's latent as f16 (q_finish), f16 MMAs on
// the latent and for P V (the rope stays bf16): 1.014-1.033x at every FP8 shape measured; the FP8 unit's sm_90 build
// no longer spills; and Q by 16-byte loads as for bf16 records (q_issue / q_finish): 1.007-1.048x more.
// Session 17, the persistent form (PERSIST, prefill: KernelArgs::grid_ctas caps the grid): a CTA takes work items
// (token, split, head group) in turn with its steps numbered across them, so the ring, the fills and the exchange
// run on at an item's end (the next item's first records land under this item's last steps, its Q loads at its
// start). No CTA-wide staged indices: each warp kept a table of its next items (wsp_build_table) and fetched its next
// four fills' raw indices by cp.async (replaced in session 18, below); the softmax masks by the slots' validity bits; outputs are stored
// from registers. H200 (docs/PERFORMANCE.md "Session 17"): parity at prefill 4096 x 64 with 2048 entries per row,
// 1.12x (bf16) / 1.08x (FP8) at 512: a CTA's ~12 us of start and end falls to ~6 us per item, but the fill (its item
// lookup and index fetch on the filling pair's chain) keeps the step 3-5% slower than the staged form's. Shared memory
// ~99 KB (tables instead of the staged indices); bf16 255 registers (sm_120 8 / 12 bytes spilled), FP8 sm_90 12 / 8.
// Session 18: each warp stages the cleaned indices of all its fills during an item at the end of the item with steps
// before it (wsp_stage_load / wsp_stage_store, a per-warp ring of 32 fills), so a fill reads one shared-memory word as
// the one-CTA form's does; the same transition loads that item's Q and rebuilds the warp's table from it (5 entries:
// the item and the next four with steps); the pair whose fill reaches the next item's first step prefetches its Q and
// index row into L2 (wsp_prefetch_item); the item's start and end read the thread's coordinates afresh (wsp_pos_fresh)
// so that ptxas keeps nothing derived from them across the step loop, whose ldmatrix depth follows its free registers
// (H200, docs/PERFORMANCE.md "Session 18": the persistent step loop level with the one-CTA loop on the same grid, where
// session 17's was 2.5-4.8% slower; prefill 4096 x 64 with 2048 entries 1.02-1.03x over session 17, FP8 1.01x).
// bf16 sm_90 254 registers, no spill; FP8 sm_90 12 / 8 bytes spilled (the fill path); sm_120 bf16 4 / 4.
// Session 20 (docs/PERFORMANCE.md "Session 20"; the item probe put ~7 us of each item outside its steps): bf16 Q by
// 16-byte loads through the warp's exchange slot (q_issue / q_finish), the transition's two round trips overlapped,
// the next item's Q and index rows prefetched into L1 (the launches prefer the largest L1): the time between items
// 7.2 -> 4.7 us, prefill 4096 x 64 289 TFLOP/s (1.02-1.07x over session 19 at 2048 / 512 entries). Measured level
// and kept on branches: the two warps of a sub-partition issuing their GEMM1s in turn (s20-pingpong), GEMM1 in three
// accumulator chains of six per n tile (s20-chains3). sm_120 bf16 persistent form 255 registers without spill.
// Session 21 (docs/PERFORMANCE.md "Session 21"): the preparation's index lookups once per item and the item table
// shifted, not rebuilt (2.82 -> 2.11 us per transition; prefill 1.005-1.02x). Measured and kept on branches: the
// fill's copies from one elected lane (s21-elect, 0.98-0.99x), Q's or the table's work before the outputs' stores
// (s21-loadsfirst, s21-prep2: level or slower). The step sits at a shared-memory knee (s21-diag: +19% bytes 0.86-0.89x,
// -19% V bytes 1.04-1.05x).
// Session 22 (docs/PERFORMANCE.md "Session 22"): bf16 records compute a step's P in the running maxima's frame before
// the step's maxima are known and take a new frame one step later (the speculative softmax: kWspSpecMax), with GEMM2's
// first V fragments loaded before the pair barrier: prefill 4096 x 64 1.016x, T=128 H=64 1.012x.
// Session 25: the one-CTA form as the tail launch of a split last wave (KernelArgs::pdl 2) waits for its predecessor
// only before it exits (prefill 4096 x 64: 3,922.8 -> 3,901.1 us, level with T=4092; docs/PERFORMANCE.md "Session
// 25"). sm_90 SASS: the persistent form identical, the one-CTA form's loop identical (8 instructions more outside it);
// sm_120: the one-CTA bf16 form spills 4 bytes (one lane coordinate, stored in the prologue, reloaded twice outside
// the loop).
#pragma once

#include "kernels/attention/sparse_mla_reg_kernel.cuh"
#include "kernels/attention/sparse_mla_wsg_kernel.cuh"

namespace glm5rt::kernels::sparse_mla_detail {

// The persistent form's per-warp table of items (wsp_build_table) and ring of fill indices (wsp_stage_load): their
// sizes, explained where they are used.
inline constexpr int kWspTab = 5;
inline constexpr int kWspFills = 32;
inline constexpr int kWspCursorBytes = 40;  // sizeof(WspCursor)

// GEMM1's k step j of warp kh (k half): latent dims 256 kh + 16 j (j < 16), rope dims 512 + 32 kh + 16 (j - 16).
__device__ __forceinline__ int wsp_kdim(int kh, int j) {
  return j < 16 ? 256 * kh + 16 * j : kMlaLatentDim + 32 * kh + 16 * (j - 16);
}

// Session 22, the speculative softmax (the step loop of sparse_mla_wsp_kernel, bf16 records): once an item has used
// tokens, a step's P is computed in the frame of the rows' running maxima before the step's own maxima are known, so
// that GEMM2 waits for the exchange's loads, a subtraction, an exp2 and one vote instead of also for two rounds of
// shuffles and the lazy-rescale decision. The step keeps only its lanes' shares of the maxima; the next step reduces
// them under its GEMM1 and moves O and the sums to a new frame by the same lazy rule before its own P (the item's last
// step's frame is taken before its outputs). A step with an exponent above kWspSpecMax in the frame (or nothing used
// before it) takes the exact form instead (P <= 2^64 otherwise: summed over a split still far from fp32's range).
// H200 (docs/PERFORMANCE.md "Session 22"): prefill 4096 x 64 1.016x, T=128 H=64 1.012x; FP8 records 0.97x, so they keep
// the exact form. Checking the frame right after GEMM2's issue instead cost 9% (its shuffles queue behind GEMM2's
// ldmatrix and the vote holds the warp, so the slot's release waits for them).
inline constexpr float kWspSpecMax = 64.f;

// 2^(x - r) as GEMM2's A fragments, rows g / g + 8 in frames r0 / r1, and the rows' sums of the unrounded values (as
// variant 7: unpacking the rounded bf16 pairs cost ~25 instructions per step, session 11's profile; the rounding error
// of P is the same either way). PINNED: the exp2s as volatile asm, which the compiler does not sink past the branch
// that follows (into the only path that uses them), so that their latency overlaps the vote's.
// F16: the fragments as f16 (FP8 records since session 29: p <= 2^8 under the lazy frame), else bf16.
template <bool PINNED, bool F16 = false>
__device__ __forceinline__ void wsp_p_fragments(const float (&x)[2][4], float r0, float r1, uint32_t (&pa)[4],
                                                float& ps0, float& ps1) {
  auto ex = [](float v) {
    if constexpr (PINNED) {
      float y;
      asm volatile("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(v));
      return y;
    } else {
      return fast_exp2(v);
    }
  };
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const float e0 = ex(x[nt][0] - r0), e1 = ex(x[nt][1] - r0);
    const float e2 = ex(x[nt][2] - r1), e3 = ex(x[nt][3] - r1);
    ps0 += e0 + e1;
    ps1 += e2 + e3;
    pa[2 * nt] = F16 ? mma::pack_f16x2(e0, e1) : mma::pack_bf16x2(e0, e1);
    pa[2 * nt + 1] = F16 ? mma::pack_f16x2(e2, e3) : mma::pack_bf16x2(e2, e3);
  }
}

// GEMM2's first n-tile pairs of V loaded before the pair barrier (pv_mtile's vpre; session 22, bf16 records,
// kWspVPre = 2: with the speculative softmax 1.005x at T=128 H=64 and prefill at 512 entries over none, level alone;
// GLM5RT_MLA_WSP_VPRE sets it for an A / B build). Session 24: one pair, with the unit at ptxas register-usage level 2
// (unit_nvcc_options.txt): of the fifteen schedules of levels 2 / 5 / 8 x 0-4 pairs timed, the fastest at T=128 H=64
// (1.014-1.017x over level 5 with 2 pairs in four calls; each alone 0.998x / 1.003-1.005x: ptxas's schedule of the
// step loop, not the pairs as such; docs/PERFORMANCE.md "Session 24").
#ifndef GLM5RT_MLA_WSP_VPRE
#define GLM5RT_MLA_WSP_VPRE 1
#endif
inline constexpr int kWspVPre = GLM5RT_MLA_WSP_VPRE;
// The speculative softmax (GLM5RT_MLA_WSP_SPEC=0: every step in the exact form; an A / B build).
#ifndef GLM5RT_MLA_WSP_SPEC
#define GLM5RT_MLA_WSP_SPEC 1
#endif
inline constexpr bool kWspSpec = GLM5RT_MLA_WSP_SPEC != 0;

// PERSIST (session 17): the persistent form (work items in turn, KernelArgs::grid_ctas), whose shared memory holds
// per-warp item tables and fill indices instead of the CTA's staged indices.
template <bool FP8, bool PERSIST = false>
struct WspCfg {
  static constexpr bool kFP8 = FP8;
  static constexpr bool kPersist = PERSIST;
  static constexpr int kHC = 64;
  static constexpr int kConsumerWarps = 8;  // 4 pairs; pair s % 4 also copies step s
  static constexpr int kThreads = kConsumerWarps * 32;
  static constexpr int kRowsPerWarp = 8;  // copied by each warp of the step's pair
  static constexpr int kMinBlocks = 1;
  static constexpr int kBT = 16;
  static constexpr int kKSteps = 18;    // GEMM1 k16 steps per warp: 16 latent + 2 rope
  static constexpr int kDimTiles = 32;  // GEMM2 n8 tiles per warp: its 256 output dims
  static constexpr int kRowBytes = kMlaBf16RecordBytes + 16;  // 1168: rows 4 banks apart
  // Where a record lands in its row: bf16 at the start; FP8 (656 bytes) in the row's last 656 bytes, so that
  // converting a row in place into the bf16 layout reads and writes that row only (wsp_convert_rows).
  static constexpr int kRecBytes = FP8 ? kMlaFp8RecordBytes : kMlaBf16RecordBytes;
  static constexpr int kLandOff = FP8 ? kRowBytes - kMlaFp8RecordBytes : 0;  // 512
  // Where GEMM1 reads the rope: bf16 rows after the latent; FP8 rows where it landed (wsp_convert_rows leaves it).
  static constexpr int kRopeOff = FP8 ? kLandOff + kMlaFp8RopeOffset : 2 * kMlaLatentDim;  // 1040 / 1024
  static constexpr int kTileBytes = kBT * kRowBytes;          // 18688
  static constexpr int kRing = 4;
  static constexpr int kStageAreaBytes = kRing * kTileBytes;  // 74752
  // Epilogue (one CTA per item): 32 heads at a time (two passes) staged in the ring.
  static_assert(32 * kStgStride * 4 <= kStageAreaBytes, "epilogue staging must fit in the ring");
  // Exchange: [step parity][warp][half][lane] float4 = the warp's two n tiles of C fragments, conflict-free.
  static constexpr int kOffX = kStageAreaBytes;
  static constexpr int kXBytes = 2 * kConsumerWarps * 2 * 32 * 16;  // 16384
  // One CTA per item: the split's cleaned indices, then [64] log2 LSEs.
  static constexpr int kOffIdx = kOffX + kXBytes;
  static constexpr int kOffLse = kOffIdx + kMaxSplitEntries * 4;
  // Persistent (session 17): no staged indices; per warp its item table etc., per slot its rows' validity bits.
  static constexpr int kOffCur = kOffX + kXBytes;
  // Per warp: the cleaned indices of its fills (kWspFills ring entries of 8: wsp_stage_load / _store), its item
  // table (kWspTab WspCursors: wsp_build_table), the sm_80 path's 8 row indices, the current item.
  static constexpr int kCurBuf = 0;
  static constexpr int kCurTab = kCurBuf + kWspFills * 8 * 4;
  static constexpr int kCurScratch = kCurTab + kWspTab * kWspCursorBytes;
  static constexpr int kCurItem = kCurScratch + 32;
  static constexpr int kCurStride = 1264;
  static constexpr int kOffValid = kOffCur + kConsumerWarps * kCurStride;  // [kRing][2]: bit r of byte kh = row 8 kh + r
  // full[kRing], empty[kRing] (FP8: land[kRing])
  static constexpr int kOffBar = PERSIST ? kOffValid + 16 : kOffLse + kHC * 4;
  static constexpr int kSmemBytes = kOffBar + (FP8 ? 3 : 2) * kRing * 8;
  static_assert(kSmemBytes <= 99 * 1024, "SM120 allows at most 99 KB of shared memory per block");
  static_assert(kOffX % 16 == 0 && kOffCur % 16 == 0 && kOffBar % 8 == 0 && 2 * kRing <= 16, "alignment");
  static_assert(kLandOff % 16 == 0 && (!FP8 || kLandOff + kRecBytes == kRowBytes), "an FP8 record ends its row");
};

// Rows row0 .. row0 + kRows - 1 of a step into ring slot `slot`, by one warp; lane r < kRows holds row r's cleaned
// index (-1 = unused), each record lands at kLandOff of its row, and lane 0 writes the rows' validity bits (byte
// `valid` (persistent form), read by the softmax once the slot is full; `scratch`: 8 ints of this warp's, sm_80
// only). sm_90+: lanes 0 .. kRows - 1 issue one bulk copy of the record
// or, for an unused entry, zero-fill it (then fence it from a later bulk copy into the same row, which only they
// issue; an FP8 zero record converts to a zero row); lane 0 arrives with the warp's bytes registered (one arrival
// per filling warp; the phase completes when the bytes have landed, so the copies may follow the arrival). sm_80: the
// rows' 16-byte chunks by cp.async (unused rows zero-filled by the zero-byte copy), each lane arriving when its copies
// land, plus lane 0's plain arrival, which keeps the count uniform.
template <class C, bool kBulk, int kRows>
__device__ __forceinline__ void wsp_fill_rows(uint8_t* smem, int idx, const uint8_t* base, int slot, int row0, int lane,
                                              uint32_t bar, uint8_t* valid, int* scratch) {
  using namespace mma;
  uint8_t* tile = smem + slot * C::kTileBytes;
  const bool act = lane < kRows;
  const uint32_t used = __ballot_sync(0xffffffffu, act && idx >= 0);
  if (valid != nullptr && lane == 0) *valid = static_cast<uint8_t>(used);
  if constexpr (kBulk) {
    uint8_t* row = tile + (row0 + (act ? lane : 0)) * C::kRowBytes + C::kLandOff;
    if (act && idx < 0) {
      const uint4 z = make_uint4(0u, 0u, 0u, 0u);
      for (int c = 0; c < C::kRecBytes / 16; ++c) *reinterpret_cast<uint4*>(row + c * 16) = z;
      fence_proxy_async_smem();
    }
    __syncwarp();  // the other lanes' zero-fills before lane 0's arrival (its release)
    if (lane == 0) mbar_arrive_expect_tx(bar, __popc(used) * C::kRecBytes);
    if (act && idx >= 0)
      bulk_copy_g2s(smem_addr(row), base + static_cast<int64_t>(idx) * C::kRecBytes, C::kRecBytes, bar);
  } else {
    // (gather_chunk reads the rows' indices from shared memory: this warp's scratch.)
    if (act) scratch[lane] = idx;
    __syncwarp();
    const uint32_t dst0 = smem_addr(tile + row0 * C::kRowBytes + C::kLandOff);
    for (int c = lane; c < kRows * kRecordChunks<C::kFP8>; c += 32)
      gather_chunk<C::kFP8, C::kRowBytes, 128>(dst0, scratch, 0, base, c);
    cp_async_mbar_arrive_noinc(bar);
    if (lane == 0) mbar_arrive(bar);
  }
}

// Session 29: one 16-byte chunk (8 values, col < 64) of an f16 latent row from a raw 656-byte FP8 record: e4m3 -> f16
// by cvt (exact), times the block's scale as f16 (one packed multiply per two values, against the earlier bf16 form's
// f16 -> f32, two multiplies and a pack: 2 instructions per pair instead of 6). f16 holds the dequantized latent with
// 11 significant bits (bf16: 8) wherever |value x scale| < 65504 and the scale is a normal f16 (>= 2^-14: a block
// whose largest magnitude is at least 0.027); a smaller scale keeps fewer bits, of values that small.
__device__ __forceinline__ uint4 dequant_chunk_f16(const uint8_t* rec, int col) {
  const uint2 v = *reinterpret_cast<const uint2*>(rec + col * 8);
  const __half2 s = __float2half2_rn(*reinterpret_cast<const float*>(rec + kMlaFp8ScaleOffset + (col >> 4) * 4));
  auto conv = [&](uint32_t two) {
    const uint32_t h = e4m3x2_to_f16x2(two);
    const __half2 r = __hmul2(*reinterpret_cast<const __half2*>(&h), s);
    return *reinterpret_cast<const uint32_t*>(&r);
  };
  return make_uint4(conv(v.x), conv(v.x >> 16), conv(v.y), conv(v.y >> 16));
}

// FP8 records: rows row0 .. row0 + kRows - 1 of ring slot `slot`, landed as raw 656-byte records in the last 656
// bytes of their 1168-byte rows, turned in place into the f16 latent the MMAs read at the row's start (e4m3 x its
// block's scale rounded to f16, dequant_chunk_f16; sessions 12-28: rounded to bf16; unused entries were zero-filled by
// wsp_fill_rows). The rope stays where it landed, bytes 1040 .. 1167 (GEMM1 reads it there: kRopeOff), so only the
// latent moves: one warp, two rows at a time, a row's 64 output chunks (lane: chunks lane and lane + 32) all read
// before any is written (the warp barrier between); no row overlaps another, so nothing else orders them. The writes
// are fenced from the async proxy: a later bulk copy refills the slot.
template <class C, int kRows>
__device__ __forceinline__ void wsp_convert_rows(uint8_t* smem, int slot, int row0, int lane) {
  static_assert(C::kFP8 && kRows % 2 == 0, "FP8 rows, two at a time");
  uint8_t* tile = smem + slot * C::kTileBytes + row0 * C::kRowBytes;
#pragma unroll 1
  for (int r = 0; r < kRows; r += 2) {
    uint4 o[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint8_t* rec = tile + (r + i) * C::kRowBytes + C::kLandOff;
      o[i][0] = dequant_chunk_f16(rec, lane);
      o[i][1] = dequant_chunk_f16(rec, lane + 32);
    }
    __syncwarp();  // every lane's reads of the two records before any write over them
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      uint4* row = reinterpret_cast<uint4*>(tile + (r + i) * C::kRowBytes);
      row[lane] = o[i][0];
      row[lane + 32] = o[i][1];
    }
  }
  mma::fence_proxy_async_smem();
}

// Session 17: a CTA takes work items (token, split, 64-head group; blockIdx.x order) in turn, blockIdx.x, + gridDim.x,
// ..., its steps numbered across them ("global" steps: the ring's slots, phases and fills run on without a break at an
// item's end). Each warp keeps, in shared memory, a table of the items with steps from the current one on (kWspTab in
// all), so that neither the item switch nor a fill needs a global load to find an item (session 17 call 4: every
// instruction in the step loop costs it ldmatrix prefetch depth; 254 registers). Session 18: built by the prologue and
// then at the end of each item with steps from the next one (entry 0 the item being run), it holds five entries: an
// item's fills reach at most three steps past its end, so before the rebuild the table (entry 0 the item just run,
// entry 1 the next one) names every item whose indices the next item's staging needs (kWspTab = 5).
struct WspCursor {
  const int32_t* idx;   // the item's split entries of its row (indices + t * topk + first)
  const uint8_t* base;  // the item's records (row_cache)
  int max_idx;          // the pool's last slot (-1: none; the launcher keeps num_slots <= 2^31)
  int qrow;             // the item's first Q row (t * num_heads + head group * 64)
  int g0;               // the global step of the item's first step
  int nsteps;           // 0: an unused entry (g0, nsteps adjacent: one 8-byte load tests a step)
  int cnt;              // the item's entries
  int item;
};
static_assert(sizeof(WspCursor) == kWspCursorBytes && offsetof(WspCursor, nsteps) == offsetof(WspCursor, g0) + 4 &&
                  WspCfg<false>::kCurItem + 4 <= WspCfg<false>::kCurStride &&
                  WspCfg<false>::kCurStride % 16 == 0 && WspCfg<false>::kCurTab % 8 == 0,
              "WspCfg::kCurStride holds a warp's fill indices, table, scratch and item");

// The cursor of `item` (nsteps 0 past the launch's items).
template <class C, int HC>
__device__ __forceinline__ WspCursor wsp_cursor_at(const KernelArgs& a, int item, int n_items) {
  WspCursor c{};
  c.item = item;
  if (item < n_items) {
    const CtaPlace pl = place_of<HC>(a, item);
    const SplitSpan sp = split_span<C::kBT>(a, pl.t, pl.split);
    const RowCache rc = row_cache(a, pl.t);
    c.idx = a.indices + static_cast<int64_t>(pl.t) * a.topk + sp.first;
    c.base = rc.base;
    c.qrow = pl.t * a.num_heads + pl.hg * HC;
    c.max_idx = static_cast<int>(min(rc.num_slots - 1, static_cast<int64_t>(0x7fffffff)));
    c.nsteps = sp.nsteps;
    c.cnt = sp.cnt;
  }
  return c;
}

// The warp's table from `item` on (its first step is global step g0): the items item, + gridDim.x, ... with steps, up
// to kWspTab of them (entry 0 the current one, or the next with steps), the rest of the table unused. Lane i takes the
// i-th item of each window of 32 (one round trip of loads per window; a window is enough unless most rows have no
// entries). All lanes, converged.
template <class C, int HC>
__device__ __forceinline__ void wsp_build_table(const KernelArgs& a, WspCursor* tab, int item, int g0, int n_items,
                                                int lane) {
  __syncwarp();  // the lanes' earlier reads of the table before it is overwritten
  int found = 0;
  while (found < kWspTab && item < n_items) {
    WspCursor c = wsp_cursor_at<C, HC>(a, item + lane * static_cast<int>(gridDim.x), n_items);
    int incl = c.nsteps;  // the window's steps up to this lane's item (inclusive scan)
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    c.g0 = g0 + incl - c.nsteps;
    const uint32_t with_steps = __ballot_sync(0xffffffffu, c.nsteps > 0);
    const int rank = found + __popc(with_steps & ((1u << lane) - 1u));
    if (c.nsteps > 0 && rank < kWspTab) tab[rank] = c;
    found += __popc(with_steps);
    g0 += __shfl_sync(0xffffffffu, incl, 31);
    item += 32 * static_cast<int>(gridDim.x);
  }
  if (lane >= found && lane < kWspTab) tab[lane].nsteps = 0;
  __syncwarp();
}

// Session 21: the table from its entry 1 on (the next item with steps, nx_item at step nx_g0), as wsp_build_table, by
// shifting the entries one place when all five are in use and the item after the last has steps (every item but the
// CTA's last few, when rows have entries): one cursor computed instead of a window of 32 and their scan (the rebuild
// took 0.70 us of the 4.8 us between 2048-entry items, docs/PERFORMANCE.md "Session 21, call 3"). All lanes.
template <class C, int HC>
__device__ __forceinline__ void wsp_shift_table(const KernelArgs& a, WspCursor* tab, int nx_item, int nx_g0,
                                                int n_items, int lane) {
  __syncwarp();  // the lanes' earlier writes of the table (wsp_build_table's, the prologue's) before these reads
  const int2 last = *reinterpret_cast<const int2*>(&tab[kWspTab - 1].g0);  // (g0, nsteps) of entry 4
  bool shift = last.y > 0;
  WspCursor c{};
  if (shift) {
    c = wsp_cursor_at<C, HC>(a, tab[kWspTab - 1].item + static_cast<int>(gridDim.x), n_items);
    c.g0 = last.x + last.y;
    shift = c.nsteps > 0;
  }
  if (shift) {
    const WspCursor mine = lane + 1 < kWspTab ? tab[lane + 1] : c;
    __syncwarp();  // every lane's read before any write
    if (lane < kWspTab) tab[lane] = mine;
    __syncwarp();
  } else {
    wsp_build_table<C, HC>(a, tab, nx_item, nx_g0, n_items, lane);
  }
}

// The table entry holding global step G, or -1 (past the CTA's last step). Entry 0 first: all but an item's last
// few steps find theirs there, with one 8-byte load.
__device__ __forceinline__ int wsp_find(const WspCursor* tab, int G) {
  const int2 h0 = *reinterpret_cast<const int2*>(&tab[0].g0);
  if (G >= h0.x && G < h0.x + h0.y) return 0;
#pragma unroll 1
  for (int e = 1; e < kWspTab; ++e) {
    const int2 h = *reinterpret_cast<const int2*>(&tab[e].g0);
    if (G >= h.x && G < h.x + h.y) return e;
  }
  return -1;
}

// Session 18: a warp's fills read their indices from shared memory as the one-CTA-per-item form's do, staged for all
// of an item's fills before it starts (by the prologue for the first item, else at the end of the item with steps
// before it; session 17's form fetched four fills' indices at a time inside the step loop, and its fill, on the
// filling pair's chain, stayed twice the old one: calls 7 / 10). The fills of this warp at steps s_from, s_from + 4,
// ... < s_to: every fill from the warp's next one (>= the item's first step + 3: the earlier ones were made during the
// previous item) up to the item's last step + 3 (the fills made during the item), i.e. at most kWspFills (an item has
// at most kMaxSplitEntries / 16 = 128 steps), so entry (S >> 2) % kWspFills of fill step S is free when staged. Lane
// l stages row l % 8 of fills 4 p + l / 8. The loads are plain (issued here, beside Q's: one round trip per item) and
// branch-free (ptxas waits for a global load's scoreboard at the next join), into registers; wsp_stage_store cleans
// and stores them (kWspFills = 32).
static_assert(kWspFills * 4 * 16 >= kMaxSplitEntries && (kWspFills & (kWspFills - 1)) == 0,
              "an item's fills fit in the staging ring");
struct WspStage {
  int v[kWspFills / 4];  // raw index (-1: none)
  int m[kWspFills / 4];  // its item's last slot
};
// (Session 21: the table entry found for one group is kept for the next, 16 steps on and nearly always in the same
// item, so that the lookup's dependent shared-memory loads run once or twice per call instead of eight times: its
// issue took 1.44 us of the 4.8 us between 2048-entry items, docs/PERFORMANCE.md "Session 21, call 3".)
template <class C>
__device__ __forceinline__ void wsp_stage_load(const KernelArgs& a, const WspCursor* tab, WspStage& st, int s_from,
                                               int s_to, int kh, int lane) {
  const int32_t* src[kWspFills / 4];
  int lo = 0, hi = 0, cnt = 0, mx = -1;  // the cached entry's steps [lo, hi), entries and last slot
  const int32_t* row = a.indices;
#pragma unroll
  for (int p = 0; p < kWspFills / 4; ++p) {
    const int S = s_from + 4 * (4 * p + (lane >> 3));
    if (S < s_to && (S < lo || S >= hi)) {
      const int f = wsp_find(tab, S);
      lo = f >= 0 ? tab[f].g0 : 0;
      hi = f >= 0 ? lo + tab[f].nsteps : 0;
      cnt = f >= 0 ? tab[f].cnt : 0;
      mx = f >= 0 ? tab[f].max_idx : -1;
      row = f >= 0 ? tab[f].idx : a.indices;
    }
    const int e = (S - lo) * C::kBT + C::kRowsPerWarp * kh + (lane & 7);
    const bool ok = S < s_to && S >= lo && S < hi && e < cnt;
    src[p] = ok ? row + e : a.indices;
    st.m[p] = ok ? mx : -1;
  }
#pragma unroll
  for (int p = 0; p < kWspFills / 4; ++p) st.v[p] = __ldg(src[p]);
}
template <class C>
__device__ __forceinline__ void wsp_stage_store(int* buf, const WspStage& st, int s_from, int s_to, int lane) {
#pragma unroll
  for (int p = 0; p < kWspFills / 4; ++p) {
    const int S = s_from + 4 * (4 * p + (lane >> 3));
    if (S < s_to) buf[((S >> 2) & (kWspFills - 1)) * 8 + (lane & 7)] = st.v[p] >= 0 && st.v[p] <= st.m[p] ? st.v[p] : -1;
  }
}

// Session 18: prefetches of the Q rows (all 64 heads) and the index row of the item `c`, issued a few steps before
// its start (by the pair whose fill reaches its first step), so that its preparation, where every warp waits for its Q
// fragments and the staging loads, does not wait on DRAM (earlier would be evicted: the gathers stream ~300 MB
// through L2 during a 2048-entry item). Session 20: into L1 (which the gathers, bulk copies, never touch; the
// launcher's carveout leaves the SM's L1 beside the block's 99 KB: 156 KB on an H100 / H200, 28 KB on SM120, where
// the Q rows (72 KB) do not fit and the loads find them in L2 as before). Everything from the table entry: no
// division in the step loop, whose registers it would take (FP8: spills there).
template <int HC>
__device__ __forceinline__ void wsp_prefetch_item(const KernelArgs& a, const WspCursor& c, int kh, int lane) {
  const char* q = reinterpret_cast<const char*>(a.q + static_cast<int64_t>(c.qrow) * kMlaQkDim);
  constexpr int kQLines = HC * kMlaQkDim * 2 / 128;  // 576
#pragma unroll 1
  for (int l = 64 * kh + lane; l < kQLines; l += 64) mma::prefetch_l1(q + l * 128);
  const uintptr_t i0 = reinterpret_cast<uintptr_t>(c.idx) & ~uintptr_t{127};
  const uintptr_t i1 = reinterpret_cast<uintptr_t>(c.idx + c.cnt);
  for (uintptr_t l = i0 + (32 * kh + lane) * 128; l < i1; l += 64 * 128) mma::prefetch_l1(reinterpret_cast<const void*>(l));
}

// Session 18: the persistent form's item start and end read the thread's coordinates afresh (asm volatile),
// so that ptxas neither merges them with the kernel's first reads nor keeps what it derived from those (the warp, the
// row g, a table entry's address, the head-group count's reciprocal, ...) live across the step loop, which uses none of
// them: there every register costs the loop ldmatrix prefetch depth (call 2: 22 registers beside O and Q live at the
// loop's head against the one-CTA form's 12; depth 4 / 4 against 5 / 5, the step 2.5% slower on the same grid).
struct WspPos {
  int warp, lane, hb, kh, g, tq;
};
__device__ __forceinline__ WspPos wsp_pos_fresh() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  const int w = t >> 5, l = t & 31;
  return WspPos{w, l, w >> 1, w & 1, l >> 2, l & 3};
}
__device__ __forceinline__ int wsp_fresh(int v) {
  asm volatile("mov.b32 %0, %0;" : "+r"(v));
  return v;
}
// The launch's work items (token x split x head group), its counts read afresh.
template <int HC>
__device__ __forceinline__ int wsp_items_fresh(const KernelArgs& a) {
  return wsp_fresh(a.num_tokens) * wsp_fresh(a.nsplit) * (wsp_fresh(a.num_heads) / HC);
}
// place_of with the launch's head-group and split counts read afresh (the divisions' set-up not kept across the loop).
template <int HC>
__device__ __forceinline__ CtaPlace wsp_place_fresh(const KernelArgs& a, int item) {
  return place_in(item, wsp_fresh(a.num_heads) / HC, wsp_fresh(a.nsplit));
}
// Session 19: the persistent form's timeline probe (SparseMlaParams::debug_timeline; benchmarks only, a null pointer
// otherwise): per work item its kTimelineSlots entries, 4 per pair, stamped by lane 0 of the pair's warp kh = 0:
// 0 the item's step loop entered, 1 its last step done, 2 its outputs stored (issued), 3 the next item with steps
// prepared (its Q loads issued, its fills' indices staged, the table rebuilt; after an item with steps followed by one).
// Compiled in only with GLM5RT_MLA_ITEM_PROBE defined (bench/sparse_mla/mla_item_timeline.cu's build): even outside
// the step loop, the stamps move ptxas's choices inside it (a few reordered instructions per step on sm_90), so the
// library's kernels carry none.
// Session 21, GLM5RT_MLA_ITEM_PROBE_FINE as well: pairs 2 and 3 stamp nothing, and pair 0 stamps the steps of the
// next item's preparation into slots 8 + kWspFine* (Q's loads issued, the fills' index loads issued, the table rebuilt,
// Q's fragments finished); the preparation ends at kWspStampPrepared as before.
inline constexpr int kWspStampLoop = 0, kWspStampDone = 1, kWspStampStored = 2, kWspStampPrepared = 3;
inline constexpr int kWspFineQIssued = 0, kWspFineIdxIssued = 1, kWspFineTable = 2, kWspFineQDone = 3;
__device__ __forceinline__ void wsp_item_stamp(const KernelArgs& a, int item, const WspPos& ps, int which) {
#if defined(GLM5RT_MLA_ITEM_PROBE)
#if defined(GLM5RT_MLA_ITEM_PROBE_FINE)
  if (ps.hb >= 2) return;
#endif
  if (a.timeline != nullptr && ps.kh == 0 && ps.lane == 0)
    a.timeline[static_cast<int64_t>(item) * kTimelineSlots + 4 * ps.hb + which] = globaltimer_now();
#else
  (void)a, (void)item, (void)ps, (void)which;
#endif
}
__device__ __forceinline__ void wsp_fine_stamp(const KernelArgs& a, int item, const WspPos& ps, int which) {
#if defined(GLM5RT_MLA_ITEM_PROBE) && defined(GLM5RT_MLA_ITEM_PROBE_FINE)
  if (a.timeline != nullptr && ps.hb == 0 && ps.kh == 0 && ps.lane == 0)
    a.timeline[static_cast<int64_t>(item) * kTimelineSlots + 8 + which] = globaltimer_now();
#else
  (void)a, (void)item, (void)ps, (void)which;
#endif
}

template <class C>
__device__ __forceinline__ uint8_t* wsp_warp_area(uint8_t* smem, int warp) {
  return smem + C::kOffCur + warp * C::kCurStride;
}

template <int HC, bool FP8, bool PERSIST>
__global__ void __launch_bounds__(WspCfg<FP8, PERSIST>::kThreads, WspCfg<FP8, PERSIST>::kMinBlocks)
    sparse_mla_wsp_kernel(const KernelArgs a) {
  static_assert(HC == 64, "variant 14 runs 64 heads per CTA");
  using C = WspCfg<FP8, PERSIST>;
  using namespace mma;
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr int NST = C::kRing;
  constexpr bool kBulk = kWsBulkCopies;
  // Session 22: the speculative softmax and GEMM2's V fragments before the pair barrier, for bf16 records (FP8 records
  // measured 0.97x and 0.98-1.00x with them: call 2).
  constexpr bool kSpec = !FP8 && kWspSpec;
  constexpr int VPRE = FP8 ? 0 : kWspVPre;
  extern __shared__ __align__(16) uint8_t smem[];

  // Before any global access (PDL), except in the tail launch of a split last wave (pdl 2, one CTA per item): its
  // predecessor is the bulk grid, which passed its own wait before releasing it, so the call's inputs are ready, and
  // its writes (its tokens' partials or outputs) are none of the bulk grid's; it runs on the SMs the bulk grid frees
  // while the slowest bulk CTAs finish and waits for the bulk grid only before exiting, so that what follows the
  // call still follows all of it (session 24).
  if (PERSIST || a.pdl != 2) wait_for_predecessor();
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int n_items = a.num_tokens * a.nsplit * (a.num_heads / HC);
  allow_dependent_launch();  // the combine kernel (PDL)
  // Pair hb = warp >> 1 (the warps of a pair sit on different SM sub-partitions), k / dims half kh = warp & 1.
  const int hb = warp >> 1, kh = warp & 1;

  // One CTA per item: its split's cleaned indices staged in shared memory (s_idx). Persistent: this warp's fills'
  // cleaned indices, its item table, the slots' validity bits.
  int* s_idx = reinterpret_cast<int*>(smem + C::kOffIdx);
  uint8_t* wsm = smem + C::kOffCur + warp * C::kCurStride;
  int* fbuf = reinterpret_cast<int*>(wsm + C::kCurBuf);
  WspCursor* tab = reinterpret_cast<WspCursor*>(wsm + C::kCurTab);
  int* scratch = reinterpret_cast<int*>(wsm + C::kCurScratch);
  uint8_t* valid = smem + C::kOffValid;
  const uint32_t bar_full = smem_addr(smem + C::kOffBar);
  const uint32_t bar_empty = bar_full + NST * 8;
  // FP8: the copies complete "land"; the slot is "full" once the converting pair has turned it into bf16 rows.
  const uint32_t bar_land = bar_empty + NST * 8;
  const uint32_t bar_copied = FP8 ? bar_land : bar_full;
  if (tid == 0) {
    for (int i = 0; i < NST; ++i) {
      // One arrival per filling warp, the two of a pair (sm_80: + one per lane, see wsp_fill_rows); FP8: one per
      // converting warp on "full".
      mbar_init(bar_copied + i * 8, kBulk ? 2 : 2 * 33);
      if constexpr (FP8) mbar_init(bar_full + i * 8, 2);
      mbar_init(bar_empty + i * 8, C::kConsumerWarps);  // one arrival per warp
    }
  }
  const RowCache rc0 = row_cache(a, place_of<HC>(a, blockIdx.x).t);  // (one CTA per item: its records)
  if constexpr (PERSIST) {
    wsp_build_table<C, HC>(a, tab, blockIdx.x, 0, n_items, lane);
  } else {
    const CtaPlace pl = place_of<HC>(a, blockIdx.x);
    const SplitSpan sp = split_span<C::kBT>(a, pl.t, pl.split);
    stage_split_indices<C::kThreads>(s_idx, a.indices + static_cast<int64_t>(pl.t) * a.topk, sp, sp.nsteps * C::kBT,
                                     rc0.num_slots, tid);
  }

  // Q of the pair's 16 heads of an item over this warp's k half as GEMM1 A fragments: rows g / g + 8, k step j = dims
  // 256 kh + 16 j (j < 16) or 512 + 32 kh + 16 (j - 16). The first item's before the barrier (its latency overlaps the
  // index staging's); persistent: a later item's at the end of the item with steps before it, once its last GEMM1 has
  // freed the fragments (against loading it in the step loop, whose code there cost the loop its ldmatrix depth:
  // session 17). qrow: the item's first Q row (t * num_heads + head group * 64); the coordinates as arguments (the
  // persistent form passes fresh ones).
  auto kdim = [&](int j) { return wsp_kdim(kh, j); };
  uint32_t qa[C::kKSteps][4];
  // Session 20 (bf16 records; FP8 records since session 29): per 32-column block (two k steps) and row one 16-byte load
  // per lane (q_issue, into the block's own fragment registers: qa[2b] row g, qa[2b + 1] row g + 8), then (q_finish)
  // through this warp's 1 KB of
  // the exchange area at the parity of the next step (its partner read it two steps ago and passed the pair barrier
  // since; the next step's exchange overwrites it after its GEMM1) and back by two ldmatrix.x4 into the A-fragment
  // layout: 18 global loads, 18 stores, 18 ldmatrix per thread instead of 72 four-byte loads touching 8 lines each
  // (H200 prefill 4096 x 64, with the transition's overlapped round trips: 1.024x at 2048 entries, 1.035x at 512;
  // docs/PERFORMANCE.md "Session 20, call 2"). Rows 64
  // bytes apart, 16-byte chunk c of row r at c ^ ((r >> 1) & 3): conflict-free stores and ldmatrix. FP8 records took
  // four-byte loads straight into the fragments until session 29 (the wide form spilled in the fill path then, 0.97x);
  // with the f16 rows it fits without spill and measured 1.007-1.048x (T=8 H=64 1.048x, prefill 4096 x 64 1.013x:
  // docs/PERFORMANCE.md "Session 29, call 6"); q_finish converts their latent to f16.
  auto q_issue = [&](int qrow, const WspPos& ps) {
    const uint4* q0 =
        reinterpret_cast<const uint4*>(a.q + (static_cast<int64_t>(qrow) + 16 * ps.hb + ps.g) * kMlaQkDim);
    const uint4* q8 = q0 + 8 * kMlaQkDim / 8;
#pragma unroll
    for (int b = 0; b < C::kKSteps / 2; ++b) {
      const int col = wsp_kdim(ps.kh, 2 * b);  // the block's first column
      const uint4 r0 = __ldg(q0 + col / 8 + ps.tq), r8 = __ldg(q8 + col / 8 + ps.tq);
      qa[2 * b][0] = r0.x, qa[2 * b][1] = r0.y, qa[2 * b][2] = r0.z, qa[2 * b][3] = r0.w;
      qa[2 * b + 1][0] = r8.x, qa[2 * b + 1][1] = r8.y, qa[2 * b + 1][2] = r8.z, qa[2 * b + 1][3] = r8.w;
    }
  };
  auto q_finish = [&](const WspPos& ps, int parity) {
    uint8_t* scr = smem + C::kOffX + (parity * C::kConsumerWarps + ps.warp) * 2 * 32 * 16;
    const int sw = (ps.g >> 1) & 3;  // rows g and g + 8 swizzle alike
    uint4* st0 = reinterpret_cast<uint4*>(scr + ps.g * 64 + ((ps.tq ^ sw) << 4));
    uint4* st8 = reinterpret_cast<uint4*>(scr + (ps.g + 8) * 64 + ((ps.tq ^ sw) << 4));
    // ldmatrix: lanes 8 m .. 8 m + 7 address matrix m's rows (m & 1: rows 8-15, m >> 1: the k step's columns 8-15).
    const int lr = 8 * ((ps.lane >> 3) & 1) + (ps.lane & 7), lsw = (lr >> 1) & 3, lc = ps.lane >> 4;
    const uint32_t ld = smem_addr(scr) + lr * 64;
#pragma unroll
    for (int b = 0; b < C::kKSteps / 2; ++b) {
      __syncwarp();  // the previous block's ldmatrix reads before these stores
      *st0 = make_uint4(qa[2 * b][0], qa[2 * b][1], qa[2 * b][2], qa[2 * b][3]);
      *st8 = make_uint4(qa[2 * b + 1][0], qa[2 * b + 1][1], qa[2 * b + 1][2], qa[2 * b + 1][3]);
      __syncwarp();
      ldmatrix_x4(qa[2 * b], ld + (((0 + lc) ^ lsw) << 4));
      ldmatrix_x4(qa[2 * b + 1], ld + (((2 + lc) ^ lsw) << 4));
    }
    if constexpr (FP8) {
      // FP8 records (session 29): the latent k steps as f16, as the converted rows (exact for |q| < 65504, as
      // variants 7 and 16 assume); the rope stays bf16. (In q_finish, which the prologue runs after its first fills:
      // beside Q's loads, the conversion made the warps wait for them before those fills, T=8 H=64 3.5% slower.)
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) qa[j][r] = bf16x2_to_f16x2(qa[j][r]);
    }
  };
  {
    const WspPos ps0{warp, lane, hb, kh, g, tq};
    if constexpr (PERSIST) {
      if (tab[0].nsteps > 0) {  // the first item with steps
        q_issue(tab[0].qrow, ps0);
        if constexpr (!FP8) q_finish(ps0, 0);  // (FP8: after the first fill, below)
      }
    } else {
      const CtaPlace pl = place_of<HC>(a, blockIdx.x);
      q_issue(pl.t * a.num_heads + pl.hg * HC, ps0);
      if constexpr (!FP8) q_finish(ps0, 0);
    }
  }
  // Global step G is copied by pair G % 4 alone (warp kh: rows 8 kh .. 8 kh + 7), into slot G % NST = hb, at the end
  // of its step G - 3 (steps 0 .. 3: here). (Session 11, call 7: against two rows by every warp, 1.04x at T=128 H=64
  // and prefill 4096 x 64: the per-fill overhead once per pair instead of once per warp; both warps of the filling
  // pair pay the same, so neither waits for the other.) Persistent: the fill's indices are this warp's, staged before
  // its item starts (wsp_stage_load), the first fill's here.
  static_assert(NST == C::kConsumerWarps / 2, "pair fills: one pair per ring slot");
  // This pair's next global fill step (hb + 4 k; filled if the item(s) hold it); FP8: filled_end = 1 + the last step
  // it filled.
  int next_fill = hb;
  int filled_end = 0;
  // The fill of step next_fill from table entry f (persistent) with this lane's cleaned index (lanes < 8: row lane of
  // the warp's 8 rows).
  auto fill = [&](int f, int idx) {
    wsp_fill_rows<C, kBulk, C::kRowsPerWarp>(smem, idx, PERSIST ? tab[f].base : rc0.base, hb, C::kRowsPerWarp * kh,
                                             lane, bar_copied + hb * 8, PERSIST ? valid + 2 * hb + kh : nullptr,
                                             scratch);
    filled_end = next_fill + 1;
    next_fill += NST;
  };
  // The index of the fill of step next_fill (lanes < 8; -1 for the others).
  auto fill_index = [&]() {
    if constexpr (PERSIST)
      return lane < C::kRowsPerWarp ? fbuf[((next_fill >> 2) & (kWspFills - 1)) * 8 + lane] : -1;
    else
      return lane < C::kRowsPerWarp ? s_idx[next_fill * C::kBT + C::kRowsPerWarp * kh + lane] : -1;
  };
  // Persistent: the prologue's fill (step hb) from its own loads; the first item's other fills staged below, a later
  // item's at the end of the item with steps before it.
  int f_first = -1, idx_first = -1;
  if constexpr (PERSIST) {
    f_first = wsp_find(tab, hb);
    WspStage st;
    wsp_stage_load<C>(a, tab, st, hb, f_first >= 0 ? hb + 1 : hb, kh, lane);
    idx_first = lane < C::kRowsPerWarp && st.v[0] >= 0 && st.v[0] <= st.m[0] ? st.v[0] : -1;
    const int s_end = tab[0].nsteps > 0 ? tab[0].nsteps + NST - 1 : 0;  // (the first item with steps starts at step 0)
    wsp_stage_load<C>(a, tab, st, hb + NST, s_end, kh, lane);
    wsp_stage_store<C>(fbuf, st, hb + NST, s_end, lane);
  }
  // FP8 (session 12): the pair that copied step st also converts it, `lead` steps before it is read (at the end of
  // step st - lead; steps below lead in the prologue), its warp kh the rows it copied.
  const int lead = a.wsp_lead;
  int conv_next = hb;  // this pair's next global step to convert
  auto convert = [&]() {
    if constexpr (FP8) {
      mbar_wait_parity(bar_land + hb * 8, (conv_next / NST) & 1);
      wsp_convert_rows<C, C::kRowsPerWarp>(smem, hb, C::kRowsPerWarp * kh, lane);
      __syncwarp();  // every lane's writes (and fence) before lane 0's arrival (its release)
      if (lane == 0) mbar_arrive(bar_full + hb * 8);
      conv_next += NST;
    }
  };
  // One CTA per item: its step count.
  const int nsteps0 =
      PERSIST ? 0 : split_span<C::kBT>(a, place_of<HC>(a, blockIdx.x).t, place_of<HC>(a, blockIdx.x).split).nsteps;
  __syncthreads();  // barriers initialised (one CTA per item: indices staged)
  if constexpr (PERSIST) {
    if (f_first >= 0) fill(f_first, idx_first);  // into the empty ring
  } else {
    if (hb < nsteps0) fill(0, fill_index());
  }
  if constexpr (FP8) {
    // Q's f16 latent once the first fills are out (the persistent form: if the CTA has an item with steps).
    const WspPos ps0{warp, lane, hb, kh, g, tq};
    if (!PERSIST || tab[0].nsteps > 0) q_finish(ps0, 0);
  }
  if (FP8 && hb < lead && conv_next < filled_end) convert();

  // ldmatrix row addresses. K (B of GEMM1, non-transposed): (tok 0-7, k0), (tok 0-7, k0 + 8), (tok 8-15, k0),
  // (tok 8-15, k0 + 8) = both n tiles of one k step. V (B of GEMM2, transposed): (tok 0-7, d), (tok 8-15, d),
  // (tok 0-7, d + 8), (tok 8-15, d + 8) = two n tiles.
  const uint32_t k_off = ((lane & 7) + ((lane >> 4) << 3)) * C::kRowBytes + ((lane >> 3) & 1) * 16;
  const uint32_t v_off = ((lane & 7) + (((lane >> 3) & 1) << 3)) * C::kRowBytes + (256 * kh + (lane >> 4) * 8) * 2;
  float4* xbuf = reinterpret_cast<float4*>(smem + C::kOffX);
  const int partner = warp ^ 1;
  float acc[C::kDimTiles][4];  // O: dims 256 kh + 8 n + 2t (+1), rows g / g + 8
  int gs = 0;                  // global step
  int item = blockIdx.x;
  do {
    int nsteps = nsteps0;
    if constexpr (PERSIST) {
      // The table's entry 0 is the next item with steps (built by the prologue or at the end of the item with steps
      // before it, which also loaded its Q and staged its fills' indices): this item if it has steps.
      const WspPos ps = wsp_pos_fresh();
      uint8_t* ws = wsp_warp_area<C>(smem, ps.warp);
      const WspCursor* ftab = reinterpret_cast<const WspCursor*>(ws + C::kCurTab);
      nsteps = ftab[0].nsteps > 0 && ftab[0].item == item ? ftab[0].nsteps : 0;
      if (ps.lane == 0) *reinterpret_cast<int*>(ws + C::kCurItem) = item;
      wsp_item_stamp(a, item, ps, kWspStampLoop);
    }
#pragma unroll
    for (int n = 0; n < C::kDimTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    float m0 = kNegInf, m1 = kNegInf;  // running max (base 2) of rows g / g + 8; the same on the row's 4 lanes
    float l0 = 0.f, l1 = 0.f;          // this lane's share of the rows' running sums
    // Speculative softmax (session 22): this lane's share of the previous step's row maxima, whose new frame (if any)
    // is taken in the next step, after its GEMM1 (-inf: nothing pending).
    float pm0 = kNegInf, pm1 = kNegInf;
    // The pending frame, by the lazy rule: the rows' maxima over their quads (shuffles that the step's last GEMM1 MMAs
    // hide), then O and the sums rescaled where a max rose by more than kLazyRescale (rare: a vote).
    auto take_pending_frame = [&]() {
      const float mx0 = quad_max(pm0), mx1 = quad_max(pm1);
      const bool up0 = mx0 > m0 + kLazyRescale, up1 = mx1 > m1 + kLazyRescale;
      if (__any_sync(0xffffffffu, up0 || up1)) {
        const float mn0 = up0 ? mx0 : m0, mn1 = up1 ? mx1 : m1;
        const float al0 = fast_exp2(m0 - mn0), al1 = fast_exp2(m1 - mn1);
        scale_mtile(acc, al0, al1);
        l0 *= al0;
        l1 *= al1;
        m0 = mn0;
        m1 = mn1;
      }
    };
    for (const int gs_end = gs + nsteps; gs < gs_end; ++gs) {
      const int slot = gs % NST;
      const uint32_t tile = smem_addr(smem + slot * C::kTileBytes);
      mbar_wait_parity(bar_full + slot * 8, (gs / NST) & 1);
      // GEMM1: chains c = k-step parity, n tile nt.
      float s[2][2][4];
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) s[c][nt][0] = s[c][nt][1] = s[c][nt][2] = s[c][nt][3] = 0.f;
#pragma unroll
      for (int j = 0; j < C::kKSteps; ++j) {
        uint32_t b[4];
        ldmatrix_x4(b, tile + k_off + (j < 16 ? kdim(j) * 2 : C::kRopeOff + (kdim(j) - kMlaLatentDim) * 2));
        if (FP8 && j < 16) {  // FP8 records: f16 latent rows (wsp_convert_rows)
          mma_f16_16816(s[j & 1][0], qa[j], b[0], b[1]);
          mma_f16_16816(s[j & 1][1], qa[j], b[2], b[3]);
        } else {
          mma_bf16_16816(s[j & 1][0], qa[j], b[0], b[1]);
          mma_bf16_16816(s[j & 1][1], qa[j], b[2], b[3]);
        }
      }
      if constexpr (kSpec) take_pending_frame();
      float4 mine[2];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
        mine[nt] = make_float4(s[0][nt][0] + s[1][nt][0], s[0][nt][1] + s[1][nt][1], s[0][nt][2] + s[1][nt][2],
                               s[0][nt][3] + s[1][nt][3]);
      // Exchange with the partner (buffer of this step's parity: the partner reads it before it reaches the pair
      // barrier of step + 1, which this warp must pass before writing the buffer again at step + 2).
      float4* xb = xbuf + (gs & 1) * C::kConsumerWarps * 64;
      xb[(warp * 2 + 0) * 32 + lane] = mine[0];
      xb[(warp * 2 + 1) * 32 + lane] = mine[1];
      // The step's used tokens (persistent: the slot's validity bits; one CTA per item: its staged indices).
      bool ok[2][2];
      if constexpr (PERSIST) {
        const uint32_t v = static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(valid + 2 * slot)) >> (2 * tq);
        ok[0][0] = (v & 1u) != 0, ok[0][1] = (v & 2u) != 0, ok[1][0] = (v & 0x100u) != 0, ok[1][1] = (v & 0x200u) != 0;
      } else {
        indices_ok(s_idx + gs * C::kBT, tq, ok);
      }
      // GEMM2's first V fragments in flight across the pair barrier and the softmax (session 22).
      uint32_t vpre[VPRE > 0 ? VPRE : 1][4];
#pragma unroll
      for (int n2 = 0; n2 < VPRE; ++n2) ldmatrix_x4_trans(vpre[n2], tile + v_off + n2 * 32);
      named_bar_sync(1 + hb, 64);
      const float4 o0 = xb[(partner * 2 + 0) * 32 + lane], o1 = xb[(partner * 2 + 1) * 32 + lane];
      // x[nt][i]: row g (i = 0, 1) / g + 8 (i = 2, 3), token 8 nt + 2t + (i & 1).
      float x[2][4] = {{mine[0].x + o0.x, mine[0].y + o0.y, mine[0].z + o0.z, mine[0].w + o0.w},
                       {mine[1].x + o1.x, mine[1].y + o1.y, mine[1].z + o1.z, mine[1].w + o1.w}};
      uint32_t pa[4];  // P as GEMM2's A fragment: (row g, tok 2t..), (g + 8, 2t..), (g, 8 + 2t..), (g + 8, 8 + 2t..)
      float ps0 = 0.f, ps1 = 0.f;
      scale_mask_scores(x, ok, a.scale_log2);
      // This lane's share of the rows' maxima (their shuffles wait until after the next step's GEMM1).
      const float lm0 = fmaxf(fmaxf(x[0][0], x[0][1]), fmaxf(x[1][0], x[1][1]));
      const float lm1 = fmaxf(fmaxf(x[0][2], x[0][3]), fmaxf(x[1][2], x[1][3]));
      // The exact form where nothing was used before this step (m = -inf: not a number or infinite) or an exponent
      // exceeds kWspSpecMax in the frame; FP8 records (and GLM5RT_MLA_WSP_SPEC=0): always.
      bool exact = true;
      if constexpr (kSpec) {
        wsp_p_fragments<true>(x, m0, m1, pa, ps0, ps1);  // P in the old frame, its exp2s issued before the vote
        exact = __any_sync(0xffffffffu, !(lm0 - m0 <= kWspSpecMax) || !(lm1 - m1 <= kWspSpecMax));
      }
      if (exact) {
        // The step's maxima first, then P in their frame (every step's form before session 22).
        float mu0, mu1, al0, al1;
        lazy_frame(quad_max(lm0), quad_max(lm1), m0, m1, mu0, mu1, al0, al1);
        ps0 = ps1 = 0.f;
        wsp_p_fragments<false, FP8>(x, mu0, mu1, pa, ps0, ps1);
        l0 = l0 * al0 + ps0;
        l1 = l1 * al1 + ps1;
        if (__any_sync(0xffffffffu, al0 != 1.f || al1 != 1.f)) scale_mtile(acc, al0, al1);
        pm0 = pm1 = kNegInf;
      } else {
        l0 += ps0;
        l1 += ps1;
        pm0 = lm0;
        pm1 = lm1;
      }
      pv_mtile<VPRE, FP8>(acc, pa, tile + v_off, vpre);  // GEMM2 (FP8 records: f16 P and V)
      __syncwarp();
      if (lane == 0) mbar_arrive(bar_empty + slot * 8);  // this warp is done reading the slot (and its bits)
      // The refill: global step gs + NST - 1 into the slot gs - 1 used, once every warp has released it. (Session 11,
      // call 4: here, after GEMM2, instead of right after the exchange: 1.07x at T=128 H=64, 1.11x at prefill 4096 x
      // 64 on the H200; the earlier wait for the slot blocked while the slowest pair was still in step - 1, and one
      // step less of lead did not show.) Only the filling pair waits for the slot.
      if (next_fill == gs + NST - 1) {
        // (Persistent, within this item: entry 0, no lookup. Past it: the next item's, whose Q and indices the pair
        // that fills its first step prefetches into L2.)
        int f = next_fill < gs_end ? 0 : -1;
        if (PERSIST && f < 0) {
          f = wsp_find(tab, next_fill);
          if (f >= 0 && next_fill == gs_end) wsp_prefetch_item<HC>(a, tab[f], kh, lane);
        }
        if (f >= 0) {
          mbar_wait_parity(bar_empty + hb * 8, ((gs - 1) / NST) & 1);
          fill(f, fill_index());
        }
      }
      // FP8: gs + lead was copied by this pair before (in the prologue, or above at the end of gs + lead - 3).
      if (FP8 && conv_next == gs + lead && conv_next < filled_end) convert();
    }
    if constexpr (kSpec) take_pending_frame();  // the last step's
    // The item's outputs: the rows' total sums (the row's 4 lanes); both warps of a pair hold the same LSEs (kh 0
    // writes them).
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if constexpr (PERSIST) {
      // Outputs from registers (variant 10's whole-sector stores): the ring runs on into the next item. (The item and
      // its place are read back from shared memory after its steps instead of held in registers across them.) After
      // an item with steps, the next item with steps (table entry 1) is prepared here, after this item's stores: its Q
      // (the fragments are free since the last GEMM1), its fills' indices (steps next_fill .. its last step + 3,
      // found in the table before its rebuild), then the table from it on. (Session 18 call 4: its loads issued
      // before the stores, to overlap them, made ptxas rematerialise addresses inside the bf16 step loop, 2.6%
      // slower per step.)
      const WspPos ps = wsp_pos_fresh();
      uint8_t* ws = wsp_warp_area<C>(smem, ps.warp);
      WspCursor* ftab = reinterpret_cast<WspCursor*>(ws + C::kCurTab);
      __syncwarp();
      item = *reinterpret_cast<const int*>(ws + C::kCurItem);
      wsp_item_stamp(a, item, ps, kWspStampDone);
      auto store_outputs = [&]() {
        const CtaPlace pl = wsp_place_fresh<HC>(a, item);
        const int64_t row0 = static_cast<int64_t>(pl.t) * a.num_heads + pl.hg * HC + 16 * ps.hb + ps.g;
        store_mtile_direct(a, acc, row0, pl.split, 256 * ps.kh, ps.tq, l0 > 0.f ? 1.f / l0 : 0.f,
                           l1 > 0.f ? 1.f / l1 : 0.f);
        if (ps.kh == 0 && ps.tq == 0) store_lse_pair_direct(a, row0, pl.split, m0, m1, l0, l1);
        wsp_item_stamp(a, item, ps, kWspStampStored);
      };
      // (store_outputs in both branches: one call before the branch changes ptxas's choices for the whole kernel,
      // 4,264 against 5,512 instructions, unmeasured.)
      if (ftab[0].nsteps > 0 && ftab[0].item == item && ftab[1].nsteps > 0) {
        store_outputs();
        const int nx_item = ftab[1].item, nx_g0 = ftab[1].g0, s_end = nx_g0 + ftab[1].nsteps + NST - 1;
        // Both round trips (Q, the fills' indices) in flight before either is waited for, the table rebuilt under
        // them (session 20; session 21: shifted by one entry, and the indices' table lookups once per item).
        q_issue(ftab[1].qrow, ps);
        wsp_fine_stamp(a, item, ps, kWspFineQIssued);
        WspStage st;
        wsp_stage_load<C>(a, ftab, st, next_fill, s_end, ps.kh, ps.lane);
        wsp_fine_stamp(a, item, ps, kWspFineIdxIssued);
        wsp_shift_table<C, HC>(a, ftab, nx_item, nx_g0, wsp_items_fresh<HC>(a), ps.lane);
        wsp_fine_stamp(a, item, ps, kWspFineTable);
        q_finish(ps, gs & 1);
        wsp_fine_stamp(a, item, ps, kWspFineQDone);
        wsp_stage_store<C>(reinterpret_cast<int*>(ws + C::kCurBuf), st, next_fill, s_end, ps.lane);
        wsp_item_stamp(a, item, ps, kWspStampPrepared);
      } else {
        store_outputs();
      }
      item += gridDim.x;
    } else {
      // Staged through the ring, 32 heads at a time (two passes, pairs 0-1 then 2-3), each a 32-head group.
      if constexpr (!kBulk) cp_async_wait_all();
      float* lse_s = reinterpret_cast<float*>(smem + C::kOffLse);
      if (kh == 0 && tq == 0) {
        lse_s[16 * hb + g] = l0 > 0.f ? m0 + log2f(l0) : kNegInf;
        lse_s[16 * hb + g + 8] = l1 > 0.f ? m1 + log2f(l1) : kNegInf;
      }
      __syncthreads();  // every warp is past its last GEMM2 and every copy has landed: the ring is free
      float* stg = reinterpret_cast<float*>(smem);
      const float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
      const CtaPlace pl = place_of<HC>(a, blockIdx.x);
#pragma unroll 1
      for (int pass = 0; pass < 2; ++pass) {
        if ((hb >> 1) == pass) stage_mtile(stg + (16 * (hb & 1) + g) * kStgStride + 256 * kh + 2 * tq, acc, i0, i1);
        __syncthreads();
        write_outputs<32, C::kThreads>(a, stg, lse_s + 32 * pass, pl.t, 2 * pl.hg + pass, pl.split, tid);
        __syncthreads();
      }
      break;  // one item
    }
  } while (PERSIST && item < wsp_items_fresh<HC>(a));
  if constexpr (PERSIST && !kBulk) cp_async_wait_all();
  if constexpr (!PERSIST) {
    if (a.pdl == 2) wait_for_predecessor();  // the tail launch: the bulk grid done before this grid completes
  }
}

}  // namespace glm5rt::kernels::sparse_mla_detail
