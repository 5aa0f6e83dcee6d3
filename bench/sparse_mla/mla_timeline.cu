// Where a small-T sparse MLA call's time goes, inside the graph (session 15): the timeline probe
// (SparseMlaParams::debug_timeline) of variant 10's kernel and of the chunked combine, over CUDA-graph replays of
// `calls` consecutive T=1 calls (each with its own index set, so the records come from DRAM as in the benchmark).
//
// Per call, times are in us from the call's first CTA past its PDL wait (the previous call's combine completed):
// the main kernel's CTAs (min / median / max over CTAs of each stamp: entry, past the wait, the producer's first
// index, step s's records landed, step 0's GEMM1, the loop's end, outputs staged, outputs stored), the combine's
// blocks (entry, past the wait, stored), and the next call's first CTA past its wait (the call's period). The
// median of each figure over calls 1 .. calls - 1 of every replay is printed (call 0 follows an idle GPU) and
// written to JSON. The graph time per call with and without the probe is printed beside it (the probe's cost).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "bench/common/bench_cuda.cuh"
#include "bench/sparse_mla/mla_bench_data.cuh"
#include "kernels/attention/sparse_mla.h"

using glm5rt::kernels::MlaCacheFormat;
using glm5rt::kernels::SparseMlaParams;

#define CK(x) BENCH_CHECK_CUDA(x)

