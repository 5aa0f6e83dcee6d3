// The MoE block as one sequence of launches on one stream (no host synchronisation, graph-capturable):
// route -> permute -> quantise x -> gate_up grouped GEMM -> SwiGLU + quantise -> down grouped GEMM ->
// combine. The shared expert is one more group holding every token. Up to kMoeFrontMaxTokens tokens,
// selection + permutation + quantisation run as one fused kernel after the logits (moe_front.cu).
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"
#include "kernels/moe/moe.h"
#include "kernels/moe/moe_internal.h"

#include <cstdlib>

namespace glm5rt::kernels {
namespace {

// MoeParams::debug_stamps slot (null when the timeline is off).
unsigned long long* stamp_slot(const MoeParams& p, int slot) {
  return p.debug_stamps ? p.debug_stamps + static_cast<size_t>(slot) * kMoeStampWords : nullptr;
}

// Environment overrides of MoeParams' switches, read once per process (-1: not set).
int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}
struct MoeEnv {
  int stream_evict_first = env_int("GLM5RT_MOE_STREAM_EVICT_FIRST");
  int fast_select = env_int("GLM5RT_MOE_FAST_SELECT");
  int permute_single_pass = env_int("GLM5RT_MOE_PERMUTE_SINGLE_PASS");
  int fast_front = env_int("GLM5RT_MOE_FAST_FRONT");
  int gate_up_lines = env_int("GLM5RT_MOE_GATE_UP_LINES");
  int down_lines = env_int("GLM5RT_MOE_DOWN_LINES");
};
const MoeEnv& moe_env() {
  static const MoeEnv e;
  return e;
}
int env_or(int env, int param) { return env >= 0 ? env : param; }
bool env_flag(int env, bool param) { return env >= 0 ? env != 0 : param; }

// The operands of an expert GEMM (gate_up: 2 parts of I rows over k = H; down: 1 part of H rows over
// k = I): e4m3 activations [rows, k] with their per-128 scales, the weights' device arrays of pointers,
// and the bf16 output [rows, num_parts * part_rows]. Everything else in g is left as it is.
void set_expert_operands(Fp8GemmParams& g, int k, const uint8_t* a, const float* a_scale, int num_parts,
                         int part_rows, const uint8_t* const* w, const float* const* w_scale, __nv_bfloat16* c) {
  g.n = num_parts * part_rows;
  g.k = k;
  g.a = a;
  g.a_scale = a_scale;
  g.lda = k;
  g.ld_scale = k / kFp8Block;
  g.w = w;
  g.w_scale = w_scale;
  g.num_parts = num_parts;
  g.part_rows = part_rows;
  g.c = c;
  g.ldc = num_parts * part_rows;
}

constexpr size_t kAlign = 256;
// K blocks (128 bytes per weight row each) of the down GEMM's weights asked of L2 before its PDL wait,
// beyond its cp.async ring: at T=1 864 blocks x 64 rows x 4 x 128 B = 28 MB, half of the H200's L2.
constexpr int kMoeDownL2PrefetchKBlocks = 4;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

struct Layout {
  size_t logits, ids, weights, offsets, active, num_active, tiles, row_token, slot_row, xq, xs, xq_shared,
      xs_shared, gate_up, hq, hs, y, counters, total;
};

Layout layout(int T, int H, int I, int E, int K) {
  const size_t G = static_cast<size_t>(E) + 1;
  const size_t R = static_cast<size_t>(T) * K + T;
  Layout l{};
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at += align_up(bytes);
    return here;
  };
  l.logits = take(sizeof(float) * T * E);
  l.ids = take(sizeof(int) * T * K);
  l.weights = take(sizeof(float) * T * K);
  l.offsets = take(sizeof(int) * (G + 1));
  l.active = take(sizeof(int) * G);
  l.num_active = take(sizeof(int));
  l.tiles = take(sizeof(int) * (G + 1));
  l.row_token = take(sizeof(int) * R);
  l.slot_row = take(sizeof(int) * T * K);
  l.xq = take(static_cast<size_t>(T) * H);
  l.xs = take(sizeof(float) * T * (H / kFp8Block));
  // The shared expert's own copy of the quantised x when it runs on a second stream (MoeParams::
  // shared_stream): written there while the front writes xq on the main stream.
  l.xq_shared = take(static_cast<size_t>(T) * H);
  l.xs_shared = take(sizeof(float) * T * (H / kFp8Block));
  l.gate_up = take(sizeof(__nv_bfloat16) * R * 2 * I);
  l.hq = take(R * I);
  l.hs = take(sizeof(float) * R * (I / kFp8Block));
  l.y = take(sizeof(__nv_bfloat16) * R * H);
  // The down GEMM's fused-combine counters, one per 16 output columns (MoeParams::decode_fusion).
  l.counters = take(sizeof(int) * ((H + 15) / 16));
  l.total = at;
  return l;
}

