// FP8 block-scaled GEMM and the activation quantiser against CPU references (exact FP8 decode, float64
// sums) at GLM-5 shapes. Outputs are poisoned with NaN before each launch; inputs are fresh random data.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>
#include <string>

#include "kernels/gemm/fp8_gemm.h"
#include "kernels/gemm/launch.cuh"
#include "tests/gpu/fp8_reference.hpp"

using namespace fp8ref;
namespace k = glm5rt::kernels;

namespace {

std::mt19937 fresh_rng() { return std::mt19937(std::random_device{}()); }

// Quantises random activations on the GPU; checks them against the CPU rule; returns the host copies.
void quantize_on_gpu(const std::vector<uint16_t>& x, int rows, int kdim, DeviceBuffer<uint8_t>& q,
                     DeviceBuffer<float>& s, std::vector<uint8_t>& hq, std::vector<float>& hs) {
  DeviceBuffer<uint16_t> dx(x.size());
  dx.upload(x);
  q.poison();
  s.poison();
  CUDA_OK(k::fp8_quantize_groups(reinterpret_cast<const __nv_bfloat16*>(dx.ptr), kdim, rows, kdim, q.ptr, kdim,
                                 s.ptr, kdim / 128, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  hq = q.download();
  hs = s.download();
}

struct GroupedCase {
  int n, k, num_parts;
  std::vector<int> counts;  // rows per group
  bool row_map;
  k::Fp8GemmPath path;
  int tile_rows = 64;  // prefill tile rows (64 or 128)
  int mma = 0;         // Fp8GemmParams::prefill_mma
  int depth = 0;       // Fp8GemmParams::decode_depth
  int decode_kernel = 0;  // Fp8GemmParams::decode_kernel (0 automatic, 1 register ring, 2 cp.async ring)
  bool lines = false;     // Fp8GemmParams::decode_line_copies
  bool evict_first = false;  // Fp8GemmParams::decode_evict_first (the MoE's default: the hinted copy instructions)
};

// Runs one (possibly grouped) GEMM against the CPU reference.
void run_case(const GroupedCase& tc) {
  auto rng = fresh_rng();
  const int G = static_cast<int>(tc.counts.size());
  std::vector<int> offsets(G + 1, 0), tiles(G + 1, 0), active;
  for (int g = 0; g < G; ++g) {
    offsets[g + 1] = offsets[g] + tc.counts[g];
    tiles[g + 1] = tiles[g] + (tc.counts[g] + tc.tile_rows - 1) / tc.tile_rows;
    if (tc.counts[g] > 0) active.push_back(g);
  }
  const int rows = offsets[G];
  // Source activations: more rows than used when gathered, so the map matters.
  const int src_rows = tc.row_map ? rows + 5 : rows;
  std::vector<int> map(rows);
  std::uniform_int_distribution<int> pick(0, src_rows - 1);
  for (int r = 0; r < rows; ++r) map[r] = tc.row_map ? pick(rng) : r;

  const auto x = random_bf16(static_cast<size_t>(src_rows) * tc.k, rng);
  DeviceBuffer<uint8_t> dq(static_cast<size_t>(src_rows) * tc.k);
  DeviceBuffer<float> ds(static_cast<size_t>(src_rows) * (tc.k / 128));
  std::vector<uint8_t> hq;
  std::vector<float> hs;
  quantize_on_gpu(x, src_rows, tc.k, dq, ds, hq, hs);
  const auto xa = dequant_act(hq, hs, src_rows, tc.k);

  const int part_rows = tc.n / tc.num_parts;
  std::vector<HostFp8Weight> w;
  std::vector<std::vector<float>> wd;
  DeviceWeights weights;
  for (int i = 0; i < G * tc.num_parts; ++i) {
    w.push_back(random_weight(part_rows, tc.k, rng));
    wd.push_back(dequant(w.back()));
    weights.add(w.back());
  }
  weights.upload_pointers();
  DeviceBuffer<int> d_off(G + 1), d_tiles(G + 1), d_active(std::max<size_t>(1, active.size())), d_nact(1),
      d_map(std::max(1, rows));
  d_off.upload(offsets);
  d_tiles.upload(tiles);
  if (!active.empty()) d_active.upload(active);
  d_nact.upload({static_cast<int>(active.size())});
  if (rows) d_map.upload(map);
  DeviceBuffer<uint16_t> dc(static_cast<size_t>(std::max(1, rows)) * tc.n);
  dc.poison();

  k::Fp8GemmParams p;
  p.n = tc.n;
  p.k = tc.k;
  p.a = dq.ptr;
  p.a_scale = ds.ptr;
  p.lda = tc.k;
  p.ld_scale = tc.k / 128;
  p.a_row_map = tc.row_map ? d_map.ptr : nullptr;
  p.w = weights.d_q_ptrs->ptr;
  p.w_scale = weights.d_scale_ptrs->ptr;
  p.num_parts = tc.num_parts;
  p.part_rows = part_rows;
  p.c = reinterpret_cast<__nv_bfloat16*>(dc.ptr);
  p.ldc = tc.n;
  p.num_groups = G;
  p.max_rows = rows;
  if (G > 1) {
    p.group_offsets = d_off.ptr;
    p.active_groups = d_active.ptr;
    p.num_active = d_nact.ptr;
    p.tile_prefix = d_tiles.ptr;
    p.max_active = G;
  }
  p.path = tc.path;
  p.prefill_tile_rows = tc.tile_rows;
  p.prefill_mma = tc.mma;
  p.decode_depth = tc.depth;
  p.decode_kernel = tc.decode_kernel;
  p.decode_line_copies = tc.lines;
  p.decode_evict_first = tc.evict_first;
  CUDA_OK(k::fp8_gemm(p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto hc = dc.download();

  std::vector<double> ref(static_cast<size_t>(rows) * tc.n);
  parallel_for(rows, [&](int r) {
    int g = 0;
    while (offsets[g + 1] <= r) ++g;
    const float* a = &xa[static_cast<size_t>(map[r]) * tc.k];
    for (int n = 0; n < tc.n; ++n) {
      const int part = n / part_rows;
      const auto& W = wd[g * tc.num_parts + part];
      ref[static_cast<size_t>(r) * tc.n + n] = dot(a, &W[static_cast<size_t>(n - part * part_rows) * tc.k], tc.k);
    }
  });
  std::vector<float> out(ref.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(hc[i]);
  const auto cmp = compare(out, ref, 8e-3, 2e-3);
  const std::string path = tc.path == k::Fp8GemmPath::decode ? std::string("decode")
                                                                : "prefill/" + std::to_string(tc.tile_rows) +
                                                                      "/mma" + std::to_string(tc.mma);
  MESSAGE("n=" << tc.n << " k=" << tc.k << " rows=" << rows << " groups=" << G << " path=" << path
               << " lines=" << tc.lines << " evict_first=" << tc.evict_first
               << " rel_l2=" << cmp.rel_l2
               << " max|d|/rms=" << cmp.max_abs_over_rms << " bad=" << cmp.bad << " non-finite=" << cmp.non_finite);
  CHECK(cmp.non_finite == 0);
  CHECK(cmp.bad == 0);
  CHECK(cmp.rel_l2 < 4e-3);
}

}  // namespace

TEST_CASE("fp8 quantize_groups matches the CPU rule bit for bit") {
  auto rng = fresh_rng();
  const int rows = 37, kdim = 6144;
  auto x = random_bf16(static_cast<size_t>(rows) * kdim, rng, 3.0f);
  // Outliers, a zero group and tiny values exercise saturation, the 1e-10 floor and subnormals.
  x[5] = float_to_bf16(3000.f);
  x[kdim + 7] = float_to_bf16(-1e-30f);
  for (int i = 0; i < 128; ++i) x[2 * static_cast<size_t>(kdim) + 256 + i] = 0;
  for (int i = 0; i < 128; ++i) x[3 * static_cast<size_t>(kdim) + i] = float_to_bf16(1e-3f * (i - 64));
  DeviceBuffer<uint8_t> dq(x.size());
  DeviceBuffer<float> ds(static_cast<size_t>(rows) * (kdim / 128));
  std::vector<uint8_t> hq;
  std::vector<float> hs;
  quantize_on_gpu(x, rows, kdim, dq, ds, hq, hs);
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i) xf[i] = bf16_to_float(x[i]);
  std::vector<uint8_t> rq;
  std::vector<float> rs;
  quantize_rows(xf, rows, kdim, rq, rs);
  size_t q_mismatch = 0, s_mismatch = 0;
  for (size_t i = 0; i < rq.size(); ++i) q_mismatch += rq[i] != hq[i];
  for (size_t i = 0; i < rs.size(); ++i) s_mismatch += std::memcmp(&rs[i], &hs[i], 4) != 0;
  CHECK(q_mismatch == 0);
  CHECK(s_mismatch == 0);
}

TEST_CASE("fp8 gemm dense, decode path, GLM-5 kv_a shape (partial 128-row block)") {
  run_case({576, 6144, 1, {3}, false, k::Fp8GemmPath::decode});
  run_case({576, 6144, 1, {5}, false, k::Fp8GemmPath::decode, 64, 0, 3});  // 3 K blocks in flight
}

TEST_CASE("fp8 gemm decode, both kernels (register ring, cp.async ring), 1-token-tile groups") {
  // <= 4 rows per group on average: the 1-token-tile decode kernels; the group of 12 rows takes two
  // 8-token passes. Automatic (cp.async ring where the grid fits one wave), then each kernel forced.
  const std::vector<int> counts = {1, 0, 2, 1, 12, 1, 0, 3};
  for (int dk : {0, 1, 2}) {
    run_case({4096, 6144, 2, counts, true, k::Fp8GemmPath::decode, 64, 0, 0, dk});  // gate|up, gathered rows
    run_case({6144, 2048, 1, counts, false, k::Fp8GemmPath::decode, 64, 0, 0, dk});  // down
    run_case({576, 6144, 1, {1}, false, k::Fp8GemmPath::decode, 64, 0, 0, dk});       // dense kv_a, 1 token
  }
  // The cp.async ring with whole-line copies (decode_line_copies), automatic and forced kernel choice; a
  // dense shape whose last warp has 2 valid rows (n = 594: rows past the part are read from row 0 and never
  // stored). (Session 4's 2-warp blocks were removed: no established gain on the H200.)
  for (int dk : {0, 2}) {
    run_case({4096, 6144, 2, counts, true, k::Fp8GemmPath::decode, 64, 0, 0, dk, true});
    run_case({6144, 2048, 1, counts, false, k::Fp8GemmPath::decode, 64, 0, 0, dk, true});
    run_case({576, 6144, 1, {1}, false, k::Fp8GemmPath::decode, 64, 0, 0, dk, true});
    run_case({594, 2048, 1, {3}, false, k::Fp8GemmPath::decode, 64, 0, 0, dk, true});
  }
  // Every cp.async instantiation above again with the evict_first hint (decode_evict_first, on in the MoE): the
  // hinted copies are other instructions (the policy in a uniform register), and at 0844c2c they were what
  // failed (cudaErrorIllegalInstruction in the plain depth-4 line kernel, the grouped down shape here), in the
  // one MoE configuration that ran that kernel with the hint; these cases ran it without.
  for (bool lines : {false, true}) {
    run_case({4096, 6144, 2, counts, true, k::Fp8GemmPath::decode, 64, 0, 0, 2, lines, true});
    run_case({6144, 2048, 1, counts, false, k::Fp8GemmPath::decode, 64, 0, 0, 2, lines, true});
    run_case({576, 6144, 1, {1}, false, k::Fp8GemmPath::decode, 64, 0, 0, 2, lines, true});
    run_case({594, 2048, 1, {3}, false, k::Fp8GemmPath::decode, 64, 0, 0, 2, lines, true});
  }
}

TEST_CASE("fp8 gemm dense, decode path with several token passes, down_proj shape") {
  run_case({6144, 2048, 1, {45}, false, k::Fp8GemmPath::decode});
}

TEST_CASE("fp8 gemm dense, prefill path, partial row and column tiles") {
  run_case({576, 6144, 1, {200}, false, k::Fp8GemmPath::prefill, 64});
  run_case({576, 6144, 1, {200}, false, k::Fp8GemmPath::prefill, 128});
}

TEST_CASE("fp8 gemm grouped gate|up (two parts), gathered rows, both paths") {
  const std::vector<int> counts = {0, 3, 130, 1, 0, 17};
  run_case({4096, 6144, 2, counts, true, k::Fp8GemmPath::decode});
  run_case({4096, 6144, 2, counts, true, k::Fp8GemmPath::prefill, 64});
  run_case({4096, 6144, 2, counts, true, k::Fp8GemmPath::prefill, 128});
  run_case({4096, 6144, 2, counts, true, k::Fp8GemmPath::prefill, 64, 1});   // native FP8 mma
  run_case({4096, 6144, 2, counts, true, k::Fp8GemmPath::prefill, 128, 2});  // f16 mma after conversion
}

TEST_CASE("fp8 gemm grouped down_proj, both paths") {
  const std::vector<int> counts = {9, 0, 129, 2};
  run_case({6144, 2048, 1, counts, false, k::Fp8GemmPath::decode});
  run_case({6144, 2048, 1, counts, false, k::Fp8GemmPath::prefill, 64, 2});
  run_case({6144, 2048, 1, counts, false, k::Fp8GemmPath::prefill, 128, 1});
}

TEST_CASE("fp8 gemm rejects bad parameters with cudaErrorInvalidValue") {
  k::Fp8GemmParams p;
  p.n = 128;
  p.k = 100;  // not a multiple of 128
  p.lda = 128;
  p.ld_scale = 1;
  p.ldc = 128;
  p.max_rows = 1;
  CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
  p.k = 128;
  CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);  // null pointers
  p.n = 7;
  CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);  // odd n
  {  // A valid dense call, then the same call with a negative concurrent_blocks / decode_l2_prefetch.
    p.n = 128;
    DeviceBuffer<uint8_t> a(128), w(128 * 128);
    DeviceBuffer<float> as(1), ws(1);
    DeviceBuffer<uint16_t> c(128);
    a.upload(std::vector<uint8_t>(128, 0x38));  // e4m3 1.0
    w.upload(std::vector<uint8_t>(128 * 128, 0x38));
    as.upload(std::vector<float>{1.0f});
    ws.upload(std::vector<float>{1.0f});
    DeviceBuffer<const uint8_t*> wp(1);
    DeviceBuffer<const float*> wsp(1);
    wp.upload(std::vector<const uint8_t*>{w.ptr});
    wsp.upload(std::vector<const float*>{ws.ptr});
    p.a = a.ptr;
    p.a_scale = as.ptr;
    p.w = wp.ptr;
    p.w_scale = wsp.ptr;
    p.c = reinterpret_cast<__nv_bfloat16*>(c.ptr);
    p.decode_l2_prefetch = 2;  // only used with group_info_ready; accepted either way
    CHECK(k::fp8_gemm(p, nullptr) == cudaSuccess);
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(bf16_to_float(c.download()[5]) == 128.0f);  // 128 products of 1 x 1
    p.concurrent_blocks = -1;
    CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
    p.concurrent_blocks = 0;
    p.decode_l2_prefetch = -1;
    CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
    p.decode_l2_prefetch = 0;
    // The fused MoE epilogue / prologue need the grouped form (and the prologue the epilogue): rejected
    // on this dense call rather than run half-configured.
    DeviceBuffer<int> counters(8);
    p.combine_counters = counters.ptr;
    p.combine_out = reinterpret_cast<__nv_bfloat16*>(c.ptr);
    CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
    p.combine_counters = nullptr;
    p.combine_out = nullptr;
    p.swiglu_gate_up = reinterpret_cast<const __nv_bfloat16*>(c.ptr);
    p.swiglu_ld = 256;
    p.swiglu_rows = 1;
    CHECK(k::fp8_gemm(p, nullptr) == cudaErrorInvalidValue);
  }
  CHECK(k::fp8_quantize_groups(nullptr, 64, 1, 64, nullptr, 64, nullptr, 1, nullptr) == cudaErrorInvalidValue);
}

// Whole-line weight copies (decode_line_copies) with the evict_first hint in the cp.async decode kernel's plain
// depth-4 form, started early (group_info_ready: weights streamed before the PDL wait) after a PDL
// predecessor that is still running, optionally beside a second stream running a dense decode GEMM (with or
// without line copies) at the same time: the MoE down GEMM at T=1 with the shared expert on a second stream,
// the configuration that stopped with cudaErrorIllegalInstruction on the H200 at 0844c2c (compute-sanitizer
// put it on that kernel's hinted cp.async; docs/PERFORMANCE.md "MoE session 4, call 3"). Every run must give
// the bits of the plain form started after its predecessor (itself checked against the CPU above).
namespace {

__global__ void spin_after_wait_kernel(long long ns) {
  glm5rt::kernels::detail::pdl_wait_and_release();
  long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

void run_early_lines_chain(bool lines, bool side, int iters, bool side_lines = false) {
  auto rng = fresh_rng();
  const int n = 6144, kd = 2048, G = 8;  // the routed down GEMM at T=1: 8 groups of one row, 768 blocks
  const auto x = random_bf16(static_cast<size_t>(G + 1) * kd, rng);
  DeviceBuffer<uint8_t> dq(static_cast<size_t>(G + 1) * kd);
  DeviceBuffer<float> ds(static_cast<size_t>(G + 1) * (kd / 128));
  std::vector<uint8_t> hq;
  std::vector<float> hs;
  quantize_on_gpu(x, G + 1, kd, dq, ds, hq, hs);
  DeviceWeights weights;
  for (int g = 0; g <= G; ++g) weights.add(random_weight(n, kd, rng));  // G routed groups + the side GEMM's weight
  weights.upload_pointers();
  std::vector<int> offsets(G + 1), active(G);
  for (int g = 0; g <= G; ++g) offsets[g] = g;
  for (int g = 0; g < G; ++g) active[g] = g;
  DeviceBuffer<int> d_off(G + 1), d_tiles(G + 1), d_active(G), d_nact(1);
  d_off.upload(offsets);
  d_tiles.upload(offsets);
  d_active.upload(active);
  d_nact.upload({G});
  DeviceBuffer<uint16_t> dc(static_cast<size_t>(G) * n), dc_side(n);

  k::Fp8GemmParams p;
  p.n = n;
  p.k = kd;
  p.a = dq.ptr;
  p.a_scale = ds.ptr;
  p.lda = kd;
  p.ld_scale = kd / 128;
  p.w = weights.d_q_ptrs->ptr;
  p.w_scale = weights.d_scale_ptrs->ptr;
  p.part_rows = n;
  p.c = reinterpret_cast<__nv_bfloat16*>(dc.ptr);
  p.ldc = n;
  p.num_groups = G;
  p.max_rows = G;
  p.group_offsets = d_off.ptr;
  p.active_groups = d_active.ptr;
  p.num_active = d_nact.ptr;
  p.tile_prefix = d_tiles.ptr;
  p.max_active = G;
  p.path = k::Fp8GemmPath::decode;
  p.expected_rows_per_group = 1;
  // Reference: the plain copy geometry, started after its wait, alone.
  dc.poison();
  CUDA_OK(k::fp8_gemm(p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto expect = dc.download();

  // The side stream's GEMM: dense, one row (the last of A), the last weight, early start and PDL, as the
  // shared expert's down GEMM.
  k::Fp8GemmParams ps = p;
  ps.a = dq.ptr + static_cast<size_t>(G) * kd;
  ps.a_scale = ds.ptr + static_cast<size_t>(G) * (kd / 128);
  ps.w = weights.d_q_ptrs->ptr + G;
  ps.w_scale = weights.d_scale_ptrs->ptr + G;
  ps.c = reinterpret_cast<__nv_bfloat16*>(dc_side.ptr);
  ps.num_groups = 1;
  ps.max_rows = 1;
  ps.group_offsets = nullptr;
  ps.active_groups = nullptr;
  ps.num_active = nullptr;
  ps.tile_prefix = nullptr;
  ps.max_active = 0;
  ps.group_info_ready = true;
  ps.pdl = true;
  ps.decode_line_copies = side_lines;

  k::Fp8GemmParams pe = p;
  pe.decode_line_copies = lines;
  pe.group_info_ready = true;
  pe.pdl = true;
  pe.decode_evict_first = true;
  cudaStream_t st, side_st;
  cudaEvent_t ev[2];
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&side_st, cudaStreamNonBlocking));
  for (auto& e : ev) CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const dim3 spin_grid(132 * 2), spin_block(128);
  size_t differ = 0;
  for (int it = 0; it < iters; ++it) {
    dc.poison();
    CUDA_OK(cudaDeviceSynchronize());
    if (side) {
      CUDA_OK(cudaEventRecord(ev[0], st));
      CUDA_OK(cudaStreamWaitEvent(side_st, ev[0], 0));
      CUDA_OK(glm5rt::kernels::detail::launch(spin_after_wait_kernel, spin_grid, spin_block, 0, side_st, false,
                                              5000ll));
      CUDA_OK(k::fp8_gemm(ps, side_st));
      CUDA_OK(cudaEventRecord(ev[1], side_st));
    }
    CUDA_OK(glm5rt::kernels::detail::launch(spin_after_wait_kernel, spin_grid, spin_block, 0, st, true,
                                            static_cast<long long>(2000 + 1000 * (it % 8))));
    CUDA_OK(k::fp8_gemm(pe, st));
    if (side) CUDA_OK(cudaStreamWaitEvent(st, ev[1], 0));
    CUDA_OK(cudaStreamSynchronize(st));
    const auto got = dc.download();
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expect[i];
  }
  MESSAGE("line copies " << lines << ", early start after a PDL predecessor, second stream " << side
                         << " (its GEMM with line copies " << side_lines << "): "
                         << iters << " runs, differing outputs " << differ);
  CHECK(differ == 0);
  for (auto& e : ev) CUDA_OK(cudaEventDestroy(e));
  CUDA_OK(cudaStreamDestroy(st));
  CUDA_OK(cudaStreamDestroy(side_st));
}

}  // namespace

// GLM5RT_TEST_CHAIN_ITERS: runs per form (default 8; fewer under compute-sanitizer).
int chain_iters() {
  const char* v = std::getenv("GLM5RT_TEST_CHAIN_ITERS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 8;
}

TEST_CASE("fp8 gemm early-start chain: line copies after a PDL predecessor, one stream") {
  run_early_lines_chain(false, false, chain_iters());
  run_early_lines_chain(true, false, chain_iters());
}

TEST_CASE("fp8 gemm early-start chain: line copies after a PDL predecessor, beside a second stream") {
  run_early_lines_chain(false, true, chain_iters());
  run_early_lines_chain(true, true, chain_iters());
  run_early_lines_chain(true, true, chain_iters(), true);  // and the second stream's dense GEMM with them too
}
