// The CUDA backend's fast attention kernels (kernels/attention sparse MLA, kernels/indexer scores + top-k)
// against its simple kernels (kernels/common) and the float32 CPU backend, whole model.
//
// The fixtures are too small for the fast families (they need GLM-5's attention shapes: kv_lora 512,
// rope 64, 8..128 heads, indexer 32 heads x 128 dims), so this test builds a small model with exactly
// those attention shapes and random float32 weights in host memory (hidden 256, 3 layers: dense + full
// indexer, MoE + full indexer, MoE + shared indexer). Every run asserts which kernels it used, so the test
// cannot pass by silently falling back to the simple path.
//
// Checks (bf16 and FP8 cache records, page sizes 16 and 64, scrambled pages):
// 1. teacher-forced prefill, the CPU's top-k selections and expert choices forced: fast vs CPU and simple
//    vs CPU (max |diff| / max |ref| <= 2e-2 for bf16 records, 1e-1 for FP8; argmax on decisive rows), and
//    fast vs simple;
// 2. free run: the fast indexer's selections against the CPU's and the simple indexer's, per layer;
// 3. decode rows one at a time (the T = 1 paths: split MLA, decode indexer scores, split top-k), forced;
// 4. 2- and 4-sequence decode batches (one cache, or several: batched attention over the caches' pools and
//    the per-cache launches) captured in a CUDA graph against eager forwards of the same state.
// Also: the records the cache writer produced, as export_records decodes them, against the CPU's.
// Lines to read in the log: [fast-logits], [fast-topk], [fast-records], [fast-decode], [fast-graph].
#ifdef GLM5RT_GPU_TESTS_WITH_CORE
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "model/config.hpp"
#include "model/weights.hpp"
#include "tests/gpu/backend_agreement.hpp"
#include "tests/gpu/random_glm5_model.hpp"

using namespace glm5rt;
using namespace glm5rt_test;

namespace {


// GLM-5's attention shapes, float32 (bf16-exact) weights, 8 routed experts of 96 (top-2) + 1 shared.
std::unique_ptr<RandomGlm5Model> glm5_attention_model(uint64_t seed) {
  auto m = std::make_unique<RandomGlm5Model>(seed);
  ModelConfig& c = m->c;
  set_glm5_attention_config(c);
  c.moe_intermediate_size = 96;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.n_group = 1;
  c.topk_group = 1;
  c.q_lora_rank = 192;
  c.torch_dtype = "float32";
  draw_random_weights(*m);
  return m;
}


// Mean overlap |A n B| / |A| of two selections (rows x k, -1 padded) over rows; also checks the format
// (ascending, -1 padded) and equal set sizes.
double topk_overlap(const std::vector<int32_t>& got, const std::vector<int32_t>& ref, int64_t k, int64_t* same_rows) {
  REQUIRE(got.size() == ref.size());
  const int64_t N = static_cast<int64_t>(ref.size()) / k;
  double overlap = 0;
  *same_rows = 0;
  for (int64_t r = 0; r < N; ++r) {
    std::set<int32_t> a, b;
    for (int64_t i = 0; i < k; ++i) {
      if (ref[r * k + i] >= 0) a.insert(ref[r * k + i]);
      if (got[r * k + i] >= 0) b.insert(got[r * k + i]);
      if (i > 0 && got[r * k + i] >= 0) CHECK(got[r * k + i - 1] >= 0);
      if (i > 0 && got[r * k + i] >= 0) CHECK(got[r * k + i - 1] < got[r * k + i]);
    }
    CHECK(a.size() == b.size());
    int64_t both = 0;
    for (int32_t t : a) both += b.count(t);
    overlap += a.empty() ? 1.0 : static_cast<double>(both) / static_cast<double>(a.size());
    *same_rows += a == b;
  }
  return overlap / static_cast<double>(N);
}

const char* dtype_name_of(const CacheDtypes& dt) { return dt.latent == GLM5RT_DTYPE_FP8_E4M3 ? "fp8" : "bf16"; }

}  // namespace

