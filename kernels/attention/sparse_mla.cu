// Sparse MLA launcher: parameter checks, the split plan (flash-decoding), and the combine kernels that
// merge the per-split partial outputs with their LSEs (or the choice of the fused merge in the main kernel).
#include "kernels/attention/sparse_mla.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/attention/sparse_mla_launch.h"

namespace glm5rt::kernels {
namespace {

using sparse_mla_detail::kMaxSplitEntries;
using sparse_mla_detail::kTileTokens;

constexpr int kMaxSplits = 128;  // the combine kernel's block size
constexpr int kCombineTimelineSlots = 4;  // the chunked combine's stamps per block (SparseMlaParams::debug_timeline)

bool valid_heads(int h) { return h == 8 || h == 16 || h == 32 || h == 64 || h == 128; }

// An attribute of the current device (0 when it cannot be read).
int device_attribute(cudaDeviceAttr attr) {
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess) return 0;
  return v;
}

int sm_count(const SparseMlaParams& p) {
  if (p.num_sms > 0) return p.num_sms;
  const int n = device_attribute(cudaDevAttrMultiProcessorCount);
  return n > 0 ? n : 1;
}

int smem_per_sm() { return device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor); }
// The most shared memory one block may opt in to (227 KB on H100 / H200, 99 KB on SM120).
int smem_per_block() { return device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin); }

// The current device's compute capability major (0 when it cannot be read).
int cc_major() { return device_attribute(cudaDevAttrComputeCapabilityMajor); }

// Round 4's planner (1) or round 5's (2): SparseMlaParams::planner, else GLM5RT_MLA_PLANNER, else 2.
int planner_mode(const SparseMlaParams& p) {
  static const int env = [] {
    const char* e = std::getenv("GLM5RT_MLA_PLANNER");
    const int v = e ? std::atoi(e) : 0;
    return v == 1 || v == 2 ? v : 0;
  }();
  const int mode = p.planner == 1 || p.planner == 2 ? p.planner : env;
  return mode == 0 ? 2 : mode;
}

// The environment variable `name` where it holds one of the alternatives `a` / `b`, else `def` (callers cache the
// answer).
int env_one_of(const char* name, int def, int a, int b) {
  const char* e = std::getenv(name);
  const int v = e ? std::atoi(e) : def;
  return v == a || v == b ? v : def;
}

// The environment variable `name` where it holds a value in [lo, hi], else `def` (callers cache the answer).
int env_in_range(const char* name, int def, int lo, int hi) {
  const char* e = std::getenv(name);
  const int v = e ? std::atoi(e) : def;
  return v >= lo && v <= hi ? v : def;
}

// A kernel choice that the environment variable `name` set to 0 switches off (callers cache the answer).
bool env_not_off(const char* name) {
  const char* e = std::getenv(name);
  return !(e && std::atoi(e) == 0);
}

// Session 11: GLM5RT_MLA_V14=0 (read once) keeps 32-head CTAs (variant 11 until session 29, variant 10 since) where
// the automatic choice would run variant 14.
bool v14_enabled() {
  static const bool on = env_not_off("GLM5RT_MLA_V14");
  return on;
}

// Heads per CTA as the caller forced it (8 / 16 / 32 / 64 dividing H; 64 is variant 14's only size); automatic: 64
// where variant 14 runs (forced, or the automatic choice below), else round 4's default
// min(H, 32); 0 = an invalid override. The planner may replace the default at T <= kMlaJointPlanMaxTokens (plan()).
// Session 11: variant 14 is the automatic bf16 kernel above kMlaJointPlanMaxTokens tokens wherever H is a multiple
// of 64 (H200, graph time, against variant 11 in the record run: T=32 H=64 1.17x, T=128 H=64 1.39x, prefill 4096 x 64
// 1.37x; an earlier form 1.04-1.32x at T = 12-256 x H = 64 / 128; docs/PERFORMANCE.md "Session 11"), on sm_90+ (its
// rows come by bulk copies; the sm_80 build's cp.async path has not run on an sm_80 GPU). GLM5RT_MLA_V14=0 keeps
// 32-head CTAs there.
// Session 12: the same for FP8 records (variant 14 converts them to bf16 rows in shared memory; it replaces variant
// 7 there: 1.47x at T=32 H=64, 1.73-1.75x at T=128 and prefill on the H200, docs/PERFORMANCE.md "Session 12");
// GLM5RT_MLA_V14=0 keeps variant 7.
bool v16_auto(const SparseMlaParams& p, int hc);

int requested_heads_per_cta(const SparseMlaParams& p) {
  if (p.heads_per_cta == 8 || p.heads_per_cta == 16 || p.heads_per_cta == 32 || p.heads_per_cta == 64)
    return p.num_heads % p.heads_per_cta == 0 ? p.heads_per_cta : 0;
  if (p.heads_per_cta != 0) return 0;
  if (p.num_heads % 64 == 0) {
    if (p.kernel_variant == 14) return 64;
    if (p.kernel_variant == 0 && p.num_tokens > kMlaJointPlanMaxTokens && planner_mode(p) == 2 && cc_major() >= 9 &&
        v14_enabled())
      return 64;
  }
  // Session 30: FP8 records at 32 heads from T = 32 up (variant 16's range) in two 16-head CTAs per token on variant 16
  // instead of one 32-head CTA on variant 7: T=32 1.07x, T = 64-256 1.13-1.14x, prefill 1024 / 4096 x 32 1.14x / 1.16x
  // (H200, three alternating processes, docs/PERFORMANCE.md "Session 30, call 6"); GLM5RT_MLA_V16_H32=0 (read once)
  // keeps the 32-head CTA.
  static const bool h32_on16 = env_not_off("GLM5RT_MLA_V16_H32");
  if (p.num_heads == 32 && p.kernel_variant == 0 && planner_mode(p) == 2 && h32_on16 && v16_auto(p, 16)) return 16;
  return sparse_mla_detail::heads_per_cta(p.num_heads);
}

// Session 7: variant 11 where 32 heads share a bf16 CTA; session 30: variant 10 there again (kernel_variant), and
// GLM5RT_MLA_V11=1 (read once) runs variant 11 instead.
bool v11_enabled() {
  static const bool on = env_one_of("GLM5RT_MLA_V11", 0, 0, 1) == 1;
  return on;
}

// Session 6: GLM5RT_MLA_V10=0 (read once) keeps variant 5 where the automatic choice would run variant 10.
bool v10_enabled() {
  static const bool on = env_not_off("GLM5RT_MLA_V10");
  return on;
}

// Session 26: variant 16 (FP8 records, 8 heads per CTA, a consumer warp per 16-token step) where it was measured
// faster than variant 7: on sm_90 (two CTAs per SM; SM120's 100 KB hold one of either, never measured). Session 27,
// with the self-gathering form and v16_splits' plans, from T=32 up: T=32 22.6 against 23.6 us, T=128 62.3 / 71.9,
// T=256 106.4 / 127.1, over one L2-resident pool T=128 56.3 / 67.2 and the 1024-token grid 356 / 426 (H200,
// docs/PERFORMANCE.md "Session 27"); at T=16 15.0 against 15.3 only at 8 splits, which no rule here picks, so not
// below 32. GLM5RT_MLA_V16=0 (read once) keeps variant 7.
// Session 28: its 16-head form (warp pairs splitting a step's dims) likewise at 16 heads per CTA, faster than variant 7
// at every FP8 H=16 shape measured: T=32 28.2 against 32.8 us, T=64 44.9 / 53.4, T=128 75.0 / 92.3, T=256 132.8 /
// 165.7, prefill 1024 x 16 515.8 / 604.7, 4096 x 16 2,037 / 2,307, v16_splits picking the best forced split count at
// each (H200, docs/PERFORMANCE.md "Session 28, call 2"). GLM5RT_MLA_V16_H16=0 (read once) keeps variant 7 there.
bool v16_auto(const SparseMlaParams& p, int hc) {
  static const bool on = env_not_off("GLM5RT_MLA_V16");
  static const bool on16 = env_not_off("GLM5RT_MLA_V16_H16");
  return on && (hc == 8 || (hc == 16 && on16)) && p.format == MlaCacheFormat::kFp8 && cc_major() == 9 &&
         p.num_tokens >= 32;
}

// Session 27: variant 16 self-gathering (four consumer warps, no producer warp) wherever a block may have its 101 KB
// (H100 / H200): FP8 H=8 T=128 62.95 -> 62.3 us from DRAM, 64.5 -> 56.3 over one L2-resident pool, the 1024-token
// grid 445 -> 356, T=256 114 -> 106 (H200, docs/PERFORMANCE.md "Session 27, calls 4-5"); T=32 22.2 -> 22.6, the one
// shape it lost. GLM5RT_MLA_V16_FORM=0 (read once) keeps the producer form, which SM120 runs (99 KB per block).
bool v16_self_gathering() {
  static const bool on = env_not_off("GLM5RT_MLA_V16_FORM");
  return on && smem_per_block() >= sparse_mla_detail::WsfCfg<4, true>::kSmemBytes;
}

