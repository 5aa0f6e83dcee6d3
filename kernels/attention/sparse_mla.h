// Sparse MLA attention (GLM-5 / DeepSeek "DSA" style): every query token attends to its own top-k set of
// cached latent records, picked by physical slot. Plain-struct parameters and launchers that return
// cudaError_t; nothing here depends on lib/.
//
// Shapes (GLM-5 only: 576 = 512 latent + 64 rope values per record, 512 output values per head):
//   q        [T, H, 576] bf16, contiguous (the absorbed query: 512 latent dims, then 64 rope dims)
//   cache    a flat array of num_slots records, slot = page * page_size + offset, either
//              kBf16: 576 bf16 = 1152 bytes per record, or
//              kFp8:  656 bytes = 512 e4m3 + 4 float32 scales (one per 128 latent values) + 64 bf16 rope
//            (or, with SparseMlaParams::pools, one such array per pool, each row reading its own pool's)
//   indices  [T, topk] int32 physical slots; -1 (or any value outside [0, num_slots)) = unused entry
//   lengths  optional [T] int32: only the first lengths[t] entries of row t are read (clamped to topk)
//   out      [T, H, 512] bf16
//   lse      [T, H] float32, NATURAL log of sum_j exp(softmax_scale * q.k_j) over the row's valid entries.
// A row with no valid entry gets out = 0 and lse = -infinity.
//
// Heads H in {8, 16, 32, 64, 128} run natively: the 32-token K tile sits on the MMA M side and the heads
// on N (n8 tiles), so H = 8 wastes no MMA work on padding; the output is built as O^T = V^T P^T.
// Small T (decode) splits each row's top-k across CTAs (flash-decoding) and a combine step merges the
// partial results with their LSEs (a second kernel, or the last CTA of each row group: see
// SparseMlaParams::combine); the caller provides the workspace for the partials and counters.
// The launchers never synchronise the host and allocate nothing, so they can be captured in a CUDA graph.
// On sm_90+ the main kernel is launched as a programmatic dependent of the previous kernel in the stream: it
// waits for that kernel's completion before reading q, the indices or the cache and before writing anything,
// so a caller need not do anything (GLM5RT_MLA_PDL=0 launches it plainly).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace glm5rt::kernels {

inline constexpr int kMlaQkDim = 576;      // latent 512 + rope 64
inline constexpr int kMlaLatentDim = 512;  // value / output width per head
inline constexpr int kMlaRopeDim = 64;
inline constexpr int kMlaBf16RecordBytes = 1152;
inline constexpr int kMlaFp8RecordBytes = 656;
inline constexpr int kMlaFp8ScaleOffset = 512;  // 4 float32 scales
inline constexpr int kMlaFp8RopeOffset = 528;   // 64 bf16

enum class MlaCacheFormat : int { kBf16 = 0, kFp8 = 1 };

// One cache pool of a multi-pool launch (SparseMlaParams::pools): records of layer `pool_layer` start at
// base + pool_layer * layer_bytes (16-byte aligned), slots [0, num_slots) of that layer are valid.
struct MlaPool {
  const void* base = nullptr;
  int64_t num_slots = 0;
  int64_t layer_bytes = 0;
};