// The shared expert alone on p.shared_stream (after the fork): quantise x into its own buffer, gate_up,
// SwiGLU + quantise, down, into rows [T*K, T*K + T) of the gate_up / h / y buffers. The GEMMs are the
// dense form of the same kernels the grouped call would run for the shared group (decode path, the
// routed `expected` rows per group so the same token-tile form is chosen), so every value has the same
// bits as in the one-stream form. The first launch follows an event wait, so it does not use PDL.
cudaError_t launch_shared_expert(const MoeParams& p, const Layout& l, char* ws, int expected, bool pdl) {
  const int T = p.tokens, H = p.hidden, I = p.inter, E = p.num_experts, K = p.top_k;
  const size_t row0 = static_cast<size_t>(T) * K;
  cudaStream_t ss = p.shared_stream;
  uint8_t* xq = reinterpret_cast<uint8_t*>(ws + l.xq_shared);
  float* xs = reinterpret_cast<float*>(ws + l.xs_shared);
  if (cudaError_t e = fp8_quantize_groups(p.x, H, T, H, xq, H, xs, H / kFp8Block, ss, false); e != cudaSuccess)
    return e;
  __nv_bfloat16* gate_up = reinterpret_cast<__nv_bfloat16*>(ws + l.gate_up) + row0 * 2 * I;
  Fp8GemmParams g;
  // Device arrays of pointers: the shared expert's entries are 2E, 2E + 1.
  set_expert_operands(g, H, xq, xs, 2, I, p.gate_up_w + 2 * static_cast<size_t>(E),
                      p.gate_up_s + 2 * static_cast<size_t>(E), gate_up);
  g.num_groups = 1;
  g.max_rows = T;
  g.expected_rows_per_group = expected;
  g.path = Fp8GemmPath::decode;
  g.decode_depth = p.decode_depth;
  g.decode_kernel = p.decode_kernel;
  g.pdl = pdl;
  g.debug_stamps = stamp_slot(p, kMoeStampSharedGateUp);
  g.decode_evict_first = env_flag(moe_env().stream_evict_first, p.stream_evict_first);
  if (cudaError_t e = fp8_gemm(g, ss); e != cudaSuccess) return e;
  uint8_t* hq = reinterpret_cast<uint8_t*>(ws + l.hq) + row0 * I;
  float* hs = reinterpret_cast<float*>(ws + l.hs) + row0 * (I / kFp8Block);
  // No early release here: the shared down GEMM's blocks would otherwise take SM slots (48 KB of shared
  // memory each) for the whole shared gate_up GEMM, which the routed gate_up GEMM's one-wave fit does
  // not count (concurrent_blocks covers the shared gate_up's blocks only). Launched after the shared
  // gate_up GEMM, they take its freed slots, and the rest run in the routed gate_up GEMM's tail.
  if (cudaError_t e = moe_swiglu_quantize_ex(gate_up, T, I, hq, hs, ss, pdl, false,
                                             stamp_slot(p, kMoeStampSharedSwiglu));
      e != cudaSuccess)
    return e;
  Fp8GemmParams g2 = g;
  set_expert_operands(g2, I, hq, hs, 1, H, p.down_w + E, p.down_s + E,
                      reinterpret_cast<__nv_bfloat16*>(ws + l.y) + row0 * H);
  g2.group_info_ready = true;  // dense form: no group metadata; the weights were ready before the fork
  g2.decode_l2_prefetch = p.early_down ? kMoeDownL2PrefetchKBlocks : 0;
  g2.debug_stamps = stamp_slot(p, kMoeStampSharedDown);
  return fp8_gemm(g2, ss);
}

}  // namespace

size_t moe_workspace_size(int tokens, int hidden, int inter, int num_experts, int top_k) {
  if (tokens < 0 || hidden <= 0 || inter <= 0 || num_experts <= 0 || top_k <= 0) return 0;
  return layout(tokens, hidden, inter, num_experts, top_k).total;
}

