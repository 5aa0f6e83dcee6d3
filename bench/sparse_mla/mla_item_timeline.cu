// Where a persistent variant-14 CTA's time goes between its work items (session 19): the item probe
// (SparseMlaParams::debug_timeline, stamped by kernels built with GLM5RT_MLA_ITEM_PROBE: see sparse_mla_wsp_kernel.cuh,
// wsp_item_stamp) at prefill shapes. Per item and pair of warps (4 per CTA) four %globaltimer stamps: the step loop
// entered, its last step done, the outputs stored (issued), the next item prepared (its Q loads issued, its fills'
// indices staged, the table rebuilt). From them, per item after a CTA's first: the loop's time and its time per
// 16-token step, the transition from one item's last step to the next item's first (stores, preparation, the rest),
// and the spread of the four pairs' ends. With two top-k sizes the loop times give a per-step cost and a per-item
// excess inside the loop (the first steps' waits: Q, the records of the item's first fills). Session 20: per CTA, its
// span from its first loop to its last stores and when those were issued (the slowest CTA against the median: what
// the static assignment of items to CTAs costs).
//
// Data: one sequence of --pool tokens (as the benchmark's prefill: every query token's rows from the same pool),
// random distinct slots per row, full rows. T defaults to 31 x SMs (the benchmark's prefill 4096 on 132 SMs without
// its last partial wave); the last-wave launch (GLM5RT_MLA_TAIL) is turned off. Time: the plain call and the probed
// call event-timed (medians) beside the timeline (the probe's own cost). Never a test.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/common/bench_cuda.cuh"
#include "bench/sparse_mla/mla_bench_data.cuh"
#include "kernels/attention/sparse_mla.h"

using glm5rt::kernels::MlaCacheFormat;
using glm5rt::kernels::SparseMlaParams;

#define CK(x) BENCH_CHECK_CUDA(x)

namespace {

constexpr int kSlots = 16;  // sparse_mla_detail::kTimelineSlots: per item, 4 per pair
#if defined(GLM5RT_MLA_ITEM_PROBE_FINE)
// Session 21: kernels built with GLM5RT_MLA_ITEM_PROBE_FINE stamp pairs 0 and 1 only, and pair 0 the steps of the
// next item's preparation into slots 8-11 (sparse_mla_wsp_kernel.cuh, wsp_fine_stamp).
constexpr int kPairs = 2;
constexpr bool kFine = true;
#else
constexpr int kPairs = 4;
constexpr bool kFine = false;
#endif
enum Stamp { kLoop = 0, kDone = 1, kStored = 2, kPrepared = 3 };

struct Dist {
  double p10 = 0, med = 0, p90 = 0;
  size_t n = 0;
};
Dist dist_of(std::vector<double> v) {
  Dist d;
  d.n = v.size();
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  d.p10 = v[v.size() / 10];
  d.med = v[v.size() / 2];
  d.p90 = v[v.size() * 9 / 10];
  return d;
}

struct Figures {
  std::string label;
  Dist d;
};

}  // namespace

