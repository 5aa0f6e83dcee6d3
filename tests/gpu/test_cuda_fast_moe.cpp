// The CUDA backend's fast MoE and FP8 GEMM paths (kernels/moe moe_forward for the MoE layers, kernels/gemm
// fp8_gemm on the FP8 weights of the dense projections) against its simple kernels and the float32 CPU
// backend, whole model.
//
// No fixture has dims these kernels take (FP8 with 128 x 128 blocks, hidden and moe_intermediate
// multiples of 128), so this test builds a small random model with FP8 block-scaled weights (128 x 128
// blocks, random e4m3 values and random block scales) for every projection and expert, GLM-5's attention
// shapes (so the fast attention kernels run too) and: hidden 256, dense intermediate 512, 32 routed
// experts of 128 + 1 shared, top-8 in 4 groups (2 kept), 3 layers (dense, MoE, MoE with a shared
// indexer). Both backends read the same FP8 weights (the CPU decodes them exactly), so the comparison
// measures the kernels' arithmetic. Every run asserts which paths it used, so the test cannot pass by
// silently falling back to the simple kernels.
//
// Precision: fp8_gemm and moe_forward quantise their activations to e4m3 with one scale per 128 values
// (as DeepSeek-V3 / GLM-5 FP8 inference does): a relative rounding error of up to 2^-4 per element, about
// 3% rms on every GEMM's output, where the simple path keeps bf16 activations (2^-9, and measures ~1e-2 of
// the largest logit against the CPU). The float32 CPU reference does not quantise activations, so the
// fast paths cannot meet the simple path's 2e-2 bar against it; their bars are a separation test instead:
// max |diff| / max |ref| <= 0.25 and rms(diff) / rms(ref) <= 0.12 (0.15 with FP8 records), at most 5% of
// the decisive rows with another argmax (bf16 records). A control run with every token's experts shifted
// by one (a wiring error of the kind these bars must catch) has to land at >= 2x the rms bar. Fast vs
// simple and the isolated paths (fast MoE alone, fp8_gemm alone) are printed to attribute the error.
//
// Checks: 1. teacher-forced prefill (300 rows: the prefill GEMM kernels) with the CPU's top-k selections
// and expert choices forced, bf16 and FP8 records: fast (moe_forward + fp8_gemm), fast MoE alone, fp8_gemm
// alone, simple, each against the CPU; free-run routing of moe_forward's router against the CPU's;
// 2. decode rows one at a time (the decode GEMM kernels), forced; 3. a 2-sequence decode batch captured
// in a CUDA graph against eager forwards; 4. the switches. Log tags: [moe-logits], [moe-route],
// [moe-decode], [moe-graph].
#ifdef GLM5RT_GPU_TESTS_WITH_CORE
#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_weights.hpp"
#include "model/config.hpp"
#include "model/weights.hpp"
#include "tests/gpu/backend_agreement.hpp"
#include "tests/gpu/random_glm5_model.hpp"

using namespace glm5rt;
using namespace glm5rt_test;