// Which kernel runs for `hc` heads per CTA: the fastest of the H200 run of record of round 3 (run 4,
// docs/PERFORMANCE.md, "Round 3"; every variant timed on the same inputs):
//   bf16 records: variant 5 (warp-specialized, one bulk copy per record on sm_90+) for every shape except
//     16 heads per CTA at 8 < T <= 64 (measured at T=32: variant 2, 1.05x). Over the best earlier kernel:
//     32 heads 1.06-1.32x (T=128 1.31x, prefill 1.32x), 16 heads 1.06-1.43x, 8 heads 0.99-1.34x.
//   FP8 records (variant 5 loses everywhere: its producers' dequantization is the bottleneck):
//     32 heads per CTA: variant 3 (two pipelined CTAs per SM) for T >= 32 where an SM holds two (H100 /
//     H200: 1.06-1.12x over round 1); variant 2 for T <= 2; round 1 otherwise (T=8, and wherever two CTAs
//     do not fit, e.g. SM120). 16 and 8 heads per CTA: variant 2.
int kernel_variant(const SparseMlaParams& p, int hc) {
  // Session 11: variant 14 is the only kernel with 64 heads per CTA; forced where a CTA holds fewer, it runs
  // variant 11's choice.
  if (hc == 64) return 14;
  if (p.kernel_variant == 14) return 11;
  // Session 26: variant 16 (FP8 records, a warp per 16-token step) has 8-head CTAs (session 28: and 16-head ones) and
  // bulk copies (sm_90+); elsewhere it runs variant 7's choice.
  if (p.kernel_variant == 16)
    return p.format == MlaCacheFormat::kFp8 && (hc == 8 || hc == 16) && cc_major() >= 9 ? 16 : 7;
  if ((p.kernel_variant >= 1 && p.kernel_variant <= 7) || p.kernel_variant == 10 || p.kernel_variant == 11)
    return p.kernel_variant;  // 4 and 6 are rejected earlier
  if (p.format == MlaCacheFormat::kBf16) {
    // Round 5 (second H200 call, every variant at the automatic plan): at T = 1 with 8-head CTAs of 64
    // splits (H = 8 / 16: two 16-token steps per CTA) the pipelined kernel beats the warp-specialized one,
    // 6.52 / 7.09 against 6.96 / 7.69 us; at T = 1 H = 64 (8 x 32) and at T = 8 it does not.
    // Session 30 (H200, three processes, docs/PERFORMANCE.md "Session 30, call 3"): likewise wherever T x H <= 32
    // (grids of at most 128 8-head CTAs of 2-4 steps at the measured plans): T=2 H=8 1.10x, T=2 H=16 (8 x 32) 1.03x,
    // T=3 H=8 1.01x, T=4 H=8 1.03x over variant 5; not at T=4 H=16 (256 CTAs: 0.97x) or T = 5-7 x H = 8 (0.97-0.99x).
    if (p.num_tokens * p.num_heads <= 32 && hc == 8 && planner_mode(p) == 2) return 2;
    // Session 6: variant 10 (the softmax in registers) wherever 32 heads share a CTA: T=128 H=64 1.13x, prefill
    // 4096 x 64 1.11x, T=8 H=64 1.08x over variant 5 (H200, docs/PERFORMANCE.md "Session 6"); at 16 heads per
    // CTA it was within -3% .. +2% of variant 5 / 2 (its 16-head build then spilled a little; session 9 gave it one CTA
    // per SM, no spill), so those keep theirs.
    // Session 7: variant 11 (one 8-warp group for the CTA's 32 heads) over variant 10 where 32 heads share a CTA: T=128
    // H=64 1.03-1.04x, T=128 H=128 1.03x, T=8 H=64 1.03x, prefill 4096 x 64 1.01-1.03x (H200, docs/PERFORMANCE.md
    // "Session 7"). Session 30: variant 10 again, since its later changes (session 15's stores from registers among
    // them; the four GEMM1 chains are its 16-head form's only) 1.05-1.12x faster than variant 11 at every 32-head shape
    // timed (H200, three processes at the same plans, docs/PERFORMANCE.md "Session 30, call 2": T=4 H=128 1.12x, T=8
    // H=64 1.12x, T=32 / 128 x H=32 1.06x / 1.08x, prefill 1024 x 32 1.11x, 4096 x 32 1.05x); GLM5RT_MLA_V11=1 keeps
    // variant 11.
    if (hc == 32 && v10_enabled() && v11_enabled()) return 11;
    if (hc == 32 && v10_enabled()) return 10;
    // Session 7: variant 10 for the 16-head CTAs of the small-T plans (16 splits of 8 steps): T=1 H=128, T=2 H=64,
    // T=4 H=32 1.05-1.06x over variant 5 (H200, two processes each, docs/PERFORMANCE.md "Session 7, call 10");
    // at T=8 H=16 they were equal.
    // Session 9: after its 16-head build stopped spilling (one CTA per SM), also at T = 8, 32 and 128 (H=16: 1.04x,
    // 1.06x, 1.06x over variants 5 / 2 in the record run); not at prefill sizes, where one CTA per SM loses to
    // variant 5's two (1024 x 16: 593 against 466 us).
    if (hc == 16 && p.num_tokens <= 128 && v10_enabled()) return 10;
    return hc == 16 && p.num_tokens > 8 && p.num_tokens <= 64 ? 2 : 5;
  }
  // FP8 records: round 6's register-dequantizing kernel (variant 7) was the fastest FP8 kernel at every
  // shape of its H200 run (T = 1 / 8 / 128, H = 8 / 16 / 64: 1.04-1.48x over the previous choice below,
  // which GLM5RT_MLA_PLANNER=1 restores).
  if (planner_mode(p) == 2) return v16_auto(p, hc) ? 16 : 7;
  if (hc == 32) {
    const int need = sparse_mla_detail::smem_of<sparse_mla_detail::PipeCfg>(32, true) + 1024;
    if (p.num_tokens >= 32 && smem_per_sm() >= 2 * need) return 3;
    return p.num_tokens <= 2 ? 2 : 1;
  }
  return 2;
}

// Session 8: the main kernel as a programmatic dependent launch of the previous kernel in the stream (sm_90+; the
// kernels wait in wait_for_predecessor() before any global access). GLM5RT_MLA_PDL (read once): 2 = the default,
// the combine kernels release the next kernel only at their completion, so that no CTA of the next call is placed
// while this call's main kernel runs; 1 = the combine releases it at its start; 0 = plain launches (before session
// 8). Measured on the H200 (three processes per mode, docs/PERFORMANCE.md "Session 8"): 2 was 1.00-1.04x of plain
// launches everywhere; 1 was 1-2% faster than 2 on some small-T shapes and 3-15% slower on others (variant 7's
// 256-CTA FP8 plans, 8-head 64-split plans, T=32 H=64).
int main_pdl_mode() {
  static const int mode = env_in_range("GLM5RT_MLA_PDL", 2, 0, 2);
  return mode;
}

// Session 15: variant 10 stores its outputs from registers (H200, call 3: 0.95-0.97x at T = 1-8);
// GLM5RT_MLA_WSR_DIRECT=0 (read once): the staged epilogue.
bool wsr_direct() {
  static const bool on = [] {
    const char* e = std::getenv("GLM5RT_MLA_WSR_DIRECT");
    return e == nullptr || std::atoi(e) != 0;
  }();
  return on;
}

// Session 15: variant 10 with four GEMM1 accumulator chains (H200, call 2: 0.975-0.98x of two chains at T = 1-2 x
// H = 64-128, 0.98x at T = 4-8 x H = 32, within 0.2% elsewhere); GLM5RT_MLA_WSR_CHAINS=2 (read once): two.
bool wsr_chains4() {
  static const bool on = [] {
    const char* e = std::getenv("GLM5RT_MLA_WSR_CHAINS");
    return e == nullptr || std::atoi(e) != 2;
  }();
  return on;
}

// Session 5: variant 5's bulk-copy warps per step (KernelArgs::ws_copy_warps): 2 (measured on the H200 against 1
// and 4, twice each: prefill 4096 x 64 1.014x, T=128 H=64 1.00-1.005x, T=128 H=8 equal; 4 was 1-2% slower);
// GLM5RT_MLA_WS_COPY_WARPS = 1 or 4 (read once; the kernel clamps to its producer warps).
int ws_copy_warps() {
  static const int env = env_one_of("GLM5RT_MLA_WS_COPY_WARPS", 2, 1, 4);
  return env;
}

// Session 12: variant 14 with FP8 records converts step s at the end of step s - lead (the pair that copied it at the
// end of step s - 3); GLM5RT_MLA_V14_LEAD = 1 or 3 (read once) instead of 2.
int wsp_lead() {
  static const int env = env_one_of("GLM5RT_MLA_V14_LEAD", 2, 1, 3);
  return env;
}

// Variant 7's dense FP8 kernels (RegCfg<hc, true>) where an SM's shared memory holds them (H100 / H200; SM120's
// 100 KB holds one CTA either way), above the T <= 8 range whose plans were measured with the default forms.
// Session 5: 8 heads four per SM (4-slot ring, <= 128 registers) instead of three: T=128 H=8 73.6-74.4 us against
// 76.6-76.7 (1.03-1.04x, two H200 calls, docs/PERFORMANCE.md "Session 5"). Session 25: 16 heads three per SM (5
// slots) instead of two (7) where the unsplit grid alone gives every SM three CTAs (prefill-like grids): prefill 4096
// x 16 1.10x, 1024 x 16 1.06x; not below, where a split grid would leave two of its shorter rings on an SM (T=128 with
// the planner's 2 splits 0.76x; with 3 level) or one CTA's latency rules (T = 4-8 0.96-0.97x; docs/PERFORMANCE.md
// "Session 25, calls 4-5"). GLM5RT_MLA_REG4=0 (read once; the name from session 5) keeps the default forms everywhere.
int reg_dense_ctas(int hc) { return hc == 8 ? 4 : hc == 16 ? 3 : 0; }
bool reg_dense(const SparseMlaParams& p, int hc) {
  static const int env = [] {
    const char* e = std::getenv("GLM5RT_MLA_REG4");
    return e ? std::atoi(e) : 1;
  }();
  if (env != 1 || reg_dense_ctas(hc) == 0 || p.format != MlaCacheFormat::kFp8 ||
      p.num_tokens <= kMlaJointPlanMaxTokens || kernel_variant(p, hc) != 7)
    return false;
  if (hc == 16 && static_cast<int64_t>(p.num_tokens) * (p.num_heads / 16) < 3LL * sm_count(p)) return false;
  return smem_per_sm() >= reg_dense_ctas(hc) * (sparse_mla_detail::reg_smem_bytes(hc, true) + 1024);
}

