// Sparse MLA benchmark on GLM-5 shapes (576/512, top-k 2048): decode T in {1, 8, 32, 128}, prefill
// T in {1024, 4096}, H in {64, 16, 8}, bf16 and FP8 records. Prints a table and writes JSON.
//
// Data: random records in a pool of --pool tokens per sequence (decode: one sequence per query token,
// prefill: one sequence for all query tokens), top-k distinct random slots per row. For small T the call
// rotates among several index sets over different sequences so that repeated calls do not find the
// records in L2. Time: a CUDA graph of K calls replayed after warm-up (per-call time = the median replay / K over 5
// replays, 15 for prefill; this is how a decode step runs), and the median of single event-timed calls.
// Bytes counted: records gathered (decode; for prefill the whole pool of the sequence when smaller,
// since rows are shared across query tokens and come from L2) + q + out + lse + indices.
// FLOPs: 2 * T * H * topk * (576 + 512).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
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
#include "bench/sparse_mla/gather_ceiling.cuh"
#include "bench/sparse_mla/mla_bench_data.cuh"
#include "kernels/attention/sparse_mla.h"

using glm5rt::kernels::MlaCacheFormat;
using glm5rt::kernels::SparseMlaParams;

#define CK(x) BENCH_CHECK_CUDA(x)