namespace {

constexpr int kTopk = 2048;
constexpr int kMainSlots = 16;  // sparse_mla_detail::kTimelineSlots
constexpr int kCombineSlots = 4;

struct Stat {
  double mn, med, mx;
};
Stat stat_of(std::vector<double> v) {
  if (v.empty()) return Stat{0, 0, 0};
  std::sort(v.begin(), v.end());
  return Stat{v.front(), v[v.size() / 2], v.back()};
}
double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One row of the printed timeline: a label and, per call, (min, median, max) over CTAs.
struct Row {
  std::string label;
  std::vector<double> mn, med, mx;  // one entry per sampled call
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> h_list = {128, 64};
  int64_t pool = 1 << 20;
  int calls = 32, reps = 10;
  int force_hc = 0, force_splits = 0;  // --hc / --splits: a forced plan (0 = automatic)
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--H") && i + 1 < argc) h_list = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--pool") && i + 1 < argc) pool = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) calls = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--hc") && i + 1 < argc) force_hc = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--splits") && i + 1 < argc) force_splits = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--H 128,64] [--hc 16] [--splits 32] [--pool TOKENS] [--calls N] [--reps N] [--json PATH]\n", argv[0]);
      return 2;
    }
  }
  if (calls < 2 || reps < 1 || pool < kTopk) {
    std::fprintf(stderr, "need --calls >= 2, --reps >= 1, --pool >= %d\n", kTopk);
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs); T=1, top-k %d, bf16 records, pool %lld tokens, %d calls per graph, %d replays\n",
              prop.name, prop.multiProcessorCount, kTopk, static_cast<long long>(pool), calls, reps);

  const int max_h = *std::max_element(h_list.begin(), h_list.end());
  uint16_t* cache = nullptr;
  uint16_t* q = nullptr;
  int32_t* idx = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  CK(cudaMalloc(&cache, static_cast<size_t>(pool) * 576 * 2));
  CK(cudaMalloc(&q, static_cast<size_t>(max_h) * 576 * 2));
  CK(cudaMalloc(&idx, static_cast<size_t>(calls) * kTopk * 4));
  CK(cudaMalloc(&out, static_cast<size_t>(max_h) * 512 * 2));
  CK(cudaMalloc(&lse, static_cast<size_t>(max_h) * 4));
  glm5rt_bench::fill_mla_bf16<<<1024, 256>>>(cache, static_cast<size_t>(pool) * 576, 1);
  glm5rt_bench::fill_mla_bf16<<<64, 256>>>(q, static_cast<size_t>(max_h) * 576, 2);
  {
    std::mt19937_64 rng(7);
    std::vector<int32_t> h_idx(static_cast<size_t>(calls) * kTopk);
    for (int c = 0; c < calls; ++c) {
      std::unordered_set<int64_t> seen;
      for (int k = 0; k < kTopk;) {
        const int64_t v = static_cast<int64_t>(rng() % static_cast<uint64_t>(pool));
        if (seen.insert(v).second) h_idx[static_cast<size_t>(c) * kTopk + k++] = static_cast<int32_t>(v);
      }
    }
    CK(cudaMemcpy(idx, h_idx.data(), h_idx.size() * 4, cudaMemcpyHostToDevice));
  }
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  std::string json = "{\n  \"command\": \"";
  for (int i = 0; i < argc; ++i) json += (i ? " " : "") + std::string(argv[i]);
  json += "\",\n  \"device\": \"" + std::string(prop.name) + "\",\n  \"shapes\": [";
  bool first_shape = true;

  for (const int H : h_list) {
    SparseMlaParams p;
    p.format = MlaCacheFormat::kBf16;
    p.q = q;
    p.cache = cache;
    p.num_slots = pool;
    p.out = out;
    p.lse = lse;
    p.num_tokens = 1;
    p.num_heads = H;
    p.topk = kTopk;
    p.softmax_scale = 1.f / 16.f;
    p.heads_per_cta = force_hc;
    p.num_splits = force_splits;
    const int splits = glm5rt::kernels::sparse_mla_num_splits(p);
    const int hc = glm5rt::kernels::sparse_mla_heads_per_cta(p);
    const int combine = glm5rt::kernels::sparse_mla_combine_kind(p);
    const int main_ctas = splits * (H / hc);
    const int combine_blocks = splits > 1 ? H * 4 : 0;
    const size_t per_call = static_cast<size_t>(main_ctas) * kMainSlots + static_cast<size_t>(combine_blocks) * kCombineSlots;
    const size_t ws_bytes = glm5rt::kernels::sparse_mla_workspace_size(p);
    void* ws = nullptr;
    unsigned long long* tl = nullptr;
    CK(cudaMalloc(&ws, std::max<size_t>(ws_bytes, 16)));
    CK(cudaMemset(ws, 0, std::max<size_t>(ws_bytes, 16)));
    CK(cudaMalloc(&tl, per_call * calls * 8));

    // Graphs of `calls` calls, without and with the probe.
    auto capture = [&](bool probe) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int c = 0; c < calls; ++c) {
        SparseMlaParams pc = p;
        pc.indices = idx + static_cast<size_t>(c) * kTopk;
        pc.debug_timeline = probe ? tl + per_call * c : nullptr;
        CK(glm5rt::kernels::sparse_mla_forward(pc, ws, ws_bytes, s));
      }
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphDestroy(g));
      return ge;
    };
    cudaGraphExec_t plain = capture(false), probed = capture(true);
    const float plain_ms = glm5rt_bench::time_ms([&] { CK(cudaGraphLaunch(plain, s)); }, 3, 2 * reps + 1, s);
    const float probed_ms = glm5rt_bench::time_ms([&] { CK(cudaGraphLaunch(probed, s)); }, 3, 2 * reps + 1, s);

    // Rows: main-kernel stamps (slot order of kTimelineSlots), then the combine's.
    const int nsteps = (kTopk / splits + 15) / 16;
    std::vector<Row> rows;
    std::vector<std::pair<std::string, int>> main_rows = {{"main: entry", 0},        {"main: past PDL wait", 1},
                                                          {"main: first index", 2},  {"main: step 0 landed", 3},
                                                          {"main: step 0 GEMM1", 4}};
    for (int st = 1; st < std::min(nsteps, 8); ++st) main_rows.push_back({"main: step " + std::to_string(st) + " landed", 8 + st});
    // Session 16: splits of at most 4 steps also stamp each step's landing as a producer thread sees it.
    if (nsteps <= 4)
      for (int st = 0; st < nsteps; ++st) main_rows.push_back({"producer: step " + std::to_string(st) + " landed", 12 + st});
    main_rows.push_back({"main: loop done", 5});
    main_rows.push_back({"main: staged", 6});
    main_rows.push_back({"main: stored", 7});
    for (auto& mr : main_rows) rows.push_back(Row{mr.first, {}, {}, {}});
    const size_t n_main_rows = rows.size();
    if (combine_blocks > 0)
      for (const char* l : {"combine: entry", "combine: past PDL wait", "combine: stored"}) rows.push_back(Row{l, {}, {}, {}});
    std::vector<double> period;
    bool probed_ok = true;

    std::vector<unsigned long long> h_tl(per_call * calls);
    for (int r = 0; r < reps; ++r) {
      CK(cudaMemset(tl, 0, per_call * calls * 8));
      CK(cudaGraphLaunch(probed, s));
      CK(cudaStreamSynchronize(s));
      CK(cudaMemcpy(h_tl.data(), tl, h_tl.size() * 8, cudaMemcpyDeviceToHost));
      auto ref_of = [&](int c) {  // the call's first CTA past its PDL wait
        unsigned long long m = ~0ull;
        for (int b = 0; b < main_ctas; ++b) m = std::min(m, h_tl[per_call * c + static_cast<size_t>(b) * kMainSlots + 1]);
        return m;
      };
      for (int c = 1; c < calls; ++c) {
        const unsigned long long ref = ref_of(c);
        if (ref == 0) probed_ok = false;
        const unsigned long long* mb = h_tl.data() + per_call * c;
        for (size_t ri = 0; ri < n_main_rows; ++ri) {
          const int slot = main_rows[ri].second;
          std::vector<double> v;
          for (int b = 0; b < main_ctas; ++b) {
            const unsigned long long t = mb[static_cast<size_t>(b) * kMainSlots + slot];
            if (t != 0) v.push_back((static_cast<double>(t) - static_cast<double>(ref)) * 1e-3);
          }
          const Stat st = stat_of(v);
          rows[ri].mn.push_back(st.mn), rows[ri].med.push_back(st.med), rows[ri].mx.push_back(st.mx);
        }
        const unsigned long long* cb = mb + static_cast<size_t>(main_ctas) * kMainSlots;
        for (int k = 0; k < (combine_blocks > 0 ? 3 : 0); ++k) {
          std::vector<double> v;
          for (int b = 0; b < combine_blocks; ++b) {
            const unsigned long long t = cb[static_cast<size_t>(b) * kCombineSlots + k];
            if (t != 0) v.push_back((static_cast<double>(t) - static_cast<double>(ref)) * 1e-3);
          }
          const Stat st = stat_of(v);
          rows[n_main_rows + k].mn.push_back(st.mn), rows[n_main_rows + k].med.push_back(st.med),
              rows[n_main_rows + k].mx.push_back(st.mx);
        }
        if (c + 1 < calls) period.push_back((static_cast<double>(ref_of(c + 1)) - static_cast<double>(ref)) * 1e-3);
      }
    }
    std::printf("\nT=1 H=%d: %d heads per CTA x %d splits (%d CTAs, %d steps each), combine %d; graph us per call: "
                "%.2f plain, %.2f probed%s\n",
                H, hc, splits, main_ctas, nsteps, combine, plain_ms * 1e3 / calls, probed_ms * 1e3 / calls,
                probed_ok ? "" : "  (WARNING: the main kernel wrote no stamps: not variant 10)");
    std::printf("%-26s %9s %9s %9s   (us from the call's first CTA past its PDL wait; median over calls)\n", "event",
                "min", "median", "max");
    for (const Row& row : rows)
      std::printf("%-26s %9.2f %9.2f %9.2f\n", row.label.c_str(), median_of(row.mn), median_of(row.med), median_of(row.mx));
    std::printf("%-26s %9s %9.2f\n", "next call past its wait", "", median_of(period));

    char buf[512];
    json += first_shape ? "\n" : ",\n";
    first_shape = false;
    std::snprintf(buf, sizeof buf,
                  "    {\"T\": 1, \"H\": %d, \"heads_per_cta\": %d, \"splits\": %d, \"steps\": %d, \"combine\": %d, "
                  "\"graph_us_plain\": %.3f, \"graph_us_probed\": %.3f, \"probed\": %s, \"period_us\": %.3f, \"events\": [",
                  H, hc, splits, nsteps, combine, plain_ms * 1e3 / calls, probed_ms * 1e3 / calls,
                  probed_ok ? "true" : "false", median_of(period));
    json += buf;
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      std::snprintf(buf, sizeof buf, "%s\n      {\"event\": \"%s\", \"min_us\": %.3f, \"median_us\": %.3f, \"max_us\": %.3f}",
                    ri ? "," : "", rows[ri].label.c_str(), median_of(rows[ri].mn), median_of(rows[ri].med),
                    median_of(rows[ri].mx));
      json += buf;
    }
    json += "]}";
    CK(cudaGraphExecDestroy(plain));
    CK(cudaGraphExecDestroy(probed));
    CK(cudaFree(ws));
    CK(cudaFree(tl));
  }
  json += "\n  ]\n}\n";
  if (!json_path.empty() && !glm5rt_bench::write_text(json_path, json)) return 1;
  return 0;
}