namespace {


// GLM-5's attention shapes, FP8 e4m3 projections and experts with 128 x 128 block scales (bf16-exact
// float32 embeddings, norms, router, indexer weights_proj and lm_head), 32 routed experts of 128 (top-8 in
// 4 groups, 2 kept) + 1 shared.
std::unique_ptr<RandomGlm5Model> fp8_moe_model(uint64_t seed) {
  auto m = std::make_unique<RandomGlm5Model>(seed);
  m->fp8_projections = true;
  ModelConfig& c = m->c;
  set_glm5_attention_config(c);
  c.intermediate_size = 512;  // 4 K blocks: the dense MLP's down projection runs split-K too (2 slices)
  c.moe_intermediate_size = 128;
  c.n_routed_experts = 32;
  c.num_experts_per_tok = 8;
  c.n_group = 4;
  c.topk_group = 2;
  c.q_lora_rank = 256;
  c.torch_dtype = "bfloat16";
  c.quant.fp8 = true;
  draw_random_weights(*m);
  return m;
}


// The bars of a path with e4m3 activations (see the top of the file).
constexpr double kFp8ActMaxRel = 0.25;
double fp8_act_rms_bar(bool fp8_records) { return fp8_records ? 0.15 : 0.12; }
void check_fp8_activations(const Agreement& a, bool fp8_records) {
  CHECK(a.nan == 0);
  CHECK(a.rel <= kFp8ActMaxRel);
  CHECK(a.rel_l2 <= fp8_act_rms_bar(fp8_records));
  if (!fp8_records) CHECK(a.argmax_mismatch * 20 <= a.argmax_checked);
}

// Dense FP8 projections of one forward of this model through fp8_gemm: q_a, kv_a, q_b and o_proj in every
// layer, wq_b and wk where the indexer runs (layers 0 and 1), the dense MLP's gate|up and down (layer 0);
// with moe_forward the MoE layers' shared experts run inside it, with the simple MoE they are two more
// fp8_gemm SwiGLU GEMMs per MoE layer.
constexpr int64_t kDenseFp8Gemms = 3 * 4 + 2 * 2 + 2;

// One configuration of the CUDA backend: kernel families and FP8 path, and what a forward must use.
struct Config {
  const char* name;
  const char* kernels;
  const char* fp8_path;
  int64_t moe_layers;    // MoE layers through moe_forward
  int64_t fp8_gemms;     // dense projections through fp8_gemm ...
  int64_t fp8_max_rows;  // ... in forwards of at most this many rows (the "auto" path), none above
};
constexpr int64_t kAll = int64_t{1} << 40;
const Config kSimple{"simple", "simple", "auto", 0, 0, kAll};
const Config kFastAuto{"fast (default)", "fast", "auto", 2, kDenseFp8Gemms,
                       cuda::CudaBackend::kFp8GemmAutoRows};
const Config kFast{"fast, fp8_gemm forced", "fast", "gemm", 2, kDenseFp8Gemms, kAll};
const Config kFastMoeOnly{"fast moe, dequant dense", "fast", "dequant", 2, 0, kAll};
const Config kFp8GemmOnly{"fp8_gemm dense, simple moe", "fast-attn", "gemm", 0, kDenseFp8Gemms + 2 * 2, kAll};

void configure(cuda::CudaBackend& gpu, const Config& k) {
  gpu.set_kernels(k.kernels);
  gpu.set_fp8_path(k.fp8_path);
}

// Of the dense FP8 GEMMs, those that run split-K at decode sizes (<= 32 rows): o_proj (k 1024 = 8 blocks,
// 4 output blocks of 64 rows: 4 slices) in each of the 3 layers and the dense MLP's down projection (k 512
// = 4 blocks: 2 slices) in layer 0; the other projections have k = 256, too short to split into slices of
// >= 2 blocks. The slices are K ranges of the checkpoint tensors read in place (no copies).
constexpr int64_t kSplitGemms = 4;

void check_paths(const cuda::CudaBackend& gpu, const Config& k, int64_t rows) {
  CHECK(gpu.last_forward_fast_moe_layers() == k.moe_layers);
  const bool fp8 = rows <= k.fp8_max_rows && k.fp8_gemms > 0;
  CHECK(gpu.last_forward_fp8_gemms() == (fp8 ? k.fp8_gemms : 0));
  CHECK(gpu.last_forward_fp8_split_gemms() ==
        (fp8 && rows <= cuda::CudaBackend::kSplitMaxRows && gpu.fp8_split_k() ? kSplitGemms : 0));
}

}  // namespace