struct SparseMlaParams {
  const void* q = nullptr;          // [T, H, 576] bf16
  const void* cache = nullptr;      // num_slots records in `format`
  int64_t num_slots = 0;
  MlaCacheFormat format = MlaCacheFormat::kBf16;
  const int32_t* indices = nullptr; // [T, topk]
  const int32_t* lengths = nullptr; // optional [T]; nullptr = every row has topk entries
  void* out = nullptr;              // [T, H, 512] bf16
  float* lse = nullptr;             // [T, H] natural-log LSE
  int num_tokens = 0;               // T
  int num_heads = 0;                // H in {8, 16, 32, 64, 128}
  int topk = 0;                     // >= 1
  float softmax_scale = 0.f;
  int num_splits = 0;               // top-k splits per row: 0 = choose from the shape and the SM count
  int num_sms = 0;                  // 0 = ask the current device
  int heads_per_cta = 0;            // 0 = automatic; else 8, 16, 32 or 64 dividing H (64: variant 14's size,
                                    // either record format since session 12) (tuning / benchmarks)
  // Appended in round 2. 0 = automatic (per shape, from the H200 measurements; see sparse_mla.cu);
  // 1 = round-1 kernel (32-token tiles, 2 cp.async stages);
  // 2 = pipelined kernel (16-token ring: 3 bf16 / 5 FP8 slots in flight); 3 = pipelined, with the 32-head
  // CTA compiled for two CTAs per SM (128 registers; helps only where an SM has > 200 KB of shared memory,
  // H100 / H200); 4 was variant 2 with round 1's L2::256B gather prefetch hint, a diagnostic that measured
  // no difference: removed in round 3, rejected as invalid. Appended in round 3: 5 = warp-specialized
  // kernel (producer warps gather 16-token steps into a ring on mbarriers, one bulk copy per bf16 record
  // on sm_90+; consumer groups of 4 warps, 16 heads each, run GEMM1 / softmax / GEMM2 on their own named
  // barriers). 6 (round 5: variant 5 with FP8 records gathered by bulk copies) was slower than 5 / 7
  // everywhere and was removed in session 4: rejected as invalid, as 4. Appended in round 6: 7 = FP8 records converted in registers (no dequantization pass):
  // raw records in a cp.async ring, each warp turns its own MMA operands into f16 (K, GEMM1, with the
  // per-128 scale on the partial scores) or bf16 (V, GEMM2, the scale folded into P); bf16 records: as 2;
  // never chosen automatically. 8 (session 4's 32-token design, never merged) and 9 (session 5's
  // alternating-step kernel, measured 1.6-2x slower than 5 and removed) are rejected as invalid, as 4 and 6.
  // Appended in session 6: 10 = variant 5 with the softmax in registers (both GEMMs with heads on the MMA M
  // side, so a step's scores stay in the threads that multiply them; no group barrier, no P / rescale factors
  // through shared memory; the next step's GEMM1 overlapped with the softmax); bf16 records with 16 or 32 heads
  // per CTA, variant 5 elsewhere (8 heads per CTA would pad the M side; FP8 records). The automatic bf16
  // kernel at 32 heads per CTA (1.08-1.13x over variant 5 on the H200) until session 7 and again since session 30
  // (1.05-1.12x over variant 11), and (session 9) at 16 heads per CTA up to T = 128.
  // Appended in session 7: 11 = one consumer group of 8 warps for the CTA's 32 heads (each K / V fragment read from
  // shared memory feeds both m16 tiles, each partial score read once, each head's softmax run by one warp, P handed
  // over in shared memory in GEMM2's A-fragment order; its own producer loads the indices); bf16 records with 32 heads
  // per CTA, variant 10's choice elsewhere. The automatic bf16 kernel at 32 heads per CTA in sessions 7-29 (1.01-1.04x
  // over variant 10 on the H200 then); since session 30 only with GLM5RT_MLA_V11=1. 12 (session 7's 16-warp form of 11,
  // measured 0.74x of it and removed) is rejected as invalid, as 8 and 9. 13 (session 10's variant 10 16-head CTA with
  // two consumer groups taking alternate steps, measured 0.76-0.83x of variant 10 and removed) likewise.
  // Appended in session 11: 14 = 64 heads per CTA in four independent warp pairs (each pair 16 heads: the two warps
  // split the scores' k and the output dims, swap their halves of the scores on a 64-thread barrier and run the
  // same register softmax; pair s % 4 bulk-copies step s: no producer warp); 64 heads per CTA (heads_per_cta 64, or
  // automatic: forcing 14 makes a CTA hold 64 heads where H allows it, else variant 11's choice runs). The
  // automatic bf16 kernel above kMlaJointPlanMaxTokens tokens where H is a multiple of 64, on sm_90+ (1.04-1.39x over
  // variant 11 on the H200; GLM5RT_MLA_V14=0 keeps 32-head CTAs). Session 12: FP8 records too (the copying pair turns
  // each step's records into bf16 rows in shared memory, e4m3 x scale rounded to bf16), the automatic FP8 kernel
  // there as well (1.2-1.75x over variant 7 on the H200; GLM5RT_MLA_V14=0 keeps variant 7). Session 13: also the
  // automatic plan at T <= kMlaJointPlanMaxTokens where T * H / 64 head groups x its splits fill the SMs (H200: FP8
  // from 5 groups, e.g. T=5-8 x H=64, T=3-8 x H=128, 1.13-1.36x; bf16 from 10, T=5-8 x H=128, 1.07-1.10x).
  // Appended in session 26: 16 = FP8 records with 8 heads per CTA, each consumer warp running whole 16-token steps
  // (a producer warp gathers a 7-slot ring; no block barrier in the step loop; the warps' partial softmax states
  // merged at the end), sm_90+ (elsewhere, with bf16 records or other head counts per CTA, variant 7's choice runs).
  // Session 27: on H100 / H200 four warps gathering their own steps (no producer warp). Session 28: also 16 heads per
  // CTA (a pair of warps per step splitting its latent dims). The automatic FP8 kernel at 8 and 16 heads per CTA
  // from T=32 on sm_90 (GLM5RT_MLA_V16=0 keeps variant 7; GLM5RT_MLA_V16_H16=0 at 16 heads only). 17 (session 29's
  // variant 14 reading FP8 records raw, measured 0.83-0.93x of its in-place conversion and removed) is rejected as
  // invalid, as 12 and 13.
  // Same results whichever runs (within the tests' tolerances).
  int kernel_variant = 0;
  // Appended (batched decode over several caches): rows whose records live in different pools, one launch.
  // pools = nullptr: every row reads `cache` / `num_slots` (as before). Otherwise row t reads the pool
  // pools[row_pool[t]] (device arrays: pools [num_pools], row_pool [T]) at layer pool_layer, `cache` and
  // `num_slots` are ignored, and a row whose pool index is outside [0, num_pools), whose pool has
  // num_slots < 1 or whose layer base is not 16-byte aligned attends to nothing (out 0, lse -inf): the
  // device-side table cannot be checked by the launcher. Each pool's num_slots must be <= 2^31.
  const MlaPool* pools = nullptr;
  const int32_t* row_pool = nullptr;
  int num_pools = 0;
  int pool_layer = 0;
  // Appended in round 4: how the split partials are merged (nsplit > 1 only; same results whichever runs).
  // 0 = automatic: the fused merge where each row group's partials are small (splits * heads per CTA
  // <= kMlaFusedMaxPartials and T * H / heads_per_cta <= kMlaCombineCounters), else the chunked kernel
  // (since session 4 over bf16 partials, 5, unless the planner's measured plan for the shape names 2);
  // the environment variable GLM5RT_MLA_COMBINE=1 (or 2 / 3 / 5) overrides the automatic choice.
  // 1 = round 3's combine kernel (one 128-thread block per (t, h) row, a PDL launch after the main kernel);
  // 2 = chunked combine kernel (a block per (t, h) row and 128-dim quarter, every split's partial loaded
  //     at once: one L2 round trip instead of nsplit / 8);
  // 3 = fused: the last CTA of each (t, head group) to finish (a per-group atomic counter in the
  //     workspace, reset by that CTA) merges the other splits' partials from L2 itself; no second launch.
  //     Needs splits * heads_per_cta <= kMlaFusedMaxPartials and T * H / heads_per_cta <=
  //     kMlaCombineCounters; elsewhere the launcher runs 2 instead.
  // 4 = rejected (session 4's cluster merge, measured slower everywhere on the H200 and removed).
  // 5 (appended in session 4) = chunked combine over bf16 partials: the main kernel rounds its normalised
  //     partial output to bf16 (the split LSEs stay fp32), half the bytes to write and to merge; the
  //     automatic choice where the fused merge cannot run (GLM5RT_MLA_COMBINE=2 = the fp32 partials).
  int combine = 0;
  // Appended in round 5: how the plan (heads per CTA and split count) is chosen when they are automatic.
  // 0 = automatic: the round-5 planner (2) unless GLM5RT_MLA_PLANNER=1 is set in the environment;
  // 1 = round 4's planner: heads per CTA = min(H, 32), splits from round 2's cost model, and round 4's
  //     automatic kernel variant (round 5 runs variant 2 for bf16 records at T = 1 with 8-head CTAs);
  // 2 = round 5's planner: for T <= kMlaJointPlanMaxTokens with both heads_per_cta and num_splits
  //     automatic, heads per CTA (8 / 16 / 32) and splits are chosen together from a cost model fitted to
  //     H200 sweeps, and the sweeps' measured best plan at their exact shapes (T = 1, 2, 4, 8, top-k 2048,
  //     132 SMs); smaller head groups put more CTAs on the SMs at T = 1, each re-reading the records from
  //     L2; with heads_per_cta forced, only the splits, from the same model. num_splits forced: as 1. Larger
  //     T (session 10): heads per CTA as 1, the splits from a model in which the CTAs sharing an SM share its
  //     gather rate (sparse_mla.cu, plan_splits_s10). Same results whichever runs.
  int planner = 0;
  // Appended in session 15 (benchmarks only): nullptr, or a device buffer for the timeline probe (%globaltimer
  // stamps, ns): 16 per main-kernel CTA (blockIdx order; written by variant 10's kernel only), then 4 per block of
  // the chunked combine (entry, past its PDL wait, stored): T * splits * H / heads_per_cta * 16 + T * H * 4 entries
  // (sparse_mla_num_splits, sparse_mla_heads_per_cta). The stamps cost a few instructions per step when it is set.
  // Session 19: variant 14's persistent form stamps 16 per work item (token x 64-head group, the same count) instead,
  // in kernels built with GLM5RT_MLA_ITEM_PROBE only (bench/sparse_mla/mla_item_timeline.cu).
  unsigned long long* debug_timeline = nullptr;
  // Appended in session 17: variant 14's persistent grid. 0 = automatic: where variant 14 runs one split and its
  // work items (token x 64-head group) outnumber the CTAs that fit on the SMs at once, the grid is that many CTAs and
  // each takes items in turn (blockIdx.x, + grid, ...), the next item's first records gathered and its Q loaded while
  // this item's last steps run, its outputs stored from registers; since session 18 also with bf16 records where each
  // item has a CTA of its own (GLM5RT_MLA_PERSIST=0 in the environment: off); 1 = never; 2 = always where variant 14
  // runs (also with splits, and one item per CTA; tests). Same results whichever runs.
  int persistent = 0;
};