namespace {

using glm5rt_bench::fill_mla_bf16;
using glm5rt_bench::fill_mla_fp8_records;

struct Case {
  const char* phase;
  int T, H;
  MlaCacheFormat fmt;
};

struct Result {
  Case c;
  int splits;
  int sets;
  double graph_us, event_us, tflops, tbps, bytes, flops;
  double v1_graph_us;  // the round-1 kernel (kernel_variant = 1), same shape, automatic splits
  double v2_graph_us;  // round 2's pipelined kernel (variant 2)
  double v3_graph_us;  // variant 3 (32-head CTAs compiled for 2 per SM); 0 when H < 32 (same as variant 2)
  double v5_graph_us;  // round 3's warp-specialized kernel (variant 5; sm_90+: bulk copies for bf16 records)
  int v5_splits;       // the split count the planner gives variant 5
  double v6_graph_us;  // round 5's variant 6 (variant 5 with bulk-copied FP8 records); 0 for bf16 (= variant 5)
  double v7_graph_us;  // round 6's variant 7 (FP8 records converted in registers); 0 for bf16 (= variant 2)
  int v7_splits;       // the split count the planner gives variant 7
  double v10_graph_us;  // session 6's variant 10 (variant 5 with the softmax in registers; 16 / 32 heads per CTA)
  double v11_graph_us;  // session 7's variant 11 (one 8-warp group for a CTA's 32 heads); 0 below 32 heads per CTA
  double v14_graph_us;  // session 11's variant 14 (four warp pairs for a CTA's 64 heads); 0 unless H % 64 == 0, bf16
  // Round 4 (--combine-compare): the automatic kernel with each merge of the split partials, same inputs.
  int auto_combine;            // SparseMlaParams::combine the automatic choice resolves to (0 = no splits)
  double combine_old_us;       // combine = 1: round 3's combine kernel (the old path)
  double combine_chunked_us;   // combine = 2: chunked combine kernel
  double combine_fused_us;     // combine = 3: fused last-CTA merge (the launcher runs 2 where not allowed)
  // Round 5 (--plan-sweep): the plan (heads per CTA, splits) of the automatic call (round 5's planner) and
  // round 4's planner (SparseMlaParams::planner = 1) timed on the same inputs, and the best swept plan.
  int auto_hc;
  int old_hc, old_splits;
  double old_planner_us;
  int best_hc, best_splits;
  double best_us;
  // Session 8 (decode, T >= 32): the same records (index set 0) gathered and nothing else (gather_ceiling.cuh):
  // the access pattern's ceiling on this machine; 0 where not measured.
  double gather_us, gather_tbps;
  // Session 24: the SM clock (clock_probe) right after the event-timed calls and right after the graph replays: under
  // sustained prefill the H200 reaches its 700 W cap and its clock falls 3-5% below the 1,980 MHz boost, and the time
  // with it (docs/PERFORMANCE.md "Session 24").
  double mhz_event, mhz_graph;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Session 24: the SM clock right after a row's timings (and --graph-diag's calls), measured on the GPU: one warp counts
// clock64 cycles over ~20 us of %globaltimer (nvidia-smi's clock and power samples average over too long a window to
// see a 4 ms call).
__global__ void clock_probe(float* mhz) {
  uint64_t t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  } while (t1 - t0 < 20000);
  const long long c1 = clock64();
  if (threadIdx.x == 0) *mhz = static_cast<float>(c1 - c0) * 1e3f / static_cast<float>(t1 - t0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "sparse_mla_bench.json", commit = "unknown", command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  int pool = 65536, topk = 2048, reps = 15;
  bool quick = false;
  bool sweep = true;  // --no-sweep: skip the split sweep (all shapes, every kernel, automatic splits only)
  std::vector<int> sweep_splits = {1, 2, 4, 8, 16, 32, 64};
  // Round 4: --combine-compare times the automatic kernel with each merge (old combine kernel, chunked,
  // fused, automatic) and skips the per-variant timings and the sweep; --T / --H restrict the decode shapes.
  bool combine_compare = false;
  // Round 5: --plan-sweep times, for T <= 8, every heads_per_cta (8 / 16 / 32 dividing H) x split count
  // (T = 1: 8..64, else 1..64) besides the automatic plan of both planners, and skips the per-variant
  // timings; JSON "split_sweep" entries carry heads_per_cta, the plan summary is in "results".
  bool plan_sweep = false;
  std::vector<int> t_list = {1, 8, 32, 128}, h_list = {64, 16, 8};
  // Round 6: --variants 2,7 restricts the per-variant timings to these kernel_variant values (default all).
  bool fmt_bf16 = true, fmt_fp8 = true;
  std::vector<int> var_list = {1, 2, 3, 5, 7, 10, 11, 14};  // (6 was removed in session 4; its JSON field stays 0)
  // Round 6: --v7-splits 3,4 also times variant 7 (FP8 shapes with T >= 32) at these forced split counts
  // (JSON "split_sweep", variant 7): its 8-head CTAs fit three per H200 SM, which round 4's power-of-two
  // split model rarely fills.
  std::vector<int> v7_splits_list;
  // Session 4: --force-splits 1,2,3,4 also times the automatic kernel, variant 2 and variant 5 at these
  // forced split counts for T >= 32 (JSON "split_sweep", variant 0 / 2 / 5). Session 10: above
  // kMlaJointPlanMaxTokens (8) tokens, and --force-variants 0 restricts the kernels timed so (default 0,2,5).
  std::vector<int> force_splits_list, force_variants = {0, 2, 5};
  // Session 4: --prefill-T 4096 --prefill-H 64 adds these prefill shapes even with --quick.
  std::vector<int> prefill_t_list, prefill_h_list = {64};
  // Session 24: --graph-diag prints, for each prefill shape, graphs of 1 and 2 automatic calls with an event before and
  // after every call, replayed 9 times (each call's time inside the graph), and single stream-launched calls before,
  // between and after them with the SM clock after each (clock_probe). It showed that the benchmark's prefill figure
  // moves with the card's power cap, not with the launch form.
  bool graph_diag = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else if (!std::strcmp(argv[i], "--formats") && i + 1 < argc) {
      // Session 6: --formats bf16 (or fp8, or bf16,fp8 = the default) restricts the record formats timed.
      const std::string f = argv[++i];
      fmt_bf16 = f.find("bf16") != std::string::npos;
      fmt_fp8 = f.find("fp8") != std::string::npos;
    }
    else if (!std::strcmp(argv[i], "--combine-compare")) combine_compare = true;
    else if (!std::strcmp(argv[i], "--plan-sweep")) plan_sweep = true;
    else if (!std::strcmp(argv[i], "--T") && i + 1 < argc) t_list = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--H") && i + 1 < argc) h_list = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--variants") && i + 1 < argc) var_list = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--v7-splits") && i + 1 < argc) v7_splits_list = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--force-splits") && i + 1 < argc) force_splits_list = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--force-variants") && i + 1 < argc) force_variants = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--prefill-T") && i + 1 < argc) prefill_t_list = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--prefill-H") && i + 1 < argc) prefill_h_list = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--pool") && i + 1 < argc) pool = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    // Session 17: --topk N (1 .. 2048) times every shape with N entries per row instead of GLM-5's 2048, e.g. to
    // separate a CTA's fixed cost (prologue, epilogue) from its per-step cost by a fit over N.
    else if (!std::strcmp(argv[i], "--topk") && i + 1 < argc) topk = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--no-sweep")) sweep = false;
    else if (!std::strcmp(argv[i], "--graph-diag")) graph_diag = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--json PATH] [--pool TOKENS] [--reps N] [--quick] [--no-sweep] [--combine-compare] [--plan-sweep] "
                   "[--T 1,8,128] [--H 8,16,64] [--variants 2,7] [--v7-splits 3,4] [--force-splits 2,3] [--force-variants 0] [--prefill-T 4096] [--prefill-H 64] [--formats bf16,fp8] [--topk 2048] [--graph-diag]\n",
                   argv[0]);
      return 2;
    }
  }
  if (topk < 1 || topk > 2048 || pool < topk) {
    std::fprintf(stderr, "--topk must be 1 .. 2048 and at most --pool (got %d, pool %d)\n", topk, pool);
    return 2;
  }
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

  // Ceiling 1: device copy bandwidth (bytes read + written).
  double copy_tbps = 0;
  {
    const size_t bytes = size_t{1} << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> ts;
    for (int i = 0; i < 12; ++i) {
      CK(cudaEventRecord(e0));
      CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 2) ts.push_back(ms);
    }
    copy_tbps = 2.0 * bytes / (median(ts) * 1e-3) / 1e12;
    CK(cudaFree(a));
    CK(cudaFree(b));
    std::printf("device copy: %.2f TB/s (read + write)\n", copy_tbps);
  }

  const int max_seqs = 128;
  const size_t num_slots = static_cast<size_t>(max_seqs) * pool;
  uint8_t *cache_bf16, *cache_fp8;
  CK(cudaMalloc(&cache_bf16, num_slots * 1152));
  CK(cudaMalloc(&cache_fp8, num_slots * 656));
  fill_mla_bf16<<<4096, 256>>>(reinterpret_cast<uint16_t*>(cache_bf16), num_slots * 576, 1);
  fill_mla_fp8_records<<<4096, 256>>>(cache_fp8, num_slots, 2);
  CK(cudaGetLastError());

  std::vector<MlaCacheFormat> formats;
  if (fmt_bf16) formats.push_back(MlaCacheFormat::kBf16);
  if (fmt_fp8) formats.push_back(MlaCacheFormat::kFp8);
  std::vector<Case> cases;
  for (int T : t_list)
    for (int H : h_list)
      for (MlaCacheFormat f : formats) cases.push_back({"decode", T, H, f});
  for (int T : prefill_t_list)
    for (int H : prefill_h_list)
      for (MlaCacheFormat f : formats) cases.push_back({"prefill", T, H, f});
  if (!quick && !combine_compare && !plan_sweep && prefill_t_list.empty())
    for (int T : {1024, 4096})
      for (int H : {64, 16, 8})
        for (MlaCacheFormat f : formats) cases.push_back({"prefill", T, H, f});

  std::mt19937_64 rng(1234);
  std::vector<int32_t> perm(pool);  // stays a permutation under partial Fisher-Yates draws
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<Result> results;
  struct Sweep {
    int T, H;
    MlaCacheFormat f;
    int splits;
    int heads_per_cta;  // 0 = automatic
    double us;
    int variant;  // kernel_variant of the timed configuration (0 = automatic)
    int combine = 0;  // plan sweep: the merge it ran (sparse_mla_combine_kind: 2 fp32 chunked, 3 fused, 5 bf16 chunked; 4 = session 4's removed cluster merge)
  };
  std::vector<Sweep> sweeps;
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float* d_mhz;  // clock_probe's result
  CK(cudaMalloc(&d_mhz, sizeof(float)));

  // Rewritten after every case so that a run cut short still leaves its numbers.
  auto write_json = [&]() -> bool {
  FILE* f = std::fopen(json_path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
    return false;
  }
  std::fprintf(f, "{\n  \"command\": \"%s\",\n  \"date\": \"%s\",\n  \"git_commit\": \"%s\",",
               glm5rt_bench::json_escape(command).c_str(), glm5rt_bench::utc_now_iso().c_str(), commit.c_str());
  std::fprintf(f, "\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n  \"copy_tbps\": %.4f,\n  \"topk\": %d,\n  \"pool_tokens_per_sequence\": %d,\n",
               prop.name, prop.multiProcessorCount, copy_tbps, topk, pool);
  std::fprintf(f, "  \"results\": [\n");
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(f,
                 "    {\"phase\": \"%s\", \"format\": \"%s\", \"T\": %d, \"H\": %d, \"splits\": %d, \"index_sets\": %d, "
                 "\"graph_us\": %.3f, \"event_us\": %.3f, \"tflops\": %.3f, \"tbps\": %.4f, \"bytes\": %.0f, \"flops\": %.0f, "
                 "\"v1_graph_us\": %.3f, \"v2_graph_us\": %.3f, \"v3_graph_us\": %.3f, \"v5_graph_us\": %.3f, "
                 "\"v5_splits\": %d, \"v6_graph_us\": %.3f, \"v7_graph_us\": %.3f, \"v7_splits\": %d, \"v10_graph_us\": %.3f, \"v11_graph_us\": %.3f, \"v14_graph_us\": %.3f, \"auto_combine\": %d, \"combine_old_us\": %.3f, \"combine_chunked_us\": %.3f, "
                 "\"combine_fused_us\": %.3f, \"heads_per_cta\": %d, \"old_planner_heads_per_cta\": %d, "
                 "\"old_planner_splits\": %d, \"old_planner_us\": %.3f, \"best_heads_per_cta\": %d, \"best_splits\": %d, "
                 "\"best_us\": %.3f, \"gather_us\": %.3f, \"gather_tbps\": %.4f, \"sm_mhz_after_event\": %.0f, "
                 "\"sm_mhz_after_graph\": %.0f}%s\n",
                 r.c.phase, r.c.fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8", r.c.T, r.c.H, r.splits, r.sets, r.graph_us,
                 r.event_us, r.tflops, r.tbps, r.bytes, r.flops, r.v1_graph_us, r.v2_graph_us, r.v3_graph_us, r.v5_graph_us, r.v5_splits, r.v6_graph_us, r.v7_graph_us, r.v7_splits, r.v10_graph_us, r.v11_graph_us, r.v14_graph_us,
                 r.auto_combine, r.combine_old_us, r.combine_chunked_us, r.combine_fused_us, r.auto_hc, r.old_hc,
                 r.old_splits, r.old_planner_us, r.best_hc, r.best_splits, r.best_us, r.gather_us, r.gather_tbps,
                 r.mhz_event, r.mhz_graph, i + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ],\n  \"split_sweep\": [\n");
  for (size_t i = 0; i < sweeps.size(); ++i) {
    const Sweep& s = sweeps[i];
    std::fprintf(f, "    {\"T\": %d, \"H\": %d, \"format\": \"%s\", \"splits\": %d, \"heads_per_cta\": %d, \"variant\": %d, \"combine\": %d, \"graph_us\": %.3f}%s\n",
                 s.T, s.H, s.f == MlaCacheFormat::kBf16 ? "bf16" : "fp8", s.splits, s.heads_per_cta, s.variant, s.combine, s.us,
                 i + 1 < sweeps.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
    return true;
  };

  for (const Case& c : cases) {
    const bool decode = !std::strcmp(c.phase, "decode");
    const size_t rec = c.fmt == MlaCacheFormat::kBf16 ? 1152 : 656;
    const double gathered = static_cast<double>(c.T) * topk * rec;
    // Rotate index sets until one pass touches > 200 MB of records (well past the 60 MB L2).
    const int sets = decode ? std::clamp(static_cast<int>(200e6 / gathered) + 1, 1, 64) : 1;
    std::vector<int32_t> idx(static_cast<size_t>(sets) * c.T * topk);
    for (int s = 0; s < sets; ++s)
      for (int t = 0; t < c.T; ++t) {
        const int seq = decode ? (s * c.T + t) % max_seqs : 0;
        int32_t* row = idx.data() + (static_cast<size_t>(s) * c.T + t) * topk;
        for (int j = 0; j < topk; ++j) {
          const size_t k = j + rng() % static_cast<uint64_t>(pool - j);
          std::swap(perm[j], perm[k]);
          row[j] = static_cast<int32_t>(static_cast<size_t>(seq) * pool + perm[j]);
        }
      }
    int32_t* d_idx;
    uint16_t* d_q;
    void *d_out, *d_ws = nullptr;
    float* d_lse;
    const size_t qn = static_cast<size_t>(sets) * c.T * c.H * 576;
    CK(cudaMalloc(&d_idx, idx.size() * 4));
    CK(cudaMalloc(&d_q, qn * 2));
    CK(cudaMalloc(&d_out, static_cast<size_t>(c.T) * c.H * 512 * 2));
    CK(cudaMalloc(&d_lse, static_cast<size_t>(c.T) * c.H * 4));
    CK(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
    fill_mla_bf16<<<1024, 256>>>(d_q, qn, 77 + c.T);
    CK(cudaGetLastError());

    SparseMlaParams p;
    p.cache = c.fmt == MlaCacheFormat::kBf16 ? static_cast<const void*>(cache_bf16) : cache_fp8;
    p.num_slots = static_cast<int64_t>(num_slots);
    p.format = c.fmt;
    p.out = d_out;
    p.lse = d_lse;
    p.num_tokens = c.T;
    p.num_heads = c.H;
    p.topk = topk;
    p.softmax_scale = 1.f / 16.f;  // GLM-5: qk_head_dim 256
    auto set_inputs = [&](int s) {
      p.q = d_q + static_cast<size_t>(s) * c.T * c.H * 576;
      p.indices = d_idx + static_cast<size_t>(s) * c.T * topk;
    };
    set_inputs(0);

    // Time one configuration (num_splits = 0: automatic). Returns graph per-call us; event median too; with `clocks`
    // also the SM clock right after the event-timed calls and after the graph replays (mhz_event / mhz_graph).
    auto probe_mhz = [&]() -> double {
      clock_probe<<<1, 32, 0, stream>>>(d_mhz);
      CK(cudaGetLastError());
      float mhz = 0;
      CK(cudaMemcpyAsync(&mhz, d_mhz, sizeof(float), cudaMemcpyDeviceToHost, stream));
      CK(cudaStreamSynchronize(stream));
      return mhz;
    };
    // One call launched into the stream, event-timed (us), with the workspace of `ws` bytes at d_ws.
    auto timed_call_us = [&](size_t ws) -> double {
      CK(cudaEventRecord(e0, stream));
      CK(glm5rt::kernels::sparse_mla_forward(p, d_ws, ws, stream));
      CK(cudaEventRecord(e1, stream));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      return ms * 1e3;
    };
    double mhz_event = 0, mhz_graph = 0;  // the automatic configuration's (time_config with `clocks`)
    auto time_config = [&](int splits, double* event_us, bool clocks = false) -> double {
      p.num_splits = splits;
      const size_t ws = glm5rt::kernels::sparse_mla_workspace_size(p);
      if (d_ws) CK(cudaFree(d_ws));
      d_ws = nullptr;
      if (ws) {
        CK(cudaMalloc(&d_ws, ws));
        CK(cudaMemset(d_ws, 0, ws));  // the fused combine's counters start at zero (calls leave them zero)
      }
      for (int i = 0; i < 3; ++i) {
        set_inputs(i % sets);
        CK(glm5rt::kernels::sparse_mla_forward(p, d_ws, ws, stream));
      }
      CK(cudaStreamSynchronize(stream));
      std::vector<double> ev;
      const int ereps = decode ? reps : std::max(3, reps / 3);
      for (int i = 0; i < ereps; ++i) {
        set_inputs(i % sets);
        ev.push_back(timed_call_us(ws));
      }
      if (event_us) *event_us = median(ev);
      if (clocks) mhz_event = probe_mhz();
      // Graph of K calls cycling over the index sets.
      const int K = decode ? std::max(sets, 32 / sets * sets) : 2;
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < K; ++i) {
        set_inputs(i % sets);
        cudaError_t err = glm5rt::kernels::sparse_mla_forward(p, d_ws, ws, stream);
        if (err != cudaSuccess) {
          // Keep the run alive (one device call): report the event-timed median instead of the graph.
          std::fprintf(stderr, "launch during capture: %s; reporting the event median\n", cudaGetErrorString(err));
          cudaGraph_t g2 = nullptr;
          (void)cudaStreamEndCapture(stream, &g2);
          if (g2) (void)cudaGraphDestroy(g2);
          (void)cudaGetLastError();
          set_inputs(0);
          return median(ev);
        }
      }
      CK(cudaStreamEndCapture(stream, &graph));
      CK(cudaGraphInstantiate(&exec, graph, 0));
      CK(cudaGraphLaunch(exec, stream));
      CK(cudaStreamSynchronize(stream));
      // Prefill: 15 replays, not 5 (session 23: one binary's median of five moved by 2-3% from run to run at 4096 x 64,
      // more than the differences being measured; a replay there is two ~4 ms calls).
      std::vector<double> gt;
      const int greps = decode ? 5 : 15;
      for (int i = 0; i < greps; ++i) {
        CK(cudaEventRecord(e0, stream));
        CK(cudaGraphLaunch(exec, stream));
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        gt.push_back(ms * 1e3 / K);
      }
      if (clocks) mhz_graph = probe_mhz();
      CK(cudaGraphExecDestroy(exec));
      CK(cudaGraphDestroy(graph));
      set_inputs(0);
      return median(gt);
    };

    double ev_us = 0;
    const double g_us = time_config(0, &ev_us, true);
    if (graph_diag && !decode) {
      // Each call's time inside a graph of K automatic calls (events recorded as external event nodes between them),
      // with the automatic configuration's workspace that time_config(0, ...) left at d_ws.
      p.num_splits = 0;
      const size_t ws = glm5rt::kernels::sparse_mla_workspace_size(p);
      // Single stream-launched calls before, between and after the graphs (is it the graph, or the time?).
      auto singles = [&](const char* when) {
        for (int r = 0; r < 5; ++r) {
          const double us = timed_call_us(ws);
          std::printf("graphdiag %s T=%d H=%d single %s %d: %.1f us, SM clock after it %.0f MHz\n",
                      c.fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8", c.T, c.H, when, r, us, probe_mhz());
        }
      };
      std::printf("graphdiag clock before the singles: %.0f MHz\n", probe_mhz());
      singles("first");
      for (int K : {1, 2}) {
        std::vector<cudaEvent_t> evs(K + 1);
        for (auto& e : evs) CK(cudaEventCreate(&e));
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < K; ++i) {
          CK(cudaEventRecordWithFlags(evs[i], stream, cudaEventRecordExternal));
          CK(glm5rt::kernels::sparse_mla_forward(p, d_ws, ws, stream));
        }
        CK(cudaEventRecordWithFlags(evs[K], stream, cudaEventRecordExternal));
        CK(cudaStreamEndCapture(stream, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        for (int r = 0; r < 10; ++r) {
          CK(cudaGraphLaunch(exec, stream));
          CK(cudaStreamSynchronize(stream));
          if (r == 0) continue;  // warm-up
          std::printf("graphdiag %s T=%d H=%d K=%d replay %d:", c.fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8", c.T, c.H,
                      K, r);
          for (int i = 0; i < K; ++i) {
            float ms;
            CK(cudaEventElapsedTime(&ms, evs[i], evs[i + 1]));
            std::printf(" call%d %.1f us", i, ms * 1e3);
          }
          std::printf("\n");
        }
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(graph));
        for (auto& e : evs) CK(cudaEventDestroy(e));
        singles(K == 1 ? "between" : "last");
      }
    }
    p.num_splits = 0;
    const int auto_splits = glm5rt::kernels::sparse_mla_num_splits(p);
    const int auto_hc = glm5rt::kernels::sparse_mla_heads_per_cta(p);
    // Session 8: the gather ceiling of this shape's records (memory-relevant decode shapes only; at small T a
    // gather of a few thousand records measures latency, not a rate).
    double gather_us = 0, gather_tbps = 0;
    if (decode && c.T >= 32 && !plan_sweep && !combine_compare) {
      const int rec = c.fmt == MlaCacheFormat::kBf16 ? 1152 : 656;
      const int64_t n = static_cast<int64_t>(c.T) * topk;
      gather_us = glm5rt_bench::time_gather_us(p.cache, rec, d_idx, n, prop.multiProcessorCount, stream);
      if (gather_us > 0) gather_tbps = static_cast<double>(n) * rec / (gather_us * 1e-6) / 1e12;
    }
    // Sanity: outputs finite.
    {
      std::vector<uint16_t> ob(static_cast<size_t>(c.T) * c.H * 512);
      CK(cudaMemcpy(ob.data(), d_out, ob.size() * 2, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (uint16_t u : ob) bad += (u & 0x7f80) == 0x7f80;
      if (bad) std::printf("WARNING: %zu non-finite outputs in %s T=%d H=%d\n", bad, c.phase, c.T, c.H);
    }
    // Split sweep of the new kernel (variant 5), whose plan uses round 2's cost model.
    if (decode && (c.T == 1 || c.T == 32 || c.T == 128) && !quick && sweep && !combine_compare && !plan_sweep) {
      p.kernel_variant = 5;
      for (int s : sweep_splits) {
        if (s > (topk + 31) / 32) continue;
        double e;
        sweeps.push_back({c.T, c.H, c.fmt, s, 0, time_config(s, &e), 5});
      }
      p.kernel_variant = 0;
    }
    // Every kernel on the same shape and inputs (automatic splits each), for the before / after comparison.
    double v1_us = 0, v2_us = 0, v3_us = 0, v5_us = 0, v6_us = 0, v7_us = 0, v10_us = 0, v11_us = 0, v14_us = 0;
    int v5_splits = 0, v7_splits = 0;
    double comb_us[4] = {0, 0, 0, 0};  // [combine]: 1 old kernel, 2 chunked, 3 fused (0 unused)
    p.num_splits = 0;
    const int auto_combine = glm5rt::kernels::sparse_mla_combine_kind(p);
    int old_hc = 0, old_splits = 0, best_hc = 0, best_splits = 0, best_combine = 0;
    double old_us = 0, best_us = 0;
    if (plan_sweep) {
      double e;
      p.planner = 1;  // round 4's planner, same inputs
      old_hc = glm5rt::kernels::sparse_mla_heads_per_cta(p);
      old_splits = glm5rt::kernels::sparse_mla_num_splits(p);
      old_us = time_config(0, &e);
      p.planner = 0;
      best_hc = auto_hc;
      best_splits = auto_splits;
      best_us = std::min(g_us, old_us);
      if (old_us < g_us) best_hc = old_hc, best_splits = old_splits;
      if (c.T <= glm5rt::kernels::kMlaJointPlanMaxTokens) {
        // Session 13: also 64 heads per CTA (variant 14, sm_90+; automatic at some T <= 8 shapes since then).
        for (int hc : {8, 16, 32, 64}) {
          if (hc > c.H || c.H % hc != 0) continue;
          if (hc == 64 && prop.major < 9) continue;
          p.heads_per_cta = hc;
          for (int sp : {1, 2, 4, 8, 16, 32, 64}) {
            if (c.T == 1 && sp < 8) continue;  // far from the best at one token (round 3's sweep: >= 2x)
            if (c.T <= 4 && sp < 4) continue;  // likewise at 2-4 tokens (round 5's T = 8 sweep: 1-2 splits >= 2x)
            p.num_splits = sp;
            if (glm5rt::kernels::sparse_mla_num_splits(p) != sp) continue;  // clamped: timed already
            // Session 4: each plan with the automatic merge, the fp32 chunked one (2) and the bf16 chunked one
            // (5), each once (a merge the plan resolves to one already timed is skipped).
            int kinds_seen[8] = {0};
            for (int cb : {0, 2, 5}) {
              p.combine = cb;
              const int kind = glm5rt::kernels::sparse_mla_combine_kind(p);
              if (kinds_seen[kind]) continue;
              kinds_seen[kind] = 1;
              const double us = time_config(sp, &e);
              sweeps.push_back({c.T, c.H, c.fmt, sp, hc, us, 0, kind});
              if (us < best_us) best_us = us, best_hc = hc, best_splits = sp, best_combine = kind;
            }
            p.combine = 0;
          }
        }
        p.heads_per_cta = 0;
        p.num_splits = 0;
      }
      std::printf("plan    %-4s T=%5d H=%3d  auto: %2d heads/CTA x %2d splits merge %d %7.2f us | round 4: %2d x %2d %7.2f us"
                  " | best swept: %2d x %2d merge %d %7.2f us | r4 / auto %.3f, best / auto %.3f\n",
                  c.fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8", c.T, c.H, auto_hc, auto_splits, auto_combine, g_us,
                  old_hc, old_splits, old_us, best_hc, best_splits, best_combine, best_us,
                  old_us / g_us, best_us / g_us);
    } else if (combine_compare) {
      // Old first, then the new ones, then old again: the two old timings bracket drift (reported: the mean).
      double e, old2;
      p.combine = 1;
      comb_us[1] = time_config(0, &e);
      p.combine = 2;
      comb_us[2] = time_config(0, &e);
      p.combine = 3;
      comb_us[3] = time_config(0, &e);
      p.combine = 1;
      old2 = time_config(0, &e);
      comb_us[1] = 0.5 * (comb_us[1] + old2);
      p.combine = 0;
      // T = 1: does the cheaper merge move the best split count (the planner's model predates it)?
      if (c.T == 1)
        for (int sp : {16, 32, 64}) sweeps.push_back({c.T, c.H, c.fmt, sp, 0, time_config(sp, &e), 0});
      p.num_splits = 0;
    } else {
      double e;
      auto want = [&](int v) { return std::find(var_list.begin(), var_list.end(), v) != var_list.end(); };
      if (want(1)) {
        p.kernel_variant = 1;
        v1_us = time_config(0, &e);
      }
      if (want(2)) {
        p.kernel_variant = 2;
        v2_us = time_config(0, &e);
      }
      if (c.H >= 32 && want(3)) {
        p.kernel_variant = 3;
        v3_us = time_config(0, &e);
      }
      if (want(5)) {
        p.kernel_variant = 5;
        v5_us = time_config(0, &e);
        p.num_splits = 0;
        v5_splits = glm5rt::kernels::sparse_mla_num_splits(p);
      }
      if (c.fmt == MlaCacheFormat::kBf16 && want(10)) {
        p.kernel_variant = 10;
        v10_us = time_config(0, &e);
      }
      if (c.fmt == MlaCacheFormat::kBf16 && c.H >= 32 && want(11)) {
        p.kernel_variant = 11;
        v11_us = time_config(0, &e);
      }
      if (c.H % 64 == 0 && want(14)) {
        p.kernel_variant = 14;
        v14_us = time_config(0, &e);
      }
      if (c.fmt == MlaCacheFormat::kFp8 && want(7)) {
        p.kernel_variant = 7;
        v7_us = time_config(0, &e);
        p.num_splits = 0;
        v7_splits = glm5rt::kernels::sparse_mla_num_splits(p);
        if (c.T >= 32)
          for (int sp : v7_splits_list) {
            sweeps.push_back({c.T, c.H, c.fmt, sp, 0, time_config(sp, &e), 7});
            std::printf("        v7 T=%d H=%d forced %d splits: %.2f us\n", c.T, c.H, sp, sweeps.back().us);
          }
        p.num_splits = 0;
      }
      if (c.T > glm5rt::kernels::kMlaJointPlanMaxTokens)
        for (int v : force_variants)
          for (int sp : force_splits_list) {
            p.kernel_variant = v;
            sweeps.push_back({c.T, c.H, c.fmt, sp, 0, time_config(sp, &e), v});
            std::printf("        v%d T=%d H=%d %s forced %d splits: %.2f us\n", v, c.T, c.H,
                        c.fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8", sp, sweeps.back().us);
          }
      p.num_splits = 0;
      p.kernel_variant = 0;
    }
    const double rec_bytes = decode ? gathered : std::min(gathered, static_cast<double>(pool) * rec);
    const double bytes = rec_bytes + c.T * c.H * (576.0 * 2 + 512 * 2 + 4) + c.T * topk * 4.0;
    const double flops = 2.0 * c.T * c.H * topk * (576.0 + 512.0);
    const double t_us = g_us;
    results.push_back({c, auto_splits, sets, g_us, ev_us, flops / (t_us * 1e-6) / 1e12, bytes / (t_us * 1e-6) / 1e12,
                       bytes, flops, v1_us, v2_us, v3_us, v5_us, v5_splits, v6_us, v7_us, v7_splits, v10_us, v11_us, v14_us, auto_combine, comb_us[1], comb_us[2],
                       comb_us[3], auto_hc, old_hc, old_splits, old_us, best_hc, best_splits, best_us, gather_us,
                       gather_tbps, mhz_event, mhz_graph});
    if (plan_sweep) {
    } else if (combine_compare)
      std::printf("%-7s %-4s T=%5d H=%3d splits=%2d  auto (combine %d) %8.2f us | old combine %8.2f  chunked %8.2f"
                  "  fused %8.2f us | old / auto %.3f\n",
                  c.phase, c.fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8", c.T, c.H, auto_splits, auto_combine, g_us,
                  comb_us[1], comb_us[2], comb_us[3], comb_us[1] / g_us);
    else
    std::printf("%-7s %-4s T=%5d H=%3d splits=%2d sets=%2d  auto %9.2f us  event %9.2f us  %7.1f TFLOP/s  %5.2f TB/s"
                "  clock %4.0f / %4.0f MHz  v1 %9.2f  v2 %9.2f  v3 %9.2f  v5 %9.2f us (%d splits)  v7 %9.2f us (%d splits)  v10 %9.2f  v11 %9.2f  v14 %9.2f us\n",
                c.phase, c.fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8", c.T, c.H, auto_splits, sets, g_us, ev_us,
                results.back().tflops, results.back().tbps, mhz_event, mhz_graph, v1_us, v2_us, v3_us, v5_us, v5_splits, v7_us, v7_splits, v10_us, v11_us, v14_us);
    if (gather_us > 0)
      std::printf("gather  %-4s T=%5d H=%3d  the same %lld records alone: %8.2f us = %.2f TB/s (auto at %.2f of it)\n",
                  c.fmt == MlaCacheFormat::kBf16 ? "bf16" : "fp8", c.T, c.H, static_cast<long long>(c.T) * topk,
                  gather_us, gather_tbps, gather_us / g_us);
    std::fflush(stdout);
    write_json();
    CK(cudaFree(d_idx));
    CK(cudaFree(d_q));
    CK(cudaFree(d_out));
    CK(cudaFree(d_lse));
    if (d_ws) CK(cudaFree(d_ws));
  }

  if (!write_json()) return 1;
  std::printf("split sweep (graph us per call):\n");
  for (const Sweep& s : sweeps)
    std::printf("  T=%d H=%d %s splits=%d heads/cta=%d variant=%d combine=%d: %.2f us\n", s.T, s.H,
                s.f == MlaCacheFormat::kBf16 ? "bf16" : "fp8", s.splits, s.heads_per_cta, s.variant, s.combine, s.us);
  std::printf("wrote %s\n", json_path.c_str());
  CK(cudaFree(cache_bf16));
  CK(cudaFree(cache_fp8));
  CK(cudaFree(d_mhz));
  return 0;
}