TEST_CASE("cuda fast moe: whole-model logits with FP8 weights, moe_forward and fp8_gemm vs simple vs CPU") {
  auto m = fp8_moe_model(20261130);
  const ModelConfig& c = m->c;
  const int64_t V = c.vocab_size, N = 300, K = c.num_experts_per_tok;
  const std::vector<int32_t> tokens = random_tokens(N, V, 5);
  auto cpu = make_cpu_backend(c, m->w, 2);
  auto gpu_ptr = make_cuda_backend(c, m->w, 0);
  auto& gpu = as_cuda(*gpu_ptr);
  REQUIRE(gpu.fast_moe_layers() == 2);

  const int32_t cps = 16;
  auto ccache = cpu->create_cache((N + cps - 1) / cps, cps);
  const Rows rc = forward_rows(*cpu, ccache.get(), scrambled_pages((N + cps - 1) / cps, 1), cps, tokens, 0, N, nullptr);

  const int32_t ps = 64;
  for (const CacheDtypes& dt : {CacheDtypes{}, CacheDtypes{GLM5RT_DTYPE_FP8_E4M3, GLM5RT_DTYPE_FP8_E4M3}}) {
    const bool fp8 = dt.latent == GLM5RT_DTYPE_FP8_E4M3;
    const std::string recs = fp8 ? "fp8 records" : "bf16 records";
    CAPTURE(recs);
    const int64_t n_pages = (N + ps - 1) / ps + 2;
    const std::vector<int32_t> bt = scrambled_pages(n_pages, 40);
    auto run = [&](const Config& k, const ForwardProbe* force) {
      configure(gpu, k);
      auto cache = gpu.create_cache(n_pages, ps, dt);
      Rows r = forward_rows(gpu, cache.get(), bt, ps, tokens, 0, N, force);
      check_paths(gpu, k, N);
      return r;
    };
    const Rows s = run(kSimple, &rc.probe);
    const Agreement s_cpu = compare(s.logits, rc.logits, V);
    print("moe-logits", "forced, simple vs cpu, " + recs, s_cpu);
    CHECK(s_cpu.rel <= (fp8 ? 1e-1 : 2e-2));
    // (At 300 rows the default "auto" FP8 path is "dequant", i.e. kFastMoeOnly.)
    for (const Config* k : {&kFast, &kFastMoeOnly, &kFp8GemmOnly}) {
      const Rows f = run(*k, &rc.probe);
      const Agreement f_cpu = compare(f.logits, rc.logits, V), f_s = compare(f.logits, s.logits, V);
      print("moe-logits", std::string("forced, ") + k->name + " vs cpu, " + recs, f_cpu);
      print("moe-logits", std::string("forced, ") + k->name + " vs simple, " + recs, f_s);
      check_fp8_activations(f_cpu, fp8);
      check_fp8_activations(f_s, fp8);
    }
    // Control: the fast path with every token routed to the next expert (same weights): a wiring error
    // of the kind the bars must catch lands far above them.
    {
      ForwardProbe shifted = rc.probe;
      for (auto& layer : shifted.experts)
        for (int32_t& e : layer) e = e < 0 ? e : static_cast<int32_t>((e + 1) % c.n_routed_experts);
      const Rows x = run(kFast, &shifted);
      const Agreement x_cpu = compare(x.logits, rc.logits, V);
      print("moe-logits", "control: experts shifted by one, fast vs cpu, " + recs, x_cpu);
      CHECK(x_cpu.rel_l2 >= 2 * fp8_act_rms_bar(fp8));
    }
    // Free run: moe_forward's own router (bf16 hidden state and weight, as transformers routes a bf16
    // model) against the CPU's float32 routing, per MoE layer: rows with the identical expert set, and the
    // mean overlap. Reported; the floor only catches a broken router (random choice: 8 / 32 = 0.25).
    const Rows free_f = run(kFast, nullptr);
    for (size_t l = 0; l < rc.probe.experts.size(); ++l) {
      if (rc.probe.experts[l].empty()) continue;
      REQUIRE(free_f.probe.experts[l].size() == rc.probe.experts[l].size());
      int64_t same = 0;
      double overlap = 0;
      for (int64_t r = 0; r < N; ++r) {
        std::set<int32_t> a(rc.probe.experts[l].begin() + r * K, rc.probe.experts[l].begin() + (r + 1) * K);
        std::set<int32_t> b(free_f.probe.experts[l].begin() + r * K, free_f.probe.experts[l].begin() + (r + 1) * K);
        int64_t both = 0;
        for (int32_t e : a) both += b.count(e);
        overlap += static_cast<double>(both) / static_cast<double>(a.size());
        same += a == b;
      }
      std::printf("[moe-route] %s layer %zu: moe_forward router vs cpu, identical expert sets %lld/%lld rows, mean "
                  "overlap %.4f\n",
                  recs.c_str(), l, static_cast<long long>(same), static_cast<long long>(N), overlap / N);
      CHECK(overlap / N >= 0.8);
    }
    print("moe-logits", "free, fast vs cpu, " + recs, compare(free_f.logits, rc.logits, V));
    CHECK(compare(free_f.logits, rc.logits, V).nan == 0);
  }
}