// CTAs of the chosen kernel that fit on one SM: shared memory (the device's per-SM capacity: 227 KB on
// H100 / H200, 100 KB on SM120, so one there) and registers (the 32-head kernels of variants 1 and 2 use
// more than 128 per thread at 256 threads: one per SM, as the 288-thread 32-head kernel of variant 5;
// variant 3 and the 128 / 160-thread kernels fit two).
int ctas_per_sm(const SparseMlaParams& p, int hc) {
  const int variant = kernel_variant(p, hc);
  const bool fp8 = p.format == MlaCacheFormat::kFp8;
  const int smem = smem_per_sm();
  const bool dense = reg_dense(p, hc);
  const int need =
      (dense ? sparse_mla_detail::reg_smem_bytes(hc, true) : sparse_mla_detail::kernel_smem_bytes(variant, hc, fp8)) +
      1024;
  const int by_smem = smem / need;
  // Variant 7 with FP8 records: its 8-head kernel is compiled for three CTAs per SM (5-slot ring), its dense forms
  // for four (8 heads) or three (16 heads; reg_dense).
  const bool reg3 = variant == 7 && fp8 && hc == 8;
  // Variant 10 (and 11 at 16 heads, which runs 10) is compiled for one CTA per SM (WsrCfg); variant 16 for two.
  const bool wsr = sparse_mla_detail::runs_wsr(variant == 11 ? 10 : variant, hc, fp8);
  const int by_regs = dense ? reg_dense_ctas(hc) : reg3 ? 3 : ((hc >= 32 && variant != 3) || wsr) ? 1 : 2;
  const int n = by_smem < by_regs ? by_smem : by_regs;
  return n > 1 ? n : 1;
}

int num_tiles(const SparseMlaParams& p) { return (p.topk + kTileTokens - 1) / kTileTokens; }

// Session 17: GLM5RT_MLA_PERSIST=0 (read once) turns variant 14's automatic persistent grid off. Session 18: =2 runs
// the persistent form wherever variant 14 runs one split, FP8 records included, even with one item per CTA (an A / B
// of its step loop against the one-CTA form's on the same grid).
int persist_mode() {
  static const int mode = [] {
    const char* e = std::getenv("GLM5RT_MLA_PERSIST");
    return e == nullptr ? 1 : std::atoi(e);
  }();
  return mode;
}

// Variant 14's grid (KernelArgs::grid_ctas): 0 = one CTA per work item, else the CTAs that fit on the SMs at once
// (or the items, if fewer), each taking items in turn (SparseMlaParams::persistent). Why: a 64-head CTA of 2048
// entries spends ~10 us of its ~138 outside its steady steps (H200, session 17 call 2: a fit over top-k 256-2048 at
// prefill 4096 x 64), its prologue (indices, Q, the first landings) and epilogue with the SM otherwise idle; a
// persistent CTA gathers the next item's first records and loads its Q under this item's last steps. Session 18: with
// bf16 records also where every item has a CTA of its own (T=128 H=64: its direct stores and per-warp staging beat the
// one-CTA form's staged epilogue and CTA-wide index staging, 1.03-1.035x at 512-entry rows, level at 2048; FP8 records
// 0.99-1.005x there, so they keep the one-CTA form).
int persistent_ctas(const SparseMlaParams& p, int nsplit) {
  if (p.persistent == 1 || (p.persistent == 0 && persist_mode() == 0)) return 0;
  const int64_t items = static_cast<int64_t>(p.num_tokens) * nsplit * (p.num_heads / 64);
  const int64_t slots = static_cast<int64_t>(sm_count(p)) * ctas_per_sm(p, 64);
  const int grid = static_cast<int>(items < slots ? items : slots);
  if (p.persistent == 2) return grid;  // always (also with splits, and one item per CTA)
  if (nsplit != 1) return 0;
  return items > slots || p.format == MlaCacheFormat::kBf16 || persist_mode() == 2 ? grid : 0;
}

// The split count actually run when `want` is asked for: at most one split per 32-token tile and
// kMaxSplits, at least enough that a split's indices fit in shared memory, and no empty trailing split.
int effective_splits(const SparseMlaParams& p, int want) {
  const int ntiles = num_tiles(p);
  const int max_tps = kMaxSplitEntries / kTileTokens;
  const int min_s = (ntiles + max_tps - 1) / max_tps;
  want = want > ntiles ? ntiles : want;
  want = want > kMaxSplits ? kMaxSplits : want;
  want = want < min_s ? min_s : want;
  const int tps = (ntiles + want - 1) / want;
  return (ntiles + tps - 1) / tps;
}

// Session 27: variant 16's split count: the most (a power of two) whose CTAs still fit one wave (two per H200 SM),
// at least one. Its sweeps' best at every measured T: 8 at T=32, 2 at T=128, 1 at T=256 and at 1024 (H200,
// docs/PERFORMANCE.md "Session 27, calls 4-5"), where session 10's model (fitted to variant 7's four CTAs per SM) took
// 2 at T=256 (127 against 106 us).
int v16_splits(const SparseMlaParams& p, int hc) {
  const int64_t slots = static_cast<int64_t>(sm_count(p)) * ctas_per_sm(p, hc);
  const int64_t base = static_cast<int64_t>(p.num_tokens) * (p.num_heads / hc);
  int s = 1;
  while (s < kMaxSplits && base * s * 2 <= slots) s *= 2;
  return effective_splits(p, s);
}