// Round 5's joint (heads per CTA, splits) choice applies up to this many query tokens (the swept range).
inline constexpr int kMlaJointPlanMaxTokens = 8;

// The first kMlaCombineCounterBytes of a workspace (when sparse_mla_workspace_size > 0) hold the fused
// combine's per-row-group counters: they must be ZERO before the first call that uses the workspace
// (cudaMemset once after allocating it); every call leaves them zero again (graph-safe, no clearing node).
// The rest of the workspace (the partials) needs no initialisation.
inline constexpr int kMlaCombineCounters = 4096;
inline constexpr size_t kMlaCombineCounterBytes = kMlaCombineCounters * sizeof(int32_t);
inline constexpr int kMlaFusedMaxPartials = 32;  // splits * heads per CTA: partial rows one CTA merges

// The split count the launcher will use for these parameters (after clamping), and the workspace it needs.
// Both are pure functions of the parameters, the SM count and the device's shared memory per SM: call them
// with the same parameters (and the same current device) as sparse_mla_forward. Session 12: where variant 14's
// automatic one-split grid (64 heads per CTA, one CTA per SM) would end in a partial wave of at most half the SMs,
// the last T mod SMs tokens run as a second launch with SMs / their count splits (GLM5RT_MLA_TAIL=0: off;
// GLM5RT_MLA_TAIL_SPLITS: the count): the split count reported stays 1 and the workspace holds that launch's partials.
// (Session 25: that launch runs beside the first one's last CTAs; the call still ends after both.)
int sparse_mla_num_splits(const SparseMlaParams& p);
// The heads per CTA the launcher will use (8, 16, 32, or 64 where variant 14 runs; appended in round 5, when the
// planner began to choose it), or 0 when heads_per_cta / num_heads are invalid.
int sparse_mla_heads_per_cta(const SparseMlaParams& p);
size_t sparse_mla_workspace_size(const SparseMlaParams& p);
// The merge sparse_mla_forward will run for these parameters: 0 = none (one split), else the
// SparseMlaParams::combine value it resolves to (1, 2 or 3) after the automatic choice, the environment
// override and the fused path's limits.
int sparse_mla_combine_kind(const SparseMlaParams& p);

// Validates the parameters (cudaErrorInvalidValue with nothing launched when they are wrong, including a
// workspace smaller than sparse_mla_workspace_size) and enqueues the kernels on `stream`.
cudaError_t sparse_mla_forward(const SparseMlaParams& p, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream);

}  // namespace glm5rt::kernels