TEST_CASE("cuda fast kernels: whole-model logits fast vs simple vs CPU at GLM-5 attention shapes") {
  auto m = glm5_attention_model(20261130);
  const ModelConfig& c = m->c;
  const int64_t V = c.vocab_size, K = c.index_topk, N = 300;  // N >= 256: the prefill paths of the indexer
  const std::vector<int32_t> tokens = random_tokens(N, V, 7);
  auto cpu = make_cpu_backend(c, m->w, 2);
  auto gpu_ptr = make_cuda_backend(c, m->w, 0);
  auto& gpu = as_cuda(*gpu_ptr);
  REQUIRE(gpu.fast_mla_supported());
  REQUIRE(gpu.fast_indexer_supported());
  REQUIRE(gpu.kernels() == (std::getenv("GLM5RT_CUDA_KERNELS") ? std::string(std::getenv("GLM5RT_CUDA_KERNELS")) : "fast"));

  // CPU reference: one teacher-forced forward (float32 records), its selections and routing reported.
  const int32_t cps = 16;
  auto ccache = cpu->create_cache((N + cps - 1) / cps, cps);
  const Rows rc = forward_rows(*cpu, ccache.get(), scrambled_pages((N + cps - 1) / cps, 1), cps, tokens, 0, N, nullptr);

  const CacheDtypes bf16_dt{}, fp8_dt{GLM5RT_DTYPE_FP8_E4M3, GLM5RT_DTYPE_FP8_E4M3};
  for (const int32_t ps : {16, 64}) {
    for (const CacheDtypes& dt : {bf16_dt, fp8_dt}) {
      const bool fp8 = dt.latent == GLM5RT_DTYPE_FP8_E4M3;
      const std::string tag = std::string(dtype_name_of(dt)) + " records, page " + std::to_string(ps);
      CAPTURE(tag);
      const int64_t n_pages = (N + ps - 1) / ps + 3;
      const std::vector<int32_t> bt = scrambled_pages(n_pages, 100 + ps);
      std::vector<float> records;  // of the last run
      auto run = [&](const char* kernels, const ForwardProbe* force) {
        gpu.set_kernels(kernels);
        auto cache = gpu.create_cache(n_pages, ps, dt);
        Rows r = forward_rows(gpu, cache.get(), bt, ps, tokens, 0, N, force);
        records.assign(static_cast<size_t>(N * gpu.record_floats_per_token()), NAN);
        gpu.export_records(*cache, bt, N, records.data());
        const bool fast = std::string(kernels) != "simple";
        CHECK(gpu.last_forward_used_fast_mla() == fast);
        CHECK(gpu.last_forward_used_fast_indexer() == (std::string(kernels) == "fast"));
        return r;
      };
      // 1. Forced selections and routing: the arithmetic alone.
      const Rows fs = run("simple", &rc.probe);
      const Rows ff = run("fast", &rc.probe);
      // The records the cache writer produced, decoded by export_records (the layout the fast kernels
      // read), against the CPU's float32 records: latent and indexer-key parts separately.
      {
        const int64_t per = gpu.record_floats_per_token(), lat = c.kv_lora_rank + c.qk_rope_head_dim;
        std::vector<float> cref(static_cast<size_t>(N * per));
        cpu->export_records(*ccache, scrambled_pages((N + cps - 1) / cps, 1), N, cref.data());
        double dl = 0, rl = 0, di = 0, ri = 0;
        int64_t bad = 0;
        for (int64_t i = 0; i < N * per; ++i) {
          const bool key = (i % (per / c.num_hidden_layers)) >= lat;
          if (!std::isfinite(records[i])) ++bad;
          const double d = std::fabs(static_cast<double>(records[i]) - cref[i]), r = std::fabs(cref[i]);
          (key ? di : dl) = std::max(key ? di : dl, d);
          (key ? ri : rl) = std::max(key ? ri : rl, r);
        }
        std::printf("[fast-records] %-28s exported vs cpu: latent rel %.3e, indexer keys rel %.3e, %lld non-finite\n",
                    tag.c_str(), dl / rl, di / ri, static_cast<long long>(bad));
        CHECK(bad == 0);
        // A layout mismatch would give errors of order 1; bf16 / e4m3 rounding and the bf16 arithmetic
        // upstream stay well below these bars.
        CHECK(dl / rl <= (fp8 ? 2e-1 : 5e-2));
        CHECK(di / ri <= (fp8 ? 2e-1 : 5e-2));
      }
      const Rows fm = run("fast-mla", &rc.probe);
      const Agreement s_cpu = compare(fs.logits, rc.logits, V), f_cpu = compare(ff.logits, rc.logits, V);
      const Agreement f_s = compare(ff.logits, fs.logits, V), m_s = compare(fm.logits, fs.logits, V);
      print("fast-logits", "forced, simple vs cpu, " + tag, s_cpu);
      print("fast-logits", "forced, fast vs cpu, " + tag, f_cpu);
      print("fast-logits", "forced, fast vs simple, " + tag, f_s);
      print("fast-logits", "forced, fast-mla vs simple, " + tag, m_s);
      const double bar = fp8 ? 1e-1 : 2e-2;
      CHECK(f_cpu.nan == 0);
      CHECK(f_cpu.rel <= bar);
      CHECK(s_cpu.rel <= bar);
      CHECK(f_s.rel <= 2e-2);
      CHECK(m_s.rel <= 2e-2);
      if (!fp8) {
        CHECK(f_cpu.argmax_mismatch == 0);
        CHECK(f_s.argmax_mismatch == 0);
      }
      // The indexers' own choices were reported although forced: fast vs CPU and fast vs simple.
      for (size_t l = 0; l < rc.probe.topk.size(); ++l) {
        if (rc.probe.topk[l].empty()) continue;
        REQUIRE(ff.probe.topk[l].size() == rc.probe.topk[l].size());
        int64_t same_c = 0, same_s = 0;
        const double oc = topk_overlap(ff.probe.topk[l], rc.probe.topk[l], K, &same_c);
        const double os = topk_overlap(ff.probe.topk[l], fs.probe.topk[l], K, &same_s);
        std::printf("[fast-topk] %-28s layer %zu: fast vs cpu identical %lld/%lld rows, overlap %.4f; fast vs simple "
                    "identical %lld/%lld, overlap %.4f\n",
                    tag.c_str(), l, static_cast<long long>(same_c), static_cast<long long>(N), oc,
                    static_cast<long long>(same_s), static_cast<long long>(N), os);
        // Layer 0 sees identical inputs in every run (only the query's rounding differs: bf16 or e4m3 for
        // the fast indexer, float32 for the simple one), later layers the forced runs' hidden states.
        // Sanity floors (a wrong key layout or slot mapping gives ~k / N = 0.2): the numbers are the report.
        CHECK(oc >= (fp8 ? 0.75 : 0.85));
        CHECK(os >= (fp8 ? 0.75 : 0.85));
      }
      // 2. Free run (the fast indexer's own selections drive the attention): reported.
      const Rows free_f = run("fast", nullptr);
      print("fast-logits", "free, fast vs cpu, " + tag, compare(free_f.logits, rc.logits, V));
      CHECK(compare(free_f.logits, rc.logits, V).nan == 0);
    }
  }
}