// Round 4's split choice (SparseMlaParams::planner = 1, and every T > kMlaJointPlanMaxTokens): a CTA is
// latency-bound (about one gather round trip per 32-token tile), so the model is in microseconds: waves *
// (tiles per split * 1 us + 2 us of Q / index loads and epilogue) + for s > 1 the combine kernel (2 us +
// 0.03 us per split + writing and reading the fp32 partials at 3 TB/s). Fitted to round 2-3's split sweeps.
int plan_splits_r4(const SparseMlaParams& p, int hc) {
  const int ntiles = num_tiles(p);
  const int64_t slots = static_cast<int64_t>(sm_count(p)) * ctas_per_sm(p, hc);
  const int64_t base = static_cast<int64_t>(p.num_tokens) * (p.num_heads / hc);
  // Session 9 (bf16 records): where one split per (token, head group) fits one wave and its latency estimate is
  // already below the records' gather time (at 3.6 TB/s, what these kernels reach), the shape is bound by the
  // records' bytes and a split only adds the merge: T=128 H=8 ran 81.3 us with 1 split against 86.9 with the
  // model's 2 (H200, both processes, docs/PERFORMANCE.md "Session 9"). FP8 records keep the model: variant 7 is
  // not memory-bound there (1 split 100 us against 71.4 with 2).
  if (p.format == MlaCacheFormat::kBf16 && base <= slots) {
    const double gather_us = static_cast<double>(p.num_tokens) * p.topk * kMlaBf16RecordBytes / 3.6e6;
    if (ntiles + 2.0 <= gather_us) return effective_splits(p, 1);
  }
  int best = effective_splits(p, 1);
  double best_cost = 1e300;
  const int max_s = ntiles < kMaxSplits ? ntiles : kMaxSplits;
  // Powers of two only: the grid the sweeps measured (and enough resolution for the model). Variant 7's
  // 8-head FP8 CTAs (three per H200 SM) also try 3 x 2^k, which fills 3 x 132 slots: measured at T=128
  // H=8, 3 splits 78.4 us against 2 splits 82.2 (round 6); the other variants' plans are unchanged.
  const bool thirds = hc == 8 && p.format == MlaCacheFormat::kFp8 && kernel_variant(p, hc) == 7;
  int cands[64];
  int nc = 0;
  for (int w = 1; w <= max_s && nc < 32; w *= 2) cands[nc++] = w;
  if (thirds)
    for (int w = 3; w <= max_s && nc < 64; w *= 2) cands[nc++] = w;  // after: ties keep the power of two
  for (int i = 0; i < nc; ++i) {
    const int want = cands[i];
    const int s = effective_splits(p, want);
    if (s != want && want != 1) continue;  // clamped: the same work as another candidate
    const int tps = (ntiles + s - 1) / s;
    const double waves = std::ceil(static_cast<double>(base * s) / static_cast<double>(slots));
    const double partial_bytes = 2.0 * s * static_cast<double>(p.num_tokens) * p.num_heads * kMlaLatentDim * 4;
    const double cost = waves * (tps * 1.0 + 2.0) + (s > 1 ? 2.0 + 0.03 * s + partial_bytes / 3e6 : 0.0);
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

// Session 10's split choice above kMlaJointPlanMaxTokens tokens (planner 2; round 4's model stays planner 1's), in
// microseconds per candidate s (powers of two):
//   max(ceil(C / (SMs * CTAs per SM)) * (tiles * a + w), ceil(C / SMs) * (tiles * b + w))
//   + (s > 1 ? m0 + m_mb * MB of bf16 partials (s * T * H KB) : 0),   C = T * H / hc * s CTAs, tiles per split.
// The second term is what round 4's model lacked: where the records' bytes bound a CTA, the CTAs that share an SM
// share its gather rate, so an SM's time is set by all the tiles placed on it (bf16: two 8-head CTAs on an SM run at
// about the rate of one; T=96 H=8 ran 77.5 us with round 4's 2 splits, 192 CTAs on 132 SMs, against 73.6 with 4).
// The first is the latency-bound side, where CTAs sharing an SM overlap (FP8 records: variant 7's compute per step).
// Constants: bench/sparse_mla/fit_splits_s10.py, a grid search minimising the shapes whose pick is more than 3% slower
// than their best forced split count, over three H200 sweeps of forced 1, 2, 4, 8, 16 splits (bench/results/s10/
// call3, call4, call5: T = 12-256 x H = 8-64, 96 shapes per format, two processes each). More than 3% off: bf16 7 of
// 96, FP8 7 (round 4's model: bf16 22 of 96, FP8 32 of 89 measurable; mean pick / best 1.008 / 1.006 against ~1.02 /
// 1.04); fitted to two of the sweeps, the third's shapes came out 1.005-1.014 on average. Candidates stop at 16
// splits, the sweeps' range (at T=16 H=8 FP8, 32 splits ran 19.5 us against 15.2 with 16). The 3 x 2^k candidates
// of round 4's FP8 rule are dropped (T=128 H=8: 3 splits 87.0 us against 71.6 with 2 since session 9's variant 7).
struct SplitModel {
  double a, b, w;   // us per 32-token tile per CTA slot / per SM, us per wave
  double m0, m_mb;  // the merge: fixed, per MB of bf16 partials
};
constexpr SplitModel kSplitModel[2] = {/* bf16 */ {0.2, 0.5, 1.0, 4.0, 0.5}, /* fp8 */ {1.2, 0.5, 1.0, 1.0, 0.5}};
// Session 11, variant 14 (64 heads per CTA, one CTA per SM): a CTA takes ~2.3 us per 32-token tile (H200, call 6 of
// docs/PERFORMANCE.md "Session 11": 144-151 us for 64 tiles), four to ten times the per-tile costs above, so that
// model made a second split look dearer than the half-empty second wave it avoids (T=192 H=64 and T=96 H=128, 192
// CTAs: 1 split 289-293 us, variant 11 284). Its merges, from call 3's forced splits (T = 32-128 x H = 64): 4-9 us +
// 1.1 us per MB of bf16 partials (m0 = 8 keeps one split where the model saw 96 CTAs with one split and 384 with
// four within 1%, and call 6 measured one split at 144-148 us). Picks the measured best at every variant-14 shape of
// calls 3 and 6 (T = 12-256, H = 64 / 128; fitted to them, not yet checked out of sample).
// Session 12, its FP8 form: the same with the per-tile cost raised by the conversion's share of the instructions
// (~25% more per step by count); 1, 2 and 4 forced splits at T = 32, 64, 128 x H = 64, 128 on the H200 (session 12,
// call 1): its choice was the fastest at all six.
constexpr SplitModel kSplitModelV14[2] = {/* bf16 */ {2.3, 2.3, 1.0, 8.0, 1.1}, /* fp8 */ {2.9, 2.9, 1.0, 8.0, 1.1}};
constexpr int kSplitModelMaxSplits = 16;

int plan_splits_s10(const SparseMlaParams& p, int hc) {
  const int f = p.format == MlaCacheFormat::kFp8 ? 1 : 0;
  const SplitModel& m = hc == 64 ? kSplitModelV14[f] : kSplitModel[f];
  const int ntiles = num_tiles(p);
  const double sms = sm_count(p), slots = sms * ctas_per_sm(p, hc);
  const double base = static_cast<double>(p.num_tokens) * (p.num_heads / hc);
  const int max_s = std::min({ntiles, kMaxSplits, kSplitModelMaxSplits});
  int best = effective_splits(p, 1);
  double best_cost = 1e300;
  for (int want = 1; want <= max_s; want *= 2) {
    const int s = effective_splits(p, want);
    if (s != want && want != 1) continue;  // clamped: the same work as another candidate
    const double tps = (ntiles + s - 1) / s, ctas = base * s;
    double cost = std::max(std::ceil(ctas / slots) * (tps * m.a + m.w), std::ceil(ctas / sms) * (tps * m.b + m.w));
    if (s > 1) cost += m.m0 + m.m_mb * ctas * hc * kMlaLatentDim * 2 / 1e6;
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

// Round 5's cost model (SparseMlaParams::planner = 2), in microseconds, for `hc` heads per CTA and `s`
// splits of a small-T launch:
//   waves * (cta_us[hc] + step_us[hc] * 16-token steps per split) + (s > 1 ? merge_us + merge_us_per_mb *
//   MB of fp32 partials (T * H * s * 2 KB, written by the main kernel and read by the merge) : 0),
// waves = ceil(T * H / hc * s / (SMs * CTAs per SM)). Constants per record format and heads per CTA
// (index 0 / 1 / 2 = 8 / 16 / 32), fitted by bench/sparse_mla/fit_plan.py to the H200 sweep of
// heads_per_cta x splits at T = 1 and 8 (docs/PERFORMANCE.md, "Round 5"); change them only to values that
// fit script prints for a measured sweep. Every (hc, s) it can pick at T <= 8 ran in that device call's
// tests (tests/gpu/test_sparse_mla.cu, "planner choices").
struct PlanModel {
  double cta_us[3];
  double step_us[3];
  double merge_us;
  double merge_us_per_mb;
};
// Fitted by fit_plan.py to the second round-5 H200 sweep (bench/results/sparse_mla-h200-round5b.json: 504
// timed plans at T = 1, 2, 4 and 8, H = 8..128; median model error 2.6% bf16 / 2.4% FP8, worst 15% / 11%).
// Earlier constants: after the first sweep (T = 1 and 8 only) bf16 {1.86, 2.19, 2.83}, {0.772, 0.788,
// 0.869}, 2.88, 0.61, FP8 {1.56, 1.76, 2.89}, {1.63, 1.78, 1.52}, 2.46, 0.571; before any round-5 sweep
// (solved from round 4's 9 points) bf16 {4.1, 5.0, 2.6}, {0.74, 0.75, 1.23}, 0.6, 0.65 and FP8 {3.9, 3.3,
// 2.7}, {1.57, 1.86, 1.89}, 0.6, 0.65.
constexpr PlanModel kPlanModel[2] = {
    /* bf16 */ {{1.72, 2.02, 2.55}, {0.779, 0.789, 0.886}, 3.05, 0.604},
    /* fp8  */ {{1.28, 1.31, 2.19}, {1.64, 1.78, 1.57}, 2.72, 0.6},
};

// The measured best plan of those sweeps for their exact shapes (top-k 2048, 132 SMs as on the H200, T = 1,
// 2, 4 and 8; T = 1 / 8 from the first sweep, T = 2 / 4 from the second), where the model's pick was slower
// (by up to 10%: e.g. bf16 T=8 H=16, FP8 T=1 H=64 / 128, FP8 T=2 H=32) or equal; the model decides
// everywhere else (other top-k or SM counts; T = 3, 5-7 until session 13's entries below). Every entry is a plan the
// tests of both device calls executed (tests/gpu/test_sparse_mla.cu, "planner choices": every heads per CTA x split
// count).
// Session 4, two H200 sweeps (bench/results/sparse_mla-h200-s4-small*-plans.json; FP8 now runs variant 7, which
// the round-5 entries predate; call 2 with bf16 partials, combine 5, as the automatic chunked merge): an entry
// whose plan was > 1.5% slower than the sweep's best took the best plan and, where it was not the automatic
// merge, that merge (e.g. bf16 T=2 / 4 H=8 with fp32 partials: 7.77 / 9.18 against 8.16 / 9.48 us with bf16
// ones); FP8 T=1 H=64 32x64 -> 8x32 (12.19 -> 10.45 us), T=1 H=128 -> 16x32 (15.47 -> 13.82), T=2 H=16 / 32 / 64,
// T=4 H=16 / 32; bf16 T=8 H=8 / 16 / 64. Every entry ran in that call's tests (planner grids: every heads per
// CTA x split count x merge).
// Session 7, one H200 plan sweep of bf16 T = 1, 2, 4, 8 x H = 32, 64, 128 after variants 10 / 11 made the 32-head
// CTAs faster (bench/results/sparse_mla-h200-s7-plans.json): the entries whose plan was >= 5% slower than the
// sweep's best took it: T=1 H=128 8x16 -> 16x16 (13.73 -> 12.92 us), T=2 H=64 8x16 -> 16x16 (13.60 -> 12.94),
// T=2 H=128 16x16 -> 32x16 (16.77 -> 15.34), T=4 H=32 8x16 -> 16x16 (13.87 -> 13.18), T=4 H=64 16x16 -> 32x16
// (17.01 -> 15.47), T=8 H=32 16x16 -> 32x16 (17.57 -> 16.00).
// Session 8, the plan sweeps of both formats with the main kernels' PDL off and on (GLM5RT_MLA_PDL 0 / 2, one H200
// call, bench/results/s8-pdl/call2/): no plan was >= 3% faster than its entry; four bf16 8-head entries were 2-2.5%
// faster with fp32 partials (combine 2) in both sweeps (and T=1 H=64 in session 7's), so they take them: T=1 H=64
// 8x32 (9.98 -> 9.79 us), T=2 H=16 8x64 -> 8x32 (8.46 -> 8.28), T=2 H=32 8x32 (10.09 -> 9.88), T=4 H=16 8x32
// (10.62 -> 10.36) (PDL 2 figures).
// Session 9, one H200 plan sweep of both formats at T = 1, 2, 4, 8 after variant 7's gather and V-conversion changes
// made its 16-head CTAs cheaper (bench/results/s9/call5/): bf16 entries within 1% of the best (unchanged); seven FP8
// entries whose plan was >= 3% slower took the best, all with fp32 partials except the last: T=1 H=32 8x64 -> 8x32
// (8.27 -> 7.90 us), T=1 H=64 8x32 -> 16x32 (10.28 -> 9.73), T=2 H=16 8x64 -> 8x32 (8.46 -> 8.01), T=2 H=32 8x32 ->
// 16x32 (10.21 -> 9.83), T=4 H=8 8x64 -> 8x32 (8.81 -> 8.46), T=4 H=16 8x32 -> 16x32 (10.45 -> 10.05), T=8 H=16
// 16x32 -> 16x16 (14.46 -> 14.01).
// Session 13, three H200 plan sweeps of T = 1, 2, 4, 8 x H = 64, 128 (bench/results/s13/call1, call2): three bf16
// entries were 3-5.5% slower than the sweep's best in all three and took it: T=1 H=64 8x32 -> 16x32 (9.74-9.83 ->
// 9.21-9.29 us), T=2 H=128 32x16 -> 16x8 (15.12-15.21 -> 14.66-14.76), T=4 H=64 32x16 -> 16x8 (15.33-15.43 ->
// 14.66-14.88); two T=3 entries (two processes, call 3): bf16 H=64 16x8 (model 32x16: 15.09 -> 14.43-14.46 us), FP8
// H=64 32x16 (model 8x16: 20.16-20.18 -> 17.43-17.50). Variant 14's plans at T <= 8 come first (small_t_v14_splits).
// Session 13, call 8: T = 3, 5, 6, 7 x H = 8, 16, 32 (two processes, bench/results/s13/call8): the 15 shapes whose
// model pick was >= 3% slower than the swept best in both took it (bf16 at 16 heads 1.06-1.17x with 16-head CTAs,
// e.g. T=7 H=16 13.61-13.70 -> 11.70-11.77 us; bf16 T=3 H=32 12.62-12.68 -> 10.58-10.61; FP8 at 32 heads 1.05-1.14x,
// e.g. T=6 with 32-head CTAs 20.38-20.40 -> 17.83-17.84); the other 9 were within 3% and kept the model's, except bf16
// T=5 H=32, 2.9-4.6% off in all three sweeps of calls 8-9 (16x8: 14.40-14.50 us against 14.82-15.20). Calls 10-11
// (three sweeps): bf16 T=2 H=32 8x32 -> 16x32 (9.80-9.87 -> 9.44-9.48 us), bf16 T=8 H=32 32x16 -> 16x8 (15.92-16.01
// -> 15.02-15.12; session 7 had chosen 32x16), FP8 T=7 H=16 model 16x32 -> 16x16 (13.83-13.95 -> 13.47-13.48).
// Session 15, after variant 10's direct stores (two H200 calls of plan sweeps at T = 1, 2, 4 x H = 32, 64, 128,
// bench/results/s15/call3, call5): bf16 T=1 H=32 8x64 -> 16x32 with bf16 partials (8.09-8.13 -> 7.65-7.70 us, the one
// entry >= 3% slower than the best in both); the rest within 3% or not the same best twice.
// Session 30, three H200 plan sweeps of both formats at T = 1-8 x H = 8-128 after 32-head bf16 CTAs went back to
// variant 10 (bench/results/s30/c3/plan-sweeps.tar.xz, read by bench/sparse_mla/plan_sweeps.py): the entries >= 3%
// slower than one plan in all three sweeps took it: bf16 T=1 H=64 16x32 with bf16 partials (fp32 ones were 2% faster in
// session 8, now 4-5% slower: 9.31 -> 8.91 us), T=2 H=16 8x32 -> 16x32 (8.31 -> 7.86), T=2 H=128 16x8 -> 32x16 (14.23
// -> 13.59), T=3 H=64 16x8 -> 32x16 (13.86 -> 13.27), T=4 H=16 8x32 -> 16x16 (10.50 -> 9.69), T=4 H=64 16x8 -> 32x16
// (14.24 -> 13.76), T=5 H=32 16x8 -> 32x16 (13.78 -> 13.16); FP8 T=2 H=128 32x16 -> 64x32 (variant 14: 18.11 -> 16.86),
// T=3 H=64 and T=4 H=64 32x16 -> 64x32 (17.46 -> 16.62, 18.34 -> 17.34); and bf16 T=2 H=32 its plan with bf16 partials
// (2.7-4.3% faster in all three: 9.54 -> 9.22).
struct MeasuredPlan {
  MlaCacheFormat format;
  int tokens, heads, hc, splits;
  // Session 4: the merge, as SparseMlaParams::combine (0 = combine_mode's automatic rule; 2 / 5 = fp32 / bf16
  // partials + chunked combine), used when combine is automatic.
  int merge;
};
constexpr MeasuredPlan kMeasuredPlans[] = {
    {MlaCacheFormat::kBf16, 1, 8, 8, 64},         {MlaCacheFormat::kBf16, 1, 16, 8, 64},
    {MlaCacheFormat::kBf16, 1, 32, 16, 32, 5},    {MlaCacheFormat::kBf16, 1, 64, 16, 32, 5},
    {MlaCacheFormat::kBf16, 1, 128, 16, 16},      {MlaCacheFormat::kBf16, 2, 8, 8, 64, 2},
    {MlaCacheFormat::kBf16, 2, 16, 16, 32, 5},    {MlaCacheFormat::kBf16, 2, 32, 16, 32, 5},
    {MlaCacheFormat::kBf16, 2, 64, 16, 16},       {MlaCacheFormat::kBf16, 2, 128, 32, 16, 5},
    {MlaCacheFormat::kBf16, 3, 8, 8, 32, 2},      {MlaCacheFormat::kBf16, 3, 16, 16, 32},
    {MlaCacheFormat::kBf16, 3, 32, 16, 16},       {MlaCacheFormat::kBf16, 3, 64, 32, 16, 5},
    {MlaCacheFormat::kBf16, 4, 8, 8, 32, 2},      {MlaCacheFormat::kBf16, 4, 16, 16, 16, 5},
    {MlaCacheFormat::kBf16, 4, 32, 16, 16},       {MlaCacheFormat::kBf16, 4, 64, 32, 16, 5},
    {MlaCacheFormat::kBf16, 4, 128, 32, 8},       {MlaCacheFormat::kBf16, 5, 16, 16, 16},
    {MlaCacheFormat::kBf16, 5, 32, 32, 16, 5},    {MlaCacheFormat::kBf16, 6, 8, 8, 16},
    {MlaCacheFormat::kBf16, 6, 16, 16, 16},       {MlaCacheFormat::kBf16, 6, 32, 16, 8},
    {MlaCacheFormat::kBf16, 7, 8, 8, 16},         {MlaCacheFormat::kBf16, 7, 16, 16, 16},
    {MlaCacheFormat::kBf16, 7, 32, 16, 8},        {MlaCacheFormat::kBf16, 8, 8, 8, 16},
    {MlaCacheFormat::kBf16, 8, 16, 16, 16},       {MlaCacheFormat::kBf16, 8, 32, 16, 8},
    {MlaCacheFormat::kBf16, 8, 64, 32, 8},        {MlaCacheFormat::kBf16, 8, 128, 32, 4},
    {MlaCacheFormat::kFp8, 1, 8, 8, 64},          {MlaCacheFormat::kFp8, 1, 16, 8, 64},
    {MlaCacheFormat::kFp8, 1, 32, 8, 32, 2},      {MlaCacheFormat::kFp8, 1, 64, 16, 32, 2},
    {MlaCacheFormat::kFp8, 1, 128, 16, 32},       {MlaCacheFormat::kFp8, 2, 8, 8, 64},
    {MlaCacheFormat::kFp8, 2, 16, 8, 32, 2},      {MlaCacheFormat::kFp8, 2, 32, 16, 32, 2},
    {MlaCacheFormat::kFp8, 2, 64, 16, 32},        {MlaCacheFormat::kFp8, 2, 128, 64, 32, 5},
    {MlaCacheFormat::kFp8, 3, 8, 8, 32, 2},       {MlaCacheFormat::kFp8, 3, 32, 16, 32, 2},
    {MlaCacheFormat::kFp8, 3, 64, 64, 32, 5},     {MlaCacheFormat::kFp8, 4, 8, 8, 32, 2},
    {MlaCacheFormat::kFp8, 4, 16, 16, 32, 2},     {MlaCacheFormat::kFp8, 4, 32, 16, 32},
    {MlaCacheFormat::kFp8, 4, 64, 64, 32, 5},     {MlaCacheFormat::kFp8, 4, 128, 32, 8},
    {MlaCacheFormat::kFp8, 5, 32, 32, 16},        {MlaCacheFormat::kFp8, 6, 16, 16, 32, 2},
    {MlaCacheFormat::kFp8, 6, 32, 32, 16},        {MlaCacheFormat::kFp8, 7, 16, 16, 16},
    {MlaCacheFormat::kFp8, 8, 8, 8, 32},          {MlaCacheFormat::kFp8, 8, 16, 16, 16},
    {MlaCacheFormat::kFp8, 8, 32, 32, 16},        {MlaCacheFormat::kFp8, 8, 64, 32, 8},
    {MlaCacheFormat::kFp8, 8, 128, 32, 4},
};
constexpr int kMeasuredPlanTopk = 2048;
constexpr int kMeasuredPlanSms = 132;

// Whether the planner may give a small-T launch variant 14's 64-head CTAs: the automatic kernel choice, H a multiple
// of 64, sm_90+ (its rows come by bulk copies), GLM5RT_MLA_V14 not off.
bool small_t_v14_allowed(const SparseMlaParams& p) {
  return p.kernel_variant == 0 && p.num_heads % 64 == 0 && cc_major() >= 9 && v14_enabled();
}

// Session 13: variant 14 (64 heads per CTA) at T <= kMlaJointPlanMaxTokens, first timed there with small-T split
// counts in that session's plan sweeps (bench/results/s13/call1-3: both formats, T = 1-8 x H = 64, 128, 1-64 splits,
// three processes at T = 1, 2, 4, 8 and two at 3, 5, 6, 7). It won wherever its grid of G = T * H / 64 head groups x
// s splits filled >= 0.6 of the SMs with splits of >= 4 (FP8) / 8 (bf16) 32-token tiles, s the largest power of two
// with G * s <= SMs: FP8 at G >= 5 (10 shapes; 1.13-1.36x over the best plan of 8-32 heads per CTA, e.g. T=5-8 x
// H=128 1.35-1.36x, T=5-8 x H=64 1.13x), bf16 at G >= 10 (T = 5-8 x H = 128: 1.07-1.10x), and lost at the 22 other
// shapes (FP8 T=4 H=64 0.90x at its best, 128 CTAs of 2 tiles; bf16 T=8 H=64 0.92x, 128 of 4; T <= 2 0.63-0.92x);
// at each of the 14 shapes where it won, the fastest variant-14 split count was the rule's.
// Returns that split count, or 0 where the rule keeps the smaller CTAs. Only where variant 14 may run automatically
// (sm_90+, GLM5RT_MLA_V14 not 0, no kernel forced); unmeasured on other SM counts (SM120 cards: 170-188 SMs).
// (Session 30: with its FP8 form's f16 rows and wide Q loads, 64 x 32 now wins at FP8 T = 2-4 x H = 64 / 128,
// 1.05-1.08x, which this rule does not pick; those three are measured plans, kMeasuredPlans.)
int small_t_v14_splits(const SparseMlaParams& p) {
  if (!small_t_v14_allowed(p)) return 0;
  const int groups = p.num_tokens * (p.num_heads / 64);
  const int sms = sm_count(p) * ctas_per_sm(p, 64);
  const int min_tiles = p.format == MlaCacheFormat::kFp8 ? 4 : 8;
  const int ntiles = num_tiles(p);
  int best = 0;
  for (int s = 1; s <= kMaxSplits && groups * s <= sms && ntiles / s >= min_tiles; s *= 2)
    if (effective_splits(p, s) == s) best = s;
  return best > 0 && groups * best * 10 >= sms * 6 ? best : 0;
}

int hc_index(int hc) { return hc == 8 ? 0 : hc == 16 ? 1 : 2; }

// The chunked merge the automatic choice runs where the fused one cannot (session 4): 5 = bf16 partials
// (half the bytes of 2's fp32 ones). One-line flip back to fp32 partials: 5 -> 2 (or, without a rebuild,
// GLM5RT_MLA_COMBINE=2, which also replaces the fused merge).
constexpr int kAutoChunkedMerge = 5;
int combine_mode(const SparseMlaParams& p, int nsplit, int hc, int plan_merge);

double plan_cost_r5(const SparseMlaParams& p, int hc, int s) {
  const PlanModel& m = kPlanModel[p.format == MlaCacheFormat::kFp8 ? 1 : 0];
  const int ntiles = num_tiles(p);
  const int tps = (ntiles + s - 1) / s;
  const double steps = 2.0 * tps;  // 16-token steps per split
  const double ctas = static_cast<double>(p.num_tokens) * (p.num_heads / hc) * s;
  const double slots = static_cast<double>(sm_count(p)) * ctas_per_sm(p, hc);
  const double waves = std::ceil(ctas / slots);
  const int i = hc_index(hc);
  // Partial bytes: 2 per value where the merge is the bf16 chunked one (combine 5), else 4.
  const int value_bytes = s > 1 && combine_mode(p, s, hc, 0) == 5 ? 2 : 4;
  const double mb = static_cast<double>(p.num_tokens) * p.num_heads * s * kMlaLatentDim * value_bytes / 1e6;
  return waves * (m.cta_us[i] + m.step_us[i] * steps) + (s > 1 ? m.merge_us + m.merge_us_per_mb * mb : 0.0);
}

struct Plan {
  int hc = 0;      // heads per CTA (0: invalid parameters)
  int splits = 1;
  int merge = 0;   // the merge when combine is automatic: 0 = combine_mode's rule, else its combine value
};

// Round 5's choice for a fixed hc: the cheapest power-of-two split count under plan_cost_r5.
Plan plan_r5_for(const SparseMlaParams& p, int hc) {
  Plan best{hc, effective_splits(p, 1), 0};
  double best_cost = 1e300;
  const int ntiles = num_tiles(p);
  const int max_s = ntiles < kMaxSplits ? ntiles : kMaxSplits;
  for (int want = 1; want <= max_s; want *= 2) {
    const int s = effective_splits(p, want);
    if (s != want && want != 1) continue;
    const double c = plan_cost_r5(p, hc, s);
    if (c < best_cost - 1e-9) {
      best_cost = c;
      best.splits = s;
    }
  }
  return best;
}


// Heads per CTA and split count of a launch (a pure function of the parameters, the SM count and the
// device's shared memory per SM, so workspace_size, num_splits and forward agree).
Plan plan(const SparseMlaParams& p) {
  const int hc0 = requested_heads_per_cta(p);
  if (hc0 == 0) return Plan{0, 1};
  if (p.num_splits > 0) return Plan{hc0, effective_splits(p, p.num_splits)};
  if (planner_mode(p) == 1) return Plan{hc0, plan_splits_r4(p, hc0)};
  // Variant 14 forced (or automatic above kMlaJointPlanMaxTokens): session 11's split model; its automatic plans at
  // T <= kMlaJointPlanMaxTokens come from small_t_v14_splits.
  if (hc0 == 64) return Plan{64, plan_splits_s10(p, 64)};
  if (p.num_tokens > kMlaJointPlanMaxTokens && kernel_variant(p, hc0) == 16) return Plan{hc0, v16_splits(p, hc0)};
  if (p.num_tokens > kMlaJointPlanMaxTokens) return Plan{hc0, plan_splits_s10(p, hc0)};
  if (p.heads_per_cta != 0) return plan_r5_for(p, hc0);
  // bf16 partials: the merge of the sweeps' best variant-14 plans (all but one; that one 1% apart).
  if (const int s = small_t_v14_splits(p)) return Plan{64, s, 5};
  if (p.topk == kMeasuredPlanTopk && sm_count(p) == kMeasuredPlanSms)
    for (const MeasuredPlan& m : kMeasuredPlans)
      if (m.format == p.format && m.tokens == p.num_tokens && m.heads == p.num_heads &&
          (m.hc != 64 || small_t_v14_allowed(p)))  // 64 heads per CTA: variant 14's conditions
        return Plan{m.hc, effective_splits(p, m.splits), m.merge};
  // Both automatic: every head group size dividing H, largest first (a tie keeps fewer groups: fewer
  // re-reads of the records from L2).
  Plan best{0, 1};
  double best_cost = 1e300;
  for (int hc : {32, 16, 8}) {
    if (hc > p.num_heads || p.num_heads % hc != 0) continue;
    const Plan c = plan_r5_for(p, hc);
    const double cost = plan_cost_r5(p, c.hc, c.splits);
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = c;
    }
  }
  return best;
}

// The split weights of one (t, h) row, shared by both combine kernels: a block of 128 threads (4 warps)
// in which thread tid holds split tid's log2-domain LSE (-inf past nsplit and for empty splits). Writes
// w_s[tid] = exp2(ls - block max) (0 for -inf) and returns the block max and the sum of the weights (the
// same for every thread). Three block barriers; the caller may reuse red[] only after a fourth.
struct SplitWeights {
  float m;     // max of the split LSEs (-inf when every split is empty)
  float wsum;  // sum of w_s over the splits (0 when every split is empty)
};
__device__ __forceinline__ SplitWeights split_weights_128(float ls, float* w_s, float* red) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float m = ls;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
  const float m_use = m == -INFINITY ? 0.f : m;
  const float w = ls == -INFINITY ? 0.f : exp2f(ls - m_use);
  w_s[tid] = w;
  float wsum = w;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) wsum += __shfl_xor_sync(0xffffffffu, wsum, off);
  __syncthreads();  // w_s complete; red[] reads above are done
  if (lane == 0) red[warp] = wsum;
  __syncthreads();
  return SplitWeights{m, (red[0] + red[1]) + (red[2] + red[3])};
}

// One block of 128 threads per (t, h) row: the split LSEs are loaded in parallel (one per thread) and turned
// into weights in shared memory, then each thread sums 4 output dims over the splits with independent loads.
// Empty splits have weight 0 and wrote zeros, so no branch is needed in the sum.
__global__ void __launch_bounds__(kMaxSplits) sparse_mla_combine(const float* __restrict__ part_o,
                                                                 const float* __restrict__ part_lse, int nsplit,
                                                                 int64_t rows, __nv_bfloat16* __restrict__ out,
                                                                 float* __restrict__ lse, int release_early,
                                                                 unsigned long long* /*timeline: not probed*/) {
  __shared__ float w_s[kMaxSplits];
  __shared__ float red[kMaxSplits / 32];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Session 8: the next call's main kernel (a programmatic dependent, KernelArgs::pdl) may be launched once every
  // block of this grid has started; it waits for this grid's completion before any global access.
  if (release_early) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // Launched as a programmatic dependent of the main kernel (sm_90+): this block may start before the main
  // kernel has finished; wait here until it has completed and its partials are visible. A no-op when the
  // launch was an ordinary one.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int64_t row = blockIdx.x;  // t * H + h
  const int tid = threadIdx.x;
  const float ls = tid < nsplit ? part_lse[tid * rows + row] : -INFINITY;
  const SplitWeights sw = split_weights_128(ls, w_s, red);
  const float m = sw.m, wsum = sw.wsum;
  const int d = tid * 4;
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  if (wsum > 0.f) {
#pragma unroll 8
    for (int s = 0; s < nsplit; ++s) {
      const float ws = w_s[s];
      const float4 x = *reinterpret_cast<const float4*>(part_o + (s * rows + row) * kMlaLatentDim + d);
      o.x += ws * x.x;
      o.y += ws * x.y;
      o.z += ws * x.z;
      o.w += ws * x.w;
    }
    const float inv = 1.f / wsum;
    o.x *= inv;
    o.y *= inv;
    o.z *= inv;
    o.w *= inv;
  }
  __nv_bfloat162 lo = __floats2bfloat162_rn(o.x, o.y), hi = __floats2bfloat162_rn(o.z, o.w);
  uint2 packed;
  packed.x = *reinterpret_cast<uint32_t*>(&lo);
  packed.y = *reinterpret_cast<uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(out + row * kMlaLatentDim + d) = packed;
  if (tid == 0) lse[row] = wsum > 0.f ? (m + log2f(wsum)) * 0.69314718055994531f : -INFINITY;
}

// Chunked combine (SparseMlaParams::combine = 2): a block of 128 threads per (t, h) row and 128-dim quarter
// (4x the blocks of round 3's kernel, so T = 1 spreads over more SMs). Thread (lane, warp) owns dims
// quarter * 128 + lane * 4 .. + 3 of the splits warp, warp + 4, ...: every load of the block is issued
// before the first is used (up to 32 float4 per thread = the whole 64 KB of a 128-split row quarter in
// one L2 round trip, where round 3's kernel made nsplit / 8 dependent rounds). The split LSEs are loaded
// at the same time, one per thread; the four warps' sums meet in shared memory.
// BF16 (combine = 5, session 4): the partials are bf16 (half the bytes), loaded raw and widened when used.
template <int KPER, bool BF16 = false>  // KPER: splits per warp, >= ceil(nsplit / 4): the smallest power of two
__global__ void __launch_bounds__(128) sparse_mla_combine_chunked(const float* __restrict__ part_o,
                                                                  const float* __restrict__ part_lse, int nsplit,
                                                                  int64_t rows, __nv_bfloat16* __restrict__ out,
                                                                  float* __restrict__ lse, int release_early,
                                                                  unsigned long long* timeline) {
  __shared__ float w_s[kMaxSplits];
  __shared__ float red[4];
  __shared__ float4 part[4][32];
  // Session 15's timeline probe (SparseMlaParams::debug_timeline): per block, 0 entry, 1 past the wait, 2 stored.
  auto stamp = [&](int slot) {
    if (threadIdx.x == 0) sparse_mla_detail::timeline_stamp(timeline, slot, kCombineTimelineSlots);
  };
  stamp(0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (release_early) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // see sparse_mla_combine
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  stamp(1);
  const int64_t row = blockIdx.x >> 2;
  const int quarter = blockIdx.x & 3;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int d = quarter * 128 + lane * 4;
  const float ls = tid < nsplit ? part_lse[tid * rows + row] : -INFINITY;
  constexpr int kPer = KPER;
  float4 x[BF16 ? 1 : kPer];
  uint2 xb[BF16 ? kPer : 1];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    // Unconditional loads, pinned before the barriers (see ld_cg_pinned): past nsplit the address is
    // clamped to the last split, an L2 hit that gets weight 0 below.
    const int s = min(warp + 4 * i, nsplit - 1);
    if constexpr (BF16)
      xb[i] = sparse_mla_detail::ld_cg_pinned_u2(reinterpret_cast<const __nv_bfloat16*>(part_o) +
                                                 (s * rows + row) * kMlaLatentDim + d);
    else
      x[i] = sparse_mla_detail::ld_cg_pinned(part_o + (s * rows + row) * kMlaLatentDim + d);
  }
  const SplitWeights sw = split_weights_128(ls, w_s, red);
  const float m = sw.m, wsum = sw.wsum;
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int s = warp + 4 * i;
    const float ws = s < nsplit ? w_s[s] : 0.f;  // never read w_s out of range
    float4 v;
    if constexpr (BF16) {
      // bf16 -> fp32 is a 16-bit shift of each half.
      v = make_float4(__uint_as_float(xb[i].x << 16), __uint_as_float(xb[i].x & 0xffff0000u),
                      __uint_as_float(xb[i].y << 16), __uint_as_float(xb[i].y & 0xffff0000u));
    } else {
      v = x[i];
    }
    o.x += ws * v.x;
    o.y += ws * v.y;
    o.z += ws * v.z;
    o.w += ws * v.w;
  }
  part[warp][lane] = o;
  __syncthreads();
  if (warp == 0) {
    const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
    float4 r = part[0][lane];
#pragma unroll
    for (int k = 1; k < 4; ++k) {
      r.x += part[k][lane].x;
      r.y += part[k][lane].y;
      r.z += part[k][lane].z;
      r.w += part[k][lane].w;
    }
    __nv_bfloat162 lo = __floats2bfloat162_rn(r.x * inv, r.y * inv), hi = __floats2bfloat162_rn(r.z * inv, r.w * inv);
    uint2 packed;
    packed.x = *reinterpret_cast<uint32_t*>(&lo);
    packed.y = *reinterpret_cast<uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(out + row * kMlaLatentDim + d) = packed;
    if (quarter == 0 && lane == 0) lse[row] = wsum > 0.f ? (m + log2f(wsum)) * 0.69314718055994531f : -INFINITY;
  }
  if (timeline != nullptr) {
    __syncthreads();
    stamp(2);
  }
}