cudaError_t moe_forward(const MoeParams& p, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const int T = p.tokens, H = p.hidden, I = p.inter, E = p.num_experts, K = p.top_k;
  if (T < 0 || H <= 0 || I <= 0 || H % kFp8Block != 0 || I % kFp8Block != 0 || E < 1 || K < 1)
    return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  if (!p.x || !p.gate_up_w || !p.gate_up_s || !p.down_w || !p.down_s || !p.out || !workspace)
    return cudaErrorInvalidValue;
  const Layout l = layout(T, H, I, E, K);
  if (workspace_bytes < l.total) return cudaErrorInvalidValue;
  char* ws = static_cast<char*>(workspace);
  auto mark = [&](int stage) {
    return p.stage_events ? cudaEventRecord(p.stage_events[stage], stream) : cudaSuccess;
  };
  auto at = [&](size_t off) { return static_cast<void*>(ws + off); };
  const bool routed = p.topk_ids_in && p.topk_weights_in;  // the caller's routing: no router
  int* ids = p.topk_ids_out ? p.topk_ids_out : static_cast<int*>(at(l.ids));
  float* wts = p.topk_weights_out ? p.topk_weights_out : static_cast<float*>(at(l.weights));
  const int* ids_use = routed ? p.topk_ids_in : ids;
  const float* wts_use = routed ? p.topk_weights_in : wts;
  // Rows per routed expert on average; the shared group has T rows. The path choice uses the routed
  // average since routed experts hold almost all of the groups.
  const int expected = (T * K + E - 1) / E;
  const bool decode_path = p.path == 1 || (p.path == 0 && expected <= 8);  // fp8_gemm's automatic rule
  // The shared expert on its own stream (see MoeParams::shared_stream): then the main stream's groups
  // are the routed experts only, and the shared expert's rows sit at the fixed rows [T*K, T*K + T) of
  // the gate_up / h / y buffers (the routed rows are [0, group_offsets[E]) with group_offsets[E] <= T*K).
  const bool side = p.with_shared && p.shared_stream && p.shared_stream != stream && p.shared_events[0] &&
                    p.shared_events[1] && T <= kMoeFrontMaxTokens && decode_path;
  const bool main_shared = p.with_shared && !side;
  // Whole-line weight copies in the routed GEMMs (MoeParams::gate_up_line_copies / down_line_copies), with or
  // without the second stream. (The shared expert's own GEMMs keep the previous copy geometry: with line copies
  // they measured no different on the H200.) The illegal instruction that 0844c2c met beside the second
  // stream was the plain depth-4 line kernel's evict_first-hinted cp.async in that build, not the two-stream
  // path: see docs/PERFORMANCE.md "MoE session 4, call 3".
  const bool gate_up_lines = env_flag(moe_env().gate_up_lines, p.gate_up_line_copies);
  const bool down_lines = env_flag(moe_env().down_lines, p.down_line_copies);
  const int G = E + (main_shared ? 1 : 0);
  const int R = T * K + (main_shared ? T : 0);  // rows of the main stream's grouped GEMMs

  const bool pdl = p.pdl && detail::pdl_supported();
  // The combine fused into the down GEMM (MoeParams::decode_fusion): needs the fused front (which zeroes
  // the counters), every expert row on this stream, and the cp.async decode kernel for the down GEMM
  // (fp8_gemm's choice for expected <= 4 rows per group, repeated here).
  const bool async_down = decode_path && expected <= 4 &&
                          (p.decode_kernel == 2 || (p.decode_kernel == 0 && p.decode_depth == 0));
  const bool fused_combine = (p.decode_fusion == 1 || p.decode_fusion == 2) && !side && T <= kMoeCombineFuseMaxTokens &&
                             p.front_path == 0 && async_down;
  // And SwiGLU + quantisation as the down GEMM's prologue (decode_fusion 2), up to kMoeSwigluFuseMaxTokens
  // tokens: a group holds at most T rows when the ids of a token are distinct (more rows just take more
  // passes), so T rows of shared memory per block cover a group in one pass.
  const bool fused_swiglu = fused_combine && p.decode_fusion == 2 && T <= kMoeSwigluFuseMaxTokens;
  int* counters = static_cast<int*>(at(l.counters));
  const int n_counters = fused_combine ? (H + 15) / 16 : 0;
  if (side) {
    // Fork before the router: nothing of the shared expert depends on the routing.
    if (cudaError_t e = cudaEventRecord(p.shared_events[0], stream); e != cudaSuccess) return e;
    if (cudaError_t e = cudaStreamWaitEvent(p.shared_stream, p.shared_events[0], 0); e != cudaSuccess) return e;
    if (cudaError_t e = launch_shared_expert(p, l, ws, expected, pdl); e != cudaSuccess) return e;
    if (cudaError_t e = cudaEventRecord(p.shared_events[1], p.shared_stream); e != cudaSuccess) return e;
  }
  RouterParams rp;
  rp.pdl = pdl;
  rp.tokens = T;
  rp.hidden = H;
  rp.num_experts = E;
  rp.top_k = K;
  rp.n_group = p.n_group;
  rp.topk_group = p.topk_group;
  rp.norm_topk_prob = p.norm_topk_prob;
  rp.routed_scaling_factor = p.routed_scaling_factor;
  rp.x = p.x;
  rp.ldx = H;
  rp.weight = p.router_weight;
  rp.bias = p.router_bias;
  rp.logits = static_cast<float*>(at(l.logits));
  rp.topk_ids = ids;
  rp.topk_weights = wts;
  rp.debug_stamps = stamp_slot(p, kMoeStampLogits);  // and the front's slot right after it
  rp.fast_select = env_flag(moe_env().fast_select, p.fast_select);
  const bool evict_first = env_flag(moe_env().stream_evict_first, p.stream_evict_first);
  const bool fast_front = env_flag(moe_env().fast_front, p.fast_front);

  PermuteParams pp;
  pp.pdl = pdl;
  pp.tokens = T;
  pp.top_k = K;
  pp.num_experts = E;
  pp.with_shared = main_shared;
  pp.topk_ids = ids_use;
  pp.group_offsets = static_cast<int*>(at(l.offsets));
  pp.active_groups = static_cast<int*>(at(l.active));
  pp.num_active = static_cast<int*>(at(l.num_active));
  pp.tile_prefix = static_cast<int*>(at(l.tiles));
  pp.row_token = static_cast<int*>(at(l.row_token));
  pp.slot_row = static_cast<int*>(at(l.slot_row));
  pp.single_pass = env_flag(moe_env().permute_single_pass, p.permute_single_pass);
  const int tile_rows = p.prefill_tile_rows ? p.prefill_tile_rows : kFp8PrefillTileRows;
  pp.tile_rows = tile_rows;
  uint8_t* xq = static_cast<uint8_t*>(at(l.xq));
  float* xs = static_cast<float*>(at(l.xs));

  // Front: expert choice, permutation, activation quantisation. Stage events: 0 after the router (the
  // logits only on the fused path), 1 after the permutation (the fused kernel), 2 after quantisation
  // (recorded right after 1 on the fused path). With the caller's routing (topk_ids_in) the logits /
  // moe_route are skipped and moe_front runs with select = false on the caller's ids.
  if (T <= kMoeFrontMaxTokens && p.front_path == 0) {
    int flags = 0;
    if (fast_front) {
      flags |= kMoeFrontCompact;
      // x staged with cp.async and quantised by the few-token logits kernel (16-byte aligned x).
      if (!routed && moe_router_small_kernel(T, H) && (reinterpret_cast<uintptr_t>(p.x) & 15u) == 0) {
        rp.stage_async = true;
        rp.xq = xq;
        rp.xs = xs;
        flags |= kMoeFrontNoQuantize;
      }
    }
    if (!routed) {
      if (cudaError_t e = moe_router_logits(rp, stream); e != cudaSuccess) return e;
    }
    rp.xq = nullptr;  // the front reads rp only for the selection
    rp.xs = nullptr;
    if (cudaError_t e = mark(0); e != cudaSuccess) return e;
    if (cudaError_t e = moe_front(rp, /*select=*/!routed, pp, xq, xs, stream, counters, n_counters, flags);
        e != cudaSuccess)
      return e;
    if (cudaError_t e = mark(1); e != cudaSuccess) return e;
    if (cudaError_t e = mark(2); e != cudaSuccess) return e;
  } else {
    if (!routed) {
      if (cudaError_t e = moe_route(rp, stream); e != cudaSuccess) return e;
    }
    if (cudaError_t e = mark(0); e != cudaSuccess) return e;
    if (cudaError_t e = moe_permute(pp, stream); e != cudaSuccess) return e;
    if (cudaError_t e = mark(1); e != cudaSuccess) return e;
    if (cudaError_t e = fp8_quantize_groups(p.x, H, T, H, xq, H, xs, H / kFp8Block, stream, pdl); e != cudaSuccess)
      return e;
    if (cudaError_t e = mark(2); e != cudaSuccess) return e;
  }

  const int max_active = G < R ? G : R;

  Fp8GemmParams g1;
  set_expert_operands(g1, H, xq, xs, 2, I, p.gate_up_w, p.gate_up_s, static_cast<__nv_bfloat16*>(at(l.gate_up)));
  g1.a_row_map = pp.row_token;
  g1.num_groups = G;
  g1.max_rows = R;
  g1.group_offsets = pp.group_offsets;
  g1.active_groups = pp.active_groups;
  g1.num_active = pp.num_active;
  g1.tile_prefix = pp.tile_prefix;
  g1.max_active = max_active;
  g1.expected_rows_per_group = expected;
  g1.prefill_tile_rows = tile_rows;
  g1.prefill_mma = p.prefill_mma;
  g1.decode_depth = p.decode_depth;
  g1.decode_kernel = p.decode_kernel;
  g1.pdl = pdl;
  // With the shared expert on the other stream, its gate_up grid (the decode kernel: one block per 64 output
  // rows) is presumably still resident when this GEMM starts: leave room for it in the one-wave fit.
  g1.concurrent_blocks = side ? (2 * I + 63) / 64 : 0;
  g1.debug_stamps = stamp_slot(p, kMoeStampGateUp);
  g1.decode_evict_first = evict_first;
  g1.decode_line_copies = gate_up_lines;
  g1.path = p.path == 1 ? Fp8GemmPath::decode : p.path == 2 ? Fp8GemmPath::prefill : Fp8GemmPath::automatic;
  if (cudaError_t e = fp8_gemm(g1, stream); e != cudaSuccess) return e;
  if (cudaError_t e = mark(3); e != cudaSuccess) return e;

  uint8_t* hq = static_cast<uint8_t*>(at(l.hq));
  float* hs = static_cast<float*>(at(l.hs));
  if (!fused_swiglu) {
    if (cudaError_t e =
            moe_swiglu_quantize_ex(g1.c, R, I, hq, hs, stream, pdl, p.early_down, stamp_slot(p, kMoeStampSwiglu));
        e != cudaSuccess)
      return e;
  }
  if (cudaError_t e = mark(4); e != cudaSuccess) return e;

  Fp8GemmParams g2 = g1;
  set_expert_operands(g2, I, hq, hs, 1, H, p.down_w, p.down_s, static_cast<__nv_bfloat16*>(at(l.y)));
  g2.a_row_map = nullptr;
  // The permutation ran two launches earlier (gate_up and SwiGLU since, and the gate_up GEMM waited for
  // it before SwiGLU could launch): the down GEMM may start streaming its weights before its wait, while
  // SwiGLU runs, and with early_down (SwiGLU releases it at once) already during the gate_up GEMM's tail.
  g2.group_info_ready = true;
  g2.decode_l2_prefetch = p.early_down ? kMoeDownL2PrefetchKBlocks : 0;
  g2.decode_line_copies = down_lines;
  g2.concurrent_blocks = 0;  // by now the shared expert's GEMMs have finished or fill the tail
  g2.debug_stamps = stamp_slot(p, kMoeStampDown);
  if (fused_combine) {
    g2.combine_counters = counters;
    g2.combine_out = p.out;
    g2.combine_tokens = T;
    g2.combine_top_k = K;
    g2.combine_slot_row = pp.slot_row;
    g2.combine_weights = wts_use;
    g2.combine_shared_row_begin = p.with_shared ? pp.group_offsets + E : nullptr;
  }
  if (fused_swiglu) {
    // A = e4m3(SwiGLU(gate_up rows)) computed by each down block; hq / hs stay unwritten (still passed: the
    // GEMM checks them). The down GEMM now follows the gate_up GEMM directly: group_info_ready still holds
    // (the gate_up GEMM releases its dependents only after its own wait for the front).
    g2.swiglu_gate_up = g1.c;
    g2.swiglu_ld = 2 * I;
    g2.swiglu_rows = T;
  }
  if (cudaError_t e = fp8_gemm(g2, stream); e != cudaSuccess) return e;
  if (cudaError_t e = mark(5); e != cudaSuccess) return e;
  if (fused_combine) return mark(6);  // the combine ran inside the down GEMM

  if (side) {
    // Join. The combine is launched without PDL here: its inputs come from two streams, and only the
    // full (event) dependency is known to cover the other stream's kernels.
    if (cudaError_t e = cudaStreamWaitEvent(stream, p.shared_events[1], 0); e != cudaSuccess) return e;
    if (cudaError_t e = moe_combine_at(g2.c, T, H, K, pp.slot_row, wts_use, nullptr, T * K, p.out, stream, false,
                                       stamp_slot(p, kMoeStampCombine));
        e != cudaSuccess)
      return e;
    return mark(6);
  }
  if (cudaError_t e = moe_combine_at(g2.c, T, H, K, pp.slot_row, wts_use,
                                     p.with_shared ? pp.group_offsets + E : nullptr, -1, p.out, stream, pdl,
                                     stamp_slot(p, kMoeStampCombine));
      e != cudaSuccess)
    return e;
  return mark(6);
}

}  // namespace glm5rt::kernels