TEST_CASE("cuda fast kernels: decode rows one at a time against the CPU with forced selections") {
  auto m = glm5_attention_model(424242);
  const ModelConfig& c = m->c;
  const int64_t V = c.vocab_size, K = c.index_topk, N = 160, P = 150;
  const std::vector<int32_t> tokens = random_tokens(N, V, 11);
  auto cpu = make_cpu_backend(c, m->w, 2);
  auto gpu_ptr = make_cuda_backend(c, m->w, 0);
  auto& gpu = as_cuda(*gpu_ptr);
  const int32_t ps = 64;
  const Rows rc = reference_rows(*cpu, ps, tokens, N);
  const std::vector<float> ref_decode(rc.logits.begin() + P * V, rc.logits.end());
  for (const CacheDtypes& dt : {CacheDtypes{}, CacheDtypes{GLM5RT_DTYPE_FP8_E4M3, GLM5RT_DTYPE_FP8_E4M3}}) {
    const bool fp8 = dt.latent == GLM5RT_DTYPE_FP8_E4M3;
    // simple, fast, fast with the attention-stage fusion (set_attention_fusion)
    std::vector<float> got[3];
    double own_overlap[3] = {0, 0, 0};
    int64_t own_count = 0;
    for (int which = 0; which < 3; ++which) {
      gpu.set_kernels(which ? "fast" : "simple");
      gpu.set_attention_fusion(which == 2);
      prefill_then_decode(gpu, dt, ps, tokens, P, N, &rc.probe, [&](int64_t r, const Rows& d) {
        CHECK(gpu.last_forward_used_fast_mla() == (which >= 1));
        CHECK(gpu.last_forward_used_fast_indexer() == (which >= 1));
        // Fused: 3 launches per layer (W_UK into the packed query, W_UV, the mla + indexer prep).
        CHECK(gpu.last_forward_attn_fused() == (which == 2 ? 3 * static_cast<int64_t>(c.num_hidden_layers) : 0));
        got[which].insert(got[which].end(), d.logits.begin(), d.logits.end());
        for (size_t l = 0; l < rc.probe.topk.size(); ++l) {
          if (rc.probe.topk[l].empty()) continue;
          const std::vector<int32_t> ref_row(rc.probe.topk[l].begin() + r * K, rc.probe.topk[l].begin() + (r + 1) * K);
          int64_t same = 0;
          own_overlap[which] += topk_overlap(d.probe.topk[l], ref_row, K, &same);
          if (which == 0) ++own_count;
        }
      });
    }
    const std::string tag = std::string(dtype_name_of(dt)) + " records, rows " + std::to_string(P) + ".." +
                            std::to_string(N - 1);
    gpu.set_attention_fusion(false);
    const Agreement fc = compare(got[1], ref_decode, V), sc = compare(got[0], ref_decode, V),
                    fs = compare(got[1], got[0], V), uc = compare(got[2], ref_decode, V),
                    uf = compare(got[2], got[1], V);
    print("fast-decode", "forced, simple vs cpu, " + tag, sc);
    print("fast-decode", "forced, fast vs cpu, " + tag, fc);
    print("fast-decode", "forced, fast vs simple, " + tag, fs);
    print("fast-decode", "forced, fast + attention fusion vs cpu, " + tag, uc);
    print("fast-decode", "forced, fast + attention fusion vs fast, " + tag, uf);
    std::printf("[fast-decode] %-40s indexer's own choice vs cpu: mean overlap simple %.4f, fast %.4f, fused %.4f\n",
                tag.c_str(), own_overlap[0] / own_count, own_overlap[1] / own_count, own_overlap[2] / own_count);
    CHECK(fc.nan == 0);
    CHECK(fc.rel <= (fp8 ? 1e-1 : 2e-2));
    CHECK(fs.rel <= 2e-2);
    if (!fp8) CHECK(fc.argmax_mismatch == 0);
    CHECK(own_overlap[1] / own_count >= (fp8 ? 0.75 : 0.85));
    // Fusion changes only the summation order of the absorbed products (bf16 results either way).
    CHECK(uc.nan == 0);
    CHECK(uc.rel <= (fp8 ? 1e-1 : 2e-2));
    CHECK(uf.rel <= 2e-2);
    if (!fp8) CHECK(uc.argmax_mismatch == 0);
    CHECK(own_overlap[2] / own_count >= (fp8 ? 0.75 : 0.85));
  }
}