int main(int argc, char** argv) {
  int T = 0, H = 64, pool = 65536, reps = 5;
  std::vector<int> topks = {512, 2048};
  bool bf16 = true, fp8 = true;
  std::string json_path, commit = "unknown";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--T") && i + 1 < argc) T = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--H") && i + 1 < argc) H = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--topk") && i + 1 < argc) topks = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--pool") && i + 1 < argc) pool = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--bf16-only")) fp8 = false;
    else if (!std::strcmp(argv[i], "--fp8-only")) bf16 = false;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--T tokens] [--H 64] [--topk 512,2048] [--pool TOKENS] [--reps N] [--bf16-only | --fp8-only] "
                   "[--json PATH] [--commit SHA]\n",
                   argv[0]);
      return 2;
    }
  }
  const int max_topk = topks.empty() ? 0 : *std::max_element(topks.begin(), topks.end());
  if (H % 64 != 0 || topks.empty() || *std::min_element(topks.begin(), topks.end()) < 16 || max_topk > 2048 ||
      pool < max_topk || reps < 1 || T < 0) {
    std::fprintf(stderr, "need H a multiple of 64, top-k in 16 .. 2048 and <= --pool, --reps >= 1\n");
    return 2;
  }
  // No last-wave launch (read once by the launcher, before its first call): its combine would stamp into the buffer.
  setenv("GLM5RT_MLA_TAIL", "0", 1);
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  if (T == 0) T = 31 * prop.multiProcessorCount;
  const int items = T * (H / 64);
  const int grid = std::min(items, prop.multiProcessorCount);  // variant 14: one CTA per SM
  std::printf("device: %s (%d SMs); T=%d H=%d, pool %d tokens, %d items on %d CTAs\n", prop.name,
              prop.multiProcessorCount, T, H, pool, items, grid);

  uint16_t* q = nullptr;
  uint8_t *cache_bf16 = nullptr, *cache_fp8 = nullptr;
  int32_t* idx = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  unsigned long long* tl = nullptr;
  const size_t tl_entries = static_cast<size_t>(items) * kSlots;
  CK(cudaMalloc(&q, static_cast<size_t>(T) * H * 576 * 2));
  CK(cudaMalloc(&cache_bf16, static_cast<size_t>(pool) * 1152));
  CK(cudaMalloc(&cache_fp8, static_cast<size_t>(pool) * 656));
  CK(cudaMalloc(&idx, static_cast<size_t>(T) * max_topk * 4));
  CK(cudaMalloc(&out, static_cast<size_t>(T) * H * 512 * 2));
  CK(cudaMalloc(&lse, static_cast<size_t>(T) * H * 4));
  CK(cudaMalloc(&tl, tl_entries * 8));
  glm5rt_bench::fill_mla_bf16<<<1024, 256>>>(q, static_cast<size_t>(T) * H * 576, 3);
  glm5rt_bench::fill_mla_bf16<<<4096, 256>>>(reinterpret_cast<uint16_t*>(cache_bf16), static_cast<size_t>(pool) * 576, 1);
  glm5rt_bench::fill_mla_fp8_records<<<4096, 256>>>(cache_fp8, static_cast<size_t>(pool), 2);
  CK(cudaGetLastError());
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  std::string json = "{\n  \"command\": \"";
  for (int i = 0; i < argc; ++i) json += (i ? " " : "") + std::string(argv[i]);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  json += "\",\n  \"date\": \"" + std::string(date) + "\",\n  \"commit\": \"" + commit + "\",\n  \"device\": \"" +
          std::string(prop.name) + "\",\n  \"T\": " + std::to_string(T) +
          ",\n  \"H\": " + std::to_string(H) + ",\n  \"runs\": [";
  bool first_run = true;
  std::mt19937_64 rng(1234);
  std::vector<int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);

  std::vector<MlaCacheFormat> formats;
  if (bf16) formats.push_back(MlaCacheFormat::kBf16);
  if (fp8) formats.push_back(MlaCacheFormat::kFp8);
  for (const MlaCacheFormat fmt : formats) {
    std::vector<double> loop_means;  // per top-k: median loop us (items after a CTA's first)
    for (const int topk : topks) {
      {
        std::vector<int32_t> h(static_cast<size_t>(T) * topk);
        for (int t = 0; t < T; ++t)
          for (int j = 0; j < topk; ++j) {
            const size_t k = j + rng() % static_cast<uint64_t>(pool - j);
            std::swap(perm[j], perm[k]);
            h[static_cast<size_t>(t) * topk + j] = perm[j];
          }
        CK(cudaMemcpy(idx, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
      }
      SparseMlaParams p;
      p.format = fmt;
      p.q = q;
      p.cache = fmt == MlaCacheFormat::kBf16 ? static_cast<const void*>(cache_bf16) : cache_fp8;
      p.num_slots = pool;
      p.indices = idx;
      p.out = out;
      p.lse = lse;
      p.num_tokens = T;
      p.num_heads = H;
      p.topk = topk;
      p.softmax_scale = 1.f / 16.f;
      const int splits = glm5rt::kernels::sparse_mla_num_splits(p);
      const int hc = glm5rt::kernels::sparse_mla_heads_per_cta(p);
      const size_t ws_bytes = glm5rt::kernels::sparse_mla_workspace_size(p);
      void* ws = nullptr;
      CK(cudaMalloc(&ws, std::max<size_t>(ws_bytes, 16)));
      CK(cudaMemset(ws, 0, std::max<size_t>(ws_bytes, 16)));
      SparseMlaParams probed = p;
      probed.debug_timeline = tl;
      const float plain_ms =
          glm5rt_bench::time_ms([&] { CK(glm5rt::kernels::sparse_mla_forward(p, ws, ws_bytes, s)); }, 2, reps, s);
      const float probed_ms =
          glm5rt_bench::time_ms([&] { CK(glm5rt::kernels::sparse_mla_forward(probed, ws, ws_bytes, s)); }, 2, reps, s);
      CK(cudaMemsetAsync(tl, 0, tl_entries * 8, s));
      CK(glm5rt::kernels::sparse_mla_forward(probed, ws, ws_bytes, s));
      CK(cudaStreamSynchronize(s));
      std::vector<unsigned long long> h(tl_entries);
      CK(cudaMemcpy(h.data(), tl, tl_entries * 8, cudaMemcpyDeviceToHost));
      // Stamps relative to the call's first (%globaltimer counts ns since an epoch: ~1e18, beyond a double's exact
      // integers), + 1 so that a written stamp never reads 0; 0 = not written.
      unsigned long long t0 = ~0ull;
      for (const unsigned long long v : h)
        if (v != 0) t0 = std::min(t0, v);
      auto at = [&](int item, int pair, Stamp st) {
        const unsigned long long v = h[static_cast<size_t>(item) * kSlots + 4 * pair + st];
        return v == 0 ? 0.0 : static_cast<double>(v - t0 + 1);
      };

      const int nsteps = (topk + 15) / 16;
      std::vector<double> loop, per_step, first_loop, transition, stores, prepare, rest, spread;
      size_t stamped = 0, out_of_order = 0;
      for (int it = 0; it < items; ++it)
        for (int pr = 0; pr < kPairs; ++pr) {
          if (at(it, pr, kLoop) == 0 || at(it, pr, kDone) == 0) continue;
          ++stamped;
          const double lp = (at(it, pr, kDone) - at(it, pr, kLoop)) * 1e-3;
          (it < grid ? first_loop : loop).push_back(lp);
          if (it >= grid) per_step.push_back(lp / nsteps);
          const int nx = it + grid;  // the CTA's next item
          if (nx < items && at(nx, pr, kLoop) != 0) {
            const double tr = (at(nx, pr, kLoop) - at(it, pr, kDone)) * 1e-3;
            if (tr < 0) ++out_of_order;
            transition.push_back(tr);
            if (at(it, pr, kStored) != 0) stores.push_back((at(it, pr, kStored) - at(it, pr, kDone)) * 1e-3);
            if (at(it, pr, kPrepared) != 0 && at(it, pr, kStored) != 0) {
              prepare.push_back((at(it, pr, kPrepared) - at(it, pr, kStored)) * 1e-3);
              rest.push_back((at(nx, pr, kLoop) - at(it, pr, kPrepared)) * 1e-3);
            }
          }
        }
      // The preparation's steps (pair 0; fine probe only): stored -> Q's loads issued -> the index loads issued ->
      // the table rebuilt -> Q's fragments finished (its loads waited for) -> prepared (the index loads waited for).
      std::vector<double> fine[5];
      for (int it = 0; kFine && it < items; ++it) {
        const unsigned long long* e = &h[static_cast<size_t>(it) * kSlots];
        const unsigned long long pts[6] = {e[kStored], e[8], e[9], e[10], e[11], e[kPrepared]};
        bool all = true;
        for (const unsigned long long v : pts) all = all && v != 0;
        for (int i = 0; all && i < 5; ++i) fine[i].push_back(static_cast<double>(pts[i + 1] - pts[i]) * 1e-3);
      }
      for (int it = 0; it < items; ++it) {
        double lo = 0, hi = 0;
        bool all = true;
        for (int pr = 0; pr < kPairs; ++pr) {
          const double d = at(it, pr, kDone);
          if (d == 0) all = false;
          lo = pr == 0 ? d : std::min(lo, d);
          hi = pr == 0 ? d : std::max(hi, d);
        }
        if (all) spread.push_back((hi - lo) * 1e-3);
      }
      // Per CTA (session 20): its items it, it + grid, ...; from its first loop entry to its last outputs issued, and
      // when that last store was issued after the call's first stamp. A spread of the ends (the slowest CTA against
      // the median) is what static item assignment (item += gridDim.x) costs against balanced CTAs.
      std::vector<double> cta_span, cta_end;
      for (int c = 0; c < grid && c < items; ++c) {
        const int last = c + (items - 1 - c) / grid * grid;
        double st = 0, en = 0;
        bool all = true;
        for (int pr = 0; pr < kPairs; ++pr) {
          const double a0 = at(c, pr, kLoop), e0 = at(last, pr, kStored);
          if (a0 == 0 || e0 == 0) all = false;
          st = pr == 0 ? a0 : std::min(st, a0);
          en = pr == 0 ? e0 : std::max(en, e0);
        }
        if (!all) continue;
        cta_span.push_back((en - st) * 1e-3);
        cta_end.push_back(en * 1e-3);
      }
      const double end_max = cta_end.empty() ? 0.0 : *std::max_element(cta_end.begin(), cta_end.end());
      std::vector<Figures> figs = {
          {"loop, a CTA's first item", dist_of(first_loop)},
          {"loop, later items", dist_of(loop)},
          {"  per 16-token step", dist_of(per_step)},
          {"transition (last step -> next loop)", dist_of(transition)},
          {"  outputs stored (issued)", dist_of(stores)},
          {"  next item prepared", dist_of(prepare)},
          {"  prepared -> next loop", dist_of(rest)},
          {"pairs' last steps, spread", dist_of(spread)},
          {"CTA: first loop -> last stores (CTAs)", dist_of(cta_span)},
          {"CTA: last stores, from the first stamp", dist_of(cta_end)},
      };
      if (kFine) {
        const char* names[5] = {"  pair 0: Q loads issued", "  pair 0: index loads issued", "  pair 0: table rebuilt",
                                "  pair 0: Q fragments done", "  pair 0: indices staged"};
        for (int i = 0; i < 5; ++i) figs.push_back({names[i], dist_of(fine[i])});
      }
      loop_means.push_back(dist_of(loop).med);
      const char* fname = fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8";
      std::printf("\n%s top-k %d: %d heads per CTA x %d splits, %d steps per item; us per call: %.1f plain, %.1f probed "
                  "(%.3fx); %zu item-pairs stamped%s%s\n",
                  fname, topk, hc, splits, nsteps, plain_ms * 1e3, probed_ms * 1e3, probed_ms / plain_ms, stamped,
                  stamped == 0 ? "  (WARNING: no stamps: kernels built without GLM5RT_MLA_ITEM_PROBE, or not variant "
                                 "14's persistent form)"
                               : "",
                  out_of_order ? "  (WARNING: items out of order: the grid is not one CTA per SM)" : "");
      std::printf("%-38s %9s %9s %9s %8s\n", "us (items x pairs)", "p10", "median", "p90", "count");
      for (const Figures& f : figs)
        std::printf("%-38s %9.2f %9.2f %9.2f %8zu\n", f.label.c_str(), f.d.p10, f.d.med, f.d.p90, f.d.n);
      std::printf("slowest CTA's last stores at %.2f us: %.2f us after the median CTA's\n", end_max,
                  end_max - dist_of(cta_end).med);

      char buf[512];
      json += first_run ? "\n" : ",\n";
      first_run = false;
      std::snprintf(buf, sizeof buf,
                    "    {\"format\": \"%s\", \"topk\": %d, \"steps\": %d, \"heads_per_cta\": %d, \"splits\": %d, "
                    "\"plain_us\": %.2f, \"probed_us\": %.2f, \"stamped\": %zu, \"slowest_cta_end_us\": %.3f, "
                    "\"figures\": [",
                    fname, topk, nsteps, hc, splits, plain_ms * 1e3, probed_ms * 1e3, stamped, end_max);
      json += buf;
      for (size_t i = 0; i < figs.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s\n      {\"what\": \"%s\", \"p10_us\": %.3f, \"median_us\": %.3f, \"p90_us\": %.3f, \"count\": %zu}",
                      i ? "," : "", figs[i].label.c_str(), figs[i].d.p10, figs[i].d.med, figs[i].d.p90, figs[i].d.n);
        json += buf;
      }
      json += "]}";
      CK(cudaFree(ws));
    }
    // Two top-k sizes: the later items' loop as a + b * steps (per-item excess inside the loop, per-step cost).
    if (topks.size() == 2 && topks[0] != topks[1]) {
      const double s0 = (topks[0] + 15) / 16, s1 = (topks[1] + 15) / 16;
      const double b = (loop_means[1] - loop_means[0]) / (s1 - s0), a0 = loop_means[0] - b * s0;
      std::printf("%s loop fit: %.3f us per step + %.2f us per item inside the loop\n",
                  fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8", b, a0);
    }
  }
  json += "\n  ]\n}\n";
  if (!json_path.empty() && !glm5rt_bench::write_text(json_path, json)) return 1;
  CK(cudaFree(q));
  CK(cudaFree(cache_bf16));
  CK(cudaFree(cache_fp8));
  CK(cudaFree(idx));
  CK(cudaFree(out));
  CK(cudaFree(lse));
  CK(cudaFree(tl));
  return 0;
}