// The combine that runs (1 = round 3's kernel, 2 = chunked kernel, 3 = fused into the main kernel).
// Automatic: fused where a row group's partials are small (one CTA merges nsplit * HC partial rows), else
// chunked. GLM5RT_MLA_COMBINE=1/2/3 overrides the automatic choice (read once per process) so that a run
// can time or fall back to the old path without a rebuild; an explicit params.combine wins over both.
// Session 4: 5 = the chunked combine over bf16 partials, the automatic chunked merge (kAutoChunkedMerge); a
// plan may name its merge (plan_merge, from kMeasuredPlans), used when combine is automatic. (4 was the
// cluster merge of session 4's first call, measured slower everywhere and removed: rejected.)
int combine_mode(const SparseMlaParams& p, int nsplit, int hc, int plan_merge) {
  static const int env = [] {
    const char* e = std::getenv("GLM5RT_MLA_COMBINE");
    const int v = e ? std::atoi(e) : 0;
    return v >= 1 && v <= 5 && v != 4 ? v : 0;
  }();
  int mode = p.combine >= 1 && p.combine <= 5 && p.combine != 4 ? p.combine : env;
  if (mode == 0) mode = plan_merge;  // the plan's own merge (kMeasuredPlans), if any
  const int64_t groups = static_cast<int64_t>(p.num_tokens) * (p.num_heads / hc);
  // Too many partials for one CTA (its loads are sized at compile time) or not enough counters: chunked.
  const bool fused_ok = groups <= kMlaCombineCounters && nsplit * hc <= kMlaFusedMaxPartials;
  if (mode == 0) return fused_ok ? 3 : kAutoChunkedMerge;
  if (mode == 3 && !fused_ok) return 2;
  return mode;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

int sparse_mla_num_splits(const SparseMlaParams& p) {
  if (p.topk < 1 || !valid_heads(p.num_heads) || p.num_tokens < 1 || requested_heads_per_cta(p) == 0) return 1;
  return plan(p).splits;
}

int sparse_mla_heads_per_cta(const SparseMlaParams& p) {
  if (!valid_heads(p.num_heads) || requested_heads_per_cta(p) == 0) return 0;
  if (p.topk < 1 || p.num_tokens < 1) return requested_heads_per_cta(p);
  return plan(p).hc;
}

int sparse_mla_combine_kind(const SparseMlaParams& p) {
  if (p.topk < 1 || !valid_heads(p.num_heads) || p.num_tokens < 1 || requested_heads_per_cta(p) == 0) return 0;
  const Plan pl = plan(p);
  if (pl.splits <= 1) return 0;
  return combine_mode(p, pl.splits, pl.hc, pl.merge);
}

namespace {

// The workspace of one launch of the plan (no tail split).
size_t launch_workspace_size(const SparseMlaParams& p) {
  const int s = sparse_mla_num_splits(p);
  if (s <= 1) return 0;
  const size_t rows = static_cast<size_t>(s) * p.num_tokens * p.num_heads;
  // [fused-combine counters, zero between calls][partial outputs][partial LSEs]
  return kMlaCombineCounterBytes + rows * kMlaLatentDim * sizeof(float) + rows * sizeof(float);
}

// Session 12: the last partial wave of a one-split variant-14 grid (one CTA per token, one per SM), split finer. With
// T = k * SMs + r tokens and r <= SMs / 2, the grid's last wave runs r CTAs of a full CTA's length while the other SMs
// idle (prefill 4096 x 64 on 132 SMs: 31 waves and 4 CTAs, ~3% of the time). The last r tokens then run as a launch
// of their own with SMs / r splits (their partials merged as any split launch's), after the first T - r tokens' launch
// (its programmatic dependent: placed as that grid drains, it waits for it before starting). Automatic plans only;
// GLM5RT_MLA_TAIL=0 (read once) turns it off.
struct TailSplit {
  bool on = false;
  SparseMlaParams bulk, tail;
};

bool tail_enabled() {
  static const bool on = env_not_off("GLM5RT_MLA_TAIL");
  return on;
}

// Session 24: the tail launch runs its splits while the bulk grid's slowest CTAs finish and waits for that grid only
// before exiting (KernelArgs::pdl = 2, sparse_mla_wsp_kernel), instead of waiting for it before starting: at prefill
// 4096 x 64 the tail launch took 23 us at the boost clock, 19 us more than its work (docs/PERFORMANCE.md "Session 24,
// call 9"). Only with the default programmatic launches (GLM5RT_MLA_PDL 2: the previous call's merge has completed
// before this call's bulk grid starts, so the tail's partials are free). GLM5RT_MLA_TAIL_EARLY=0 (read once) turns it
// off.
bool tail_waits_late() {
  static const bool on = env_not_off("GLM5RT_MLA_TAIL_EARLY");
  return on;
}

// Session 25: the tail launch's split count; GLM5RT_MLA_TAIL_SPLITS (read once, 2-64) replaces the default, one CTA
// per SM the bulk grid leaves (slots / tail tokens). Why a knob: when the tail starts early (tail_waits_late) its CTAs
// take the SMs in the order the bulk grid frees them, so fewer, longer pieces on the first SMs freed may end before
// the slowest bulk CTA where one piece per SM would put some on the last SMs freed.
int tail_splits_env() {
  static const int v = env_in_range("GLM5RT_MLA_TAIL_SPLITS", 0, 2, 64);
  return v;
}

TailSplit tail_split(const SparseMlaParams& p) {
  TailSplit ts;
  if (!tail_enabled() || p.num_splits != 0 || (p.heads_per_cta != 0 && p.heads_per_cta != 64) ||
      (p.kernel_variant != 0 && p.kernel_variant != 14) || p.topk < 1 || p.num_heads != 64 || p.num_tokens < 2)
    return ts;
  const Plan pl = plan(p);
  if (pl.hc != 64 || pl.splits != 1) return ts;
  const int slots = sm_count(p) * ctas_per_sm(p, 64);
  const int r = p.num_tokens % slots;
  if (p.num_tokens < slots || r == 0 || 2 * r > slots) return ts;
  const int s = effective_splits(p, tail_splits_env() != 0 ? tail_splits_env() : slots / r);
  if (s < 2) return ts;
  const int t0 = p.num_tokens - r;
  ts.on = true;
  ts.bulk = p;
  ts.bulk.num_tokens = t0;
  ts.bulk.num_splits = 1;
  ts.bulk.heads_per_cta = 64;
  ts.tail = p;
  ts.tail.num_tokens = r;
  ts.tail.num_splits = s;
  ts.tail.heads_per_cta = 64;
  // The tail's rows (a null pointer stays null, for the first launch's checks to reject; the split itself does not
  // depend on the pointers: sparse_mla_workspace_size is called without them).
  const int64_t rows = static_cast<int64_t>(t0) * p.num_heads;
  if (p.q) ts.tail.q = static_cast<const uint16_t*>(p.q) + rows * kMlaQkDim;
  if (p.indices) ts.tail.indices = p.indices + static_cast<int64_t>(t0) * p.topk;
  if (p.lengths) ts.tail.lengths = p.lengths + t0;
  if (p.row_pool) ts.tail.row_pool = p.row_pool + t0;
  if (p.out) ts.tail.out = static_cast<uint16_t*>(p.out) + rows * kMlaLatentDim;
  if (p.lse) ts.tail.lse = p.lse + rows;
  return ts;
}

// tail: the second launch of a split last wave (tail_split), whose predecessor is the first.
cudaError_t launch_plan(const SparseMlaParams& p, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                        bool tail = false) {
  // With a pool table the per-pool slot counts live on the device (checked there); cache / num_slots unused.
  const bool multi = p.pools != nullptr;
  if (multi && (p.row_pool == nullptr || p.num_pools < 1 || p.pool_layer < 0)) return cudaErrorInvalidValue;
  if (p.num_tokens < 0 || p.topk < 1 || p.topk > kMaxSplits * kMaxSplitEntries || !valid_heads(p.num_heads) ||
      (!multi && (p.num_slots < 1 || p.num_slots > 0x7fffffffLL + 1)) || !std::isfinite(p.softmax_scale) || requested_heads_per_cta(p) == 0 ||
      p.kernel_variant < 0 ||
      (p.kernel_variant > 7 && p.kernel_variant != 10 && p.kernel_variant != 11 && p.kernel_variant != 14 &&
       p.kernel_variant != 16) ||
      p.kernel_variant == 4 ||
      p.kernel_variant == 6 || p.combine < 0 || p.combine > 5 || p.combine == 4 ||
      p.planner < 0 || p.planner > 2 || p.persistent < 0 || p.persistent > 2)
    return cudaErrorInvalidValue;
  // (kernel_variant 4 was removed in round 3, 6 in session 4 (FP8 records by bulk copies, slower than 5 / 7
  // everywhere), 8 never merged (session 4), 9 removed in session 5 (the alternating-step kernel, 1.6-2x slower
  // than 5; code at 19294ff), 12 in session 7 (variant 11's group over 16 warps without producer warps, 0.74x of
  // variant 11; code at af15c92), 13 in session 10 (variant 10's 16-head CTA as two token groups, 0.76-0.83x of
  // variant 10; code at db43314), 17 in session 29 (variant 14 reading FP8 records raw, each warp converting its own
  // operands in registers: 0.83-0.93x of its in-place conversion on the H200; code at 1c1546e), combine 4 in session 4
  // (the cluster merge): their numbers stay taken and are rejected above.)
  if (p.format != MlaCacheFormat::kBf16 && p.format != MlaCacheFormat::kFp8) return cudaErrorInvalidValue;
  if (p.num_tokens == 0) return cudaSuccess;
  if (!p.q || (!multi && !p.cache) || !p.indices || !p.out || !p.lse) return cudaErrorInvalidValue;
  if (!aligned16(p.q) || (!multi && !aligned16(p.cache)) || !aligned16(p.out) || !aligned16(workspace))
    return cudaErrorInvalidValue;
  const Plan pl = plan(p);
  const int nsplit = pl.splits;
  const int hc = pl.hc;
  const size_t need = launch_workspace_size(p);
  if (need > 0 && (workspace == nullptr || workspace_bytes < need)) return cudaErrorInvalidValue;

  sparse_mla_detail::KernelArgs a{};
  a.q = static_cast<const __nv_bfloat16*>(p.q);
  a.cache = static_cast<const uint8_t*>(p.cache);
  a.num_slots = p.num_slots;
  a.indices = p.indices;
  a.lengths = p.lengths;
  a.out = static_cast<__nv_bfloat16*>(p.out);
  a.lse = p.lse;
  a.num_tokens = p.num_tokens;
  a.num_heads = p.num_heads;
  a.topk = p.topk;
  a.nsplit = nsplit;
  const int ntiles = (p.topk + kTileTokens - 1) / kTileTokens;
  a.tiles_per_split = (ntiles + nsplit - 1) / nsplit;
  if (a.tiles_per_split * kTileTokens > kMaxSplitEntries) return cudaErrorInvalidValue;  // plan guarantees it
  a.scale_log2 = p.softmax_scale * 1.4426950408889634f;
  a.pools = p.pools;
  a.row_pool = p.row_pool;
  a.num_pools = p.num_pools;
  a.pool_layer = p.pool_layer;
  const size_t rows = static_cast<size_t>(nsplit) * p.num_tokens * p.num_heads;
  const int combine = nsplit > 1 ? combine_mode(p, nsplit, hc, pl.merge) : 0;
  a.counters = nullptr;
  a.part_bf16 = combine == 5 ? 1 : 0;
  a.ws_copy_warps = ws_copy_warps();
  a.wsp_lead = wsp_lead();
  // The timeline probe: the main kernel's kTimelineSlots per CTA, then the chunked combine's 4 per block.
  a.timeline = p.debug_timeline;
  a.wsr_chains4 = wsr_chains4() ? 1 : 0;
  a.wsr_direct = wsr_direct() ? 1 : 0;
  // sm_90+: programmatic dependent launches (the main kernel after the previous kernel of the stream, the combine
  // after the main kernel); older GPUs: ordinary launches.
  const int major = cc_major();
  if (major == 0) return cudaErrorInvalidDevice;
  a.pdl = major >= 9 && main_pdl_mode() != 0 ? 1 : 0;
  a.cc_major = major;
  if (nsplit > 1) {
    a.part_o = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + kMlaCombineCounterBytes);
    a.part_lse = a.part_o + rows * kMlaLatentDim;
    if (combine == 3) a.counters = static_cast<int*>(workspace);
  }
  const bool fp8 = p.format == MlaCacheFormat::kFp8;
  cudaError_t err;
  const int variant = kernel_variant(p, hc);
  if (tail && a.pdl == 1 && main_pdl_mode() == 2 && tail_waits_late() && sparse_mla_detail::runs_wsp(variant, hc) &&
      persistent_ctas(p, nsplit) == 0)
    a.pdl = 2;
  if (variant == 16) {
    err = hc == 16 ? sparse_mla_detail::launch_wsf16_fp8(a, stream)
                   : sparse_mla_detail::launch_wsf_fp8(v16_self_gathering(), a, stream);
  } else if (variant == 7) {
    err = fp8 ? sparse_mla_detail::launch_reg_fp8(hc, reg_dense(p, hc), a, stream)
              : sparse_mla_detail::launch_pipe_bf16(hc, false, a, stream);  // bf16 records: variant 2
  } else if (sparse_mla_detail::runs_wsp(variant, hc)) {
    a.grid_ctas = persistent_ctas(p, nsplit);
    err = fp8 ? sparse_mla_detail::launch_wsp_fp8(hc, a, stream) : sparse_mla_detail::launch_wsp_bf16(hc, a, stream);
  } else if (sparse_mla_detail::runs_wsg(variant, hc, fp8)) {
    err = sparse_mla_detail::launch_wsg_bf16(hc, a, stream);
  } else if (sparse_mla_detail::runs_wsr(variant == 11 ? 10 : variant, hc, fp8)) {  // 11 at 16 heads: 10
    err = sparse_mla_detail::launch_wsr_bf16(hc, a, stream);
  } else if (variant == 5 || variant >= 10) {  // 10 / 11 with 8 heads per CTA or FP8 records: variant 5
    err = fp8 ? sparse_mla_detail::launch_ws_fp8(hc, a, stream)
              : sparse_mla_detail::launch_ws_bf16(hc, a, stream);
  } else if (variant >= 2) {
    const bool two_per_sm = variant == 3;
    err = fp8 ? sparse_mla_detail::launch_pipe_fp8(hc, two_per_sm, a, stream)
              : sparse_mla_detail::launch_pipe_bf16(hc, two_per_sm, a, stream);
  } else
    err = fp8 ? sparse_mla_detail::launch_fp8(hc, a, stream) : sparse_mla_detail::launch_bf16(hc, a, stream);
  if (err != cudaSuccess || nsplit == 1 || combine == 3) return err;
  const int64_t out_rows = static_cast<int64_t>(p.num_tokens) * p.num_heads;
  if (out_rows > 0x7fffffff) return cudaErrorInvalidValue;
  // sm_90+: programmatic dependent launch, so the combine grid is launched while the main kernel runs (the
  // main kernels release it once all their CTAs are resident) instead of after it drains; the combine
  // waits on griddepcontrol.wait. Older GPUs: an ordinary launch.
  const bool chunked = combine == 2 || combine == 5;
  if (chunked && out_rows * 4 > 0x7fffffff) return cudaErrorInvalidValue;
  const int release_early = main_pdl_mode() == 1 ? 1 : 0;
  const float* part_o = a.part_o;
  const float* part_lse = a.part_lse;
  auto kernel = sparse_mla_combine;
  if (chunked) {
    const int per = (nsplit + 3) / 4;
    if (combine == 5)
      kernel = per <= 1   ? sparse_mla_combine_chunked<1, true>
               : per <= 2 ? sparse_mla_combine_chunked<2, true>
               : per <= 4 ? sparse_mla_combine_chunked<4, true>
               : per <= 8 ? sparse_mla_combine_chunked<8, true>
               : per <= 16 ? sparse_mla_combine_chunked<16, true>
                           : sparse_mla_combine_chunked<32, true>;
    else
      kernel = per <= 1   ? sparse_mla_combine_chunked<1>
               : per <= 2 ? sparse_mla_combine_chunked<2>
               : per <= 4 ? sparse_mla_combine_chunked<4>
               : per <= 8 ? sparse_mla_combine_chunked<8>
               : per <= 16 ? sparse_mla_combine_chunked<16>
                           : sparse_mla_combine_chunked<32>;
  }
  unsigned long long* tl = nullptr;
  if (a.timeline != nullptr)
    tl = a.timeline + static_cast<int64_t>(p.num_tokens) * nsplit * (p.num_heads / hc) * sparse_mla_detail::kTimelineSlots;
  return detail::launch(kernel, dim3(static_cast<unsigned>(chunked ? out_rows * 4 : out_rows)), dim3(kMaxSplits), 0,
                        stream, major >= 9, part_o, part_lse, nsplit, out_rows, a.out, a.lse, release_early, tl);
}

}  // namespace

size_t sparse_mla_workspace_size(const SparseMlaParams& p) {
  const TailSplit ts = tail_split(p);
  return ts.on ? launch_workspace_size(ts.tail) : launch_workspace_size(p);
}

cudaError_t sparse_mla_forward(const SparseMlaParams& p, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream) {
  const TailSplit ts = tail_split(p);
  if (!ts.on) return launch_plan(p, workspace, workspace_bytes, stream);
  // Both launches check their own parameters; the first needs no workspace (one split), the second's is checked
  // before either runs. A failure of the second leaves the first's tokens written and the call's result an error.
  const size_t need = launch_workspace_size(ts.tail);
  if (workspace == nullptr || workspace_bytes < need) return cudaErrorInvalidValue;
  const cudaError_t err = launch_plan(ts.bulk, workspace, workspace_bytes, stream);
  if (err != cudaSuccess) return err;
  return launch_plan(ts.tail, workspace, workspace_bytes, stream, true);
}

}  // namespace glm5rt::kernels