TEST_CASE("cuda fast moe: decode rows one at a time against the CPU with forced selections and experts") {
  auto m = fp8_moe_model(99);
  const ModelConfig& c = m->c;
  const int64_t V = c.vocab_size, N = 140, P = 130;
  const std::vector<int32_t> tokens = random_tokens(N, V, 13);
  auto cpu = make_cpu_backend(c, m->w, 2);
  auto gpu_ptr = make_cuda_backend(c, m->w, 0);
  auto& gpu = as_cuda(*gpu_ptr);
  const int32_t ps = 16;
  const Rows rc = reference_rows(*cpu, ps, tokens, N);
  const std::vector<float> ref_decode(rc.logits.begin() + P * V, rc.logits.end());
  for (const CacheDtypes& dt : {CacheDtypes{}, CacheDtypes{GLM5RT_DTYPE_FP8_E4M3, GLM5RT_DTYPE_FP8_E4M3}}) {
    const bool fp8 = dt.latent == GLM5RT_DTYPE_FP8_E4M3;
    // simple, fast, fast without split-K, fast with the grouped attention projections (one fp8_gemm per
    // input, split-K in place: set_proj_grouping; weights streamed early: set_proj_group_early), the
    // grouped form without split-K (and without the early start), and the default grouped form with the
    // attention-stage fusion (set_attention_fusion: absorbed per-head products through absorbed_heads)
    std::vector<float> got[6];
    for (int which = 0; which < 6; ++which) {
      const Config& k = which ? kFastAuto : kSimple;
      configure(gpu, k);
      gpu.set_fp8_split_k(which != 2 && which != 4);
      gpu.set_proj_grouping(which >= 3);
      gpu.set_proj_group_early(which == 3);  // weights streamed before the PDL wait (with split-K)
      gpu.set_attention_fusion(which == 5);
      prefill_then_decode(gpu, dt, ps, tokens, P, N, &rc.probe, [&](int64_t, const Rows& d) {
        check_paths(gpu, k, 1);
        // Every layer groups at least x -> q_a | kv_a and o_proj (q_b alone or with wq_b as well).
        if (which >= 3) CHECK(gpu.last_forward_proj_groups() >= 3 * static_cast<int64_t>(c.num_hidden_layers));
        else CHECK(gpu.last_forward_proj_groups() == 0);
        // Fused: 3 launches per layer (W_UK into the packed fast-MLA query, W_UV, the mla + indexer prep).
        if (which == 5) CHECK(gpu.last_forward_attn_fused() == 3 * static_cast<int64_t>(c.num_hidden_layers));
        else CHECK(gpu.last_forward_attn_fused() == 0);
        got[which].insert(got[which].end(), d.logits.begin(), d.logits.end());
      });
    }
    const std::string tag = std::string(fp8 ? "fp8" : "bf16") + " records, rows " + std::to_string(P) + ".." +
                            std::to_string(N - 1);
    gpu.set_fp8_split_k(true);
    gpu.set_proj_grouping(false);
    gpu.set_proj_group_early(false);
    gpu.set_attention_fusion(false);
    const Agreement fc = compare(got[1], ref_decode, V), sc = compare(got[0], ref_decode, V),
                    fs = compare(got[1], got[0], V), fn = compare(got[2], ref_decode, V),
                    split_vs_not = compare(got[1], got[2], V);
    print("moe-decode", "forced, simple vs cpu, " + tag, sc);
    print("moe-decode", "forced, fast vs cpu, " + tag, fc);
    print("moe-decode", "forced, fast vs simple, " + tag, fs);
    print("moe-decode", "forced, fast without split-K vs cpu, " + tag, fn);
    print("moe-decode", "forced, fast split-K vs without, " + tag, split_vs_not);
    CHECK(sc.rel <= (fp8 ? 1e-1 : 2e-2));
    check_fp8_activations(fc, fp8);
    check_fp8_activations(fs, fp8);
    check_fp8_activations(fn, fp8);
    // Split-K changes only the summation order and rounds the slices' partial sums to bf16 (2^-9). That
    // is not a small difference between the two runs: every later e4m3 quantisation rounds some values
    // the other way, and the next ones more, so the runs drift apart to the size of the e4m3 error itself
    // (H200, cd840ce: split vs unsplit rms 7.5e-2 with bf16 records, 6.6e-2 with FP8, while each is
    // 7.2e-2 / 7.4e-2 (bf16) and 8.1e-2 / 8.5e-2 (FP8) from the CPU). So the check is that split-K is no
    // farther from the CPU than the unsplit path; a wrong slice or row map lands near the control's 0.6.
    CHECK(fc.rel_l2 <= 1.25 * fn.rel_l2 + 1e-2);
    const Agreement gc = compare(got[3], ref_decode, V), gn = compare(got[4], ref_decode, V);
    print("moe-decode", "forced, fast grouped projections vs cpu, " + tag, gc);
    print("moe-decode", "forced, fast grouped projections without split-K vs cpu, " + tag, gn);
    check_fp8_activations(gc, fp8);
    check_fp8_activations(gn, fp8);
    // The grouped launch computes the same products (same e4m3 activations, same slices where the
    // split_slices rule gives the same count, float32 sum of bf16 partials): no farther from the CPU
    // than the separate launches, by the split-K check's argument above.
    CHECK(gc.rel_l2 <= 1.25 * fn.rel_l2 + 1e-2);
    CHECK(gn.rel_l2 <= 1.25 * fn.rel_l2 + 1e-2);
    // The fused absorbed products sum the same bf16 products in another order (8-lane partial sums, then a
    // shuffle tree) before the same bf16 rounding: no farther from the CPU than the unfused grouped path.
    const Agreement uc = compare(got[5], ref_decode, V);
    print("moe-decode", "forced, fast grouped + attention fusion vs cpu, " + tag, uc);
    check_fp8_activations(uc, fp8);
    CHECK(uc.rel_l2 <= 1.25 * fn.rel_l2 + 1e-2);
  }
}