TEST_CASE("cuda fast kernels: a multi-sequence decode batch replayed from a graph equals eager forwards") {
  auto m = glm5_attention_model(777);
  const ModelConfig& c = m->c;
  const int64_t V = c.vocab_size, P = 100, steps = 5;
  auto gpu_ptr = make_cuda_backend(c, m->w, 0);
  auto& gpu = as_cuda(*gpu_ptr);
  gpu.set_kernels("fast");
  const int32_t ps = 16;
  // Batch layouts: which cache each sequence uses (sequences with the same number share one cache).
  // One cache: one fast row group. Several caches, as the engine batches sessions (each owns its cache):
  // one launch per fast kernel over all rows reading each row's pool (batched attention, the default),
  // or with set_batch_attention(false) one launch per run of rows sharing a cache.
  // fused: the attention-stage fusion (set_attention_fusion) in both the graph and the eager runs.
  struct Layout {
    std::vector<int> cache_of;
    bool batched;
    bool fused = false;
  };
  const std::vector<Layout> layouts = {{{0, 0}, true},       {{0, 1}, true},       {{0, 1}, false},
                                       {{0, 1, 2, 3}, true}, {{0, 1, 1, 2}, true}, {{0, 1, 1, 2}, false},
                                       {{0, 0}, true, true}, {{0, 1, 1, 2}, true, true}};
  for (const Layout& lay : layouts) {
    const int64_t N = static_cast<int64_t>(lay.cache_of.size());
    const int n_caches = *std::max_element(lay.cache_of.begin(), lay.cache_of.end()) + 1;
    gpu.set_batch_attention(lay.batched);
    gpu.set_attention_fusion(lay.fused);
    for (const CacheDtypes& dt : {CacheDtypes{}, CacheDtypes{GLM5RT_DTYPE_FP8_E4M3, GLM5RT_DTYPE_FP8_E4M3}}) {
      // The graph run steps all sequences as one batch; the eager run steps each sequence alone (a probe
      // forces the eager path) on caches with identical contents. Sequences have different lengths, and
      // the pages of the sequences sharing a cache interleave.
      std::vector<int64_t> len(N);
      std::vector<std::vector<int32_t>> tok(N), bt(N);
      for (int64_t i = 0; i < N; ++i) {
        len[i] = P + 30 * i;
        tok[i] = random_tokens(len[i] + steps, V, 21 + static_cast<uint64_t>(i));
      }
      const int64_t per_seq = (P + 30 * (N - 1) + steps + ps - 1) / ps;
      const int64_t n_pages = N * per_seq + 2;
      const std::vector<int32_t> all = scrambled_pages(n_pages, 5);
      for (size_t p = 0; p < all.size(); ++p) bt[p % N].push_back(all[p]);
      std::vector<std::unique_ptr<CacheStorage>> gcache, ecache;
      for (int k = 0; k < n_caches; ++k) {
        gcache.push_back(gpu.create_cache(n_pages, ps, dt));
        ecache.push_back(gpu.create_cache(n_pages, ps, dt));
      }
      for (int64_t i = 0; i < N; ++i) {
        (void)forward_rows(gpu, gcache[lay.cache_of[i]].get(), bt[i], ps, tok[i], 0, len[i], nullptr, false);
        (void)forward_rows(gpu, ecache[lay.cache_of[i]].get(), bt[i], ps, tok[i], 0, len[i], nullptr, false);
      }
      double worst = 0;
      const int64_t replays0 = gpu.graph_replays();
      for (int64_t s = 0; s < steps; ++s) {
        BatchPlan plan;
        for (int64_t i = 0; i < N; ++i)
          plan.add_sequence(gcache[lay.cache_of[i]].get(), bt[i], ps, len[i] + s, tok[i].data() + len[i] + s, 1);
        for (int64_t i = 0; i < N; ++i) plan.logit_rows.push_back(i);
        std::vector<float> g(N * V, NAN);
        gpu.forward(plan, g.data(), {}, nullptr);
        CHECK(gpu.last_forward_used_fast_mla());
        CHECK(gpu.last_forward_used_fast_indexer());
        CHECK(gpu.last_forward_batched_attention() == (lay.batched && n_caches > 1));
        std::vector<float> e;
        for (int64_t i = 0; i < N; ++i) {
          const Rows r = forward_rows(gpu, ecache[lay.cache_of[i]].get(), bt[i], ps, tok[i], len[i] + s, 1, nullptr, true);
          e.insert(e.end(), r.logits.begin(), r.logits.end());
        }
        const Agreement a = compare(g, e, V);
        worst = std::max(worst, a.rel);
        CHECK(a.nan == 0);
        // The last eager single-row forward took the fused path iff asked.
        CHECK(gpu.last_forward_attn_fused() == (lay.fused ? 3 * static_cast<int64_t>(c.num_hidden_layers) : 0));
      }
      std::string tag = std::to_string(N) + " seqs in " + std::to_string(n_caches) + " cache(s)";
      if (n_caches > 1) tag += lay.batched ? ", batched" : ", per cache";
      if (lay.fused) tag += ", fused";
      std::printf("[fast-graph] %-5s records, %-32s: graph batch vs eager single rows, worst rel %.3e over %lld "
                  "steps; graph replays %lld\n",
                  dtype_name_of(dt), tag.c_str(), worst, static_cast<long long>(steps),
                  static_cast<long long>(gpu.graph_replays() - replays0));
      // Same kernels on the same state: only the batch composition differs (split planning may differ).
      CHECK(worst <= 5e-2);
      // The first eager step may grow a workspace, which drops the captured graphs (their addresses go
      // stale): later steps replay.
      CHECK(gpu.graph_replays() - replays0 >= 1);
    }
  }
  gpu.set_batch_attention(true);
  gpu.set_attention_fusion(false);
}

TEST_CASE("cuda fast kernels: the kernel family switch") {
  auto m = glm5_attention_model(1);
  auto gpu_ptr = make_cuda_backend(m->c, m->w, 0);
  auto& gpu = as_cuda(*gpu_ptr);
  for (const char* k : {"simple", "fast-mla", "fast"}) {
    gpu.set_kernels(k);
    CHECK(gpu.kernels() == k);
  }
  CHECK_THROWS_AS(gpu.set_kernels("fastest"), Error);
}

#endif  // GLM5RT_GPU_TESTS_WITH_CORE