TEST_CASE("cuda fast moe: a two-sequence decode batch replayed from a graph equals eager forwards") {
  auto m = fp8_moe_model(777);
  const ModelConfig& c = m->c;
  const int64_t V = c.vocab_size, P = 100, PZ = 120, steps = 5;
  const std::vector<int32_t> tx = random_tokens(P + steps, V, 21), tz = random_tokens(PZ + steps, V, 22);
  auto gpu_ptr = make_cuda_backend(c, m->w, 0);
  auto& gpu = as_cuda(*gpu_ptr);
  configure(gpu, kFastAuto);
  const int32_t ps = 16;
  // Both forms of the attention projections: separate launches, and grouped (set_proj_grouping); the
  // grouped form also with the attention-stage fusion (set_attention_fusion; fuse = 2).
  for (const int form : {0, 1, 2})
  for (const CacheDtypes& dt : {CacheDtypes{}, CacheDtypes{GLM5RT_DTYPE_FP8_E4M3, GLM5RT_DTYPE_FP8_E4M3}}) {
    const bool grouped = form >= 1, fused = form == 2;
    gpu.set_proj_grouping(grouped);
    gpu.set_proj_group_early(grouped);
    gpu.set_attention_fusion(fused);
    const int64_t n_pages = 2 * ((PZ + steps + ps - 1) / ps) + 2;
    std::vector<int32_t> all = scrambled_pages(n_pages, 5), bx, bz;
    for (size_t i = 0; i < all.size(); ++i) (i % 2 ? bz : bx).push_back(all[i]);
    auto gcache = gpu.create_cache(n_pages, ps, dt), ecache = gpu.create_cache(n_pages, ps, dt);
    (void)forward_rows(gpu, gcache.get(), bx, ps, tx, 0, P, nullptr, false);
    (void)forward_rows(gpu, gcache.get(), bz, ps, tz, 0, PZ, nullptr, false);
    (void)forward_rows(gpu, ecache.get(), bx, ps, tx, 0, P, nullptr, false);
    (void)forward_rows(gpu, ecache.get(), bz, ps, tz, 0, PZ, nullptr, false);
    double worst = 0;
    const int64_t replays0 = gpu.graph_replays();
    for (int64_t s = 0; s < steps; ++s) {
      BatchPlan plan;
      plan.add_sequence(gcache.get(), bx, ps, P + s, tx.data() + P + s, 1);
      plan.add_sequence(gcache.get(), bz, ps, PZ + s, tz.data() + PZ + s, 1);
      plan.logit_rows = {0, 1};
      std::vector<float> g(2 * V, NAN);
      gpu.forward(plan, g.data(), {}, nullptr);
      // The eager single-row forwards (a probe forces the eager path; the router then runs apart from
      // moe_forward and hands it its choice, the graph's moe_forward routes itself).
      const Rows rx = forward_rows(gpu, ecache.get(), bx, ps, tx, P + s, 1, nullptr, true);
      check_paths(gpu, kFastAuto, 1);
      const Rows rz = forward_rows(gpu, ecache.get(), bz, ps, tz, PZ + s, 1, nullptr, true);
      std::vector<float> e(rx.logits);
      e.insert(e.end(), rz.logits.begin(), rz.logits.end());
      const Agreement a = compare(g, e, V);
      worst = std::max(worst, a.rel);
      CHECK(a.nan == 0);
    }
    if (grouped) CHECK(gpu.last_forward_proj_groups() > 0);  // the last eager single-row forward
    else CHECK(gpu.last_forward_proj_groups() == 0);
    if (fused) CHECK(gpu.last_forward_attn_fused() == 3 * static_cast<int64_t>(c.num_hidden_layers));
    else CHECK(gpu.last_forward_attn_fused() == 0);
    std::printf("[moe-graph] %-5s records%s%s: graph batch vs eager single rows, worst rel %.3e over %lld steps; graph "
                "replays %lld\n",
                dt.latent == GLM5RT_DTYPE_FP8_E4M3 ? "fp8" : "bf16", grouped ? ", grouped projections" : "",
                fused ? ", attention fusion" : "", worst,
                static_cast<long long>(steps),
                static_cast<long long>(gpu.graph_replays() - replays0));
    // Same kernels and weights on the same state; the rows' GEMMs do not mix rows, but the fast MLA may
    // split differently for 1 and 2 rows (the attention test's bar).
    CHECK(worst <= 5e-2);
    CHECK(gpu.graph_replays() - replays0 >= 1);
  }  gpu.set_attention_fusion(false);
}

// Split-K (ungrouped projections: set_proj_grouping(false)) reads its K slices in place: the memory report's
// weights are exactly the uploaded checkpoint's bytes (the backend used to add K-sliced copies of every
// split weight, ~160 MB per GLM-5 layer), while the decode forward still runs kSplitGemms split GEMMs.
// Accuracy of the split path against the CPU: the decode test above (which = 1).
TEST_CASE("cuda fast moe: split-K reads the weights in place (the memory report counts no copies)") {
  auto m = fp8_moe_model(4242);
  const ModelConfig& c = m->c;
  const int64_t V = c.vocab_size, P = 40;
  cuda::check(cudaSetDevice(0), "cudaSetDevice");
  cuda::DevWeights w = cuda::upload_weights(c, m->w, {});
  const int64_t uploaded = w.bytes;
  REQUIRE(uploaded > 0);
  cuda::CudaBackend gpu(c, std::move(w), 0);
  CHECK(gpu.memory().weights == uploaded);
  configure(gpu, kFastAuto);
  gpu.set_proj_grouping(false);
  gpu.set_fp8_split_k(true);
  const std::vector<int32_t> tokens = random_tokens(P + 2, V, 31);
  const int32_t ps = 16;
  const int64_t n_pages = (P + 2 + ps - 1) / ps + 1;
  auto cache = gpu.create_cache(n_pages, ps, CacheDtypes{});
  const std::vector<int32_t> bt = scrambled_pages(n_pages, 17);
  (void)forward_rows(gpu, cache.get(), bt, ps, tokens, 0, P, nullptr);
  for (int64_t r = P; r < P + 2; ++r) {
    const Rows d = forward_rows(gpu, cache.get(), bt, ps, tokens, r, 1, nullptr);
    check_paths(gpu, kFastAuto, 1);  // kSplitGemms split GEMMs ran
    CHECK(gpu.last_forward_proj_groups() == 0);
    int64_t bad = 0;
    for (const float v : d.logits) bad += !std::isfinite(v);
    CHECK(bad == 0);
  }
  CHECK(gpu.memory().weights == uploaded);
}

TEST_CASE("cuda fast moe: the kernel and FP8 path switches") {
  auto m = fp8_moe_model(1);
  auto gpu_ptr = make_cuda_backend(m->c, m->w, 0);
  auto& gpu = as_cuda(*gpu_ptr);
  for (const char* k : {"simple", "fast-mla", "fast-attn", "fast"}) {
    gpu.set_kernels(k);
    CHECK(gpu.kernels() == k);
  }
  for (const char* p : {"auto", "gemm", "dequant", "direct"}) {
    gpu.set_fp8_path(p);
    CHECK(gpu.fp8_path() == p);
  }
  CHECK_THROWS_AS(gpu.set_kernels("fastest"), Error);
  CHECK_THROWS_AS(gpu.set_fp8_path("fp4"), Error);
}

#endif  // GLM5RT_GPU_TESTS_WITH_CORE
