// The dense FP8 projections of one GLM-5 attention layer at decode sizes (M = 1, 8, 32 rows), through
// kernels/gemm fp8_gemm, in CUDA graphs, beside the device copy bandwidth measured in the same run.
//
// Part 1, one projection at a time: every GLM-5 dense shape (q_a, kv_a_proj_with_mqa, q_b, o_proj,
// indexer wq_b / wk, kv_b for reference, dense MLP gate|up and down), random e4m3 weights with random
// 128x128 block scales. Variants: unsplit (the decode kernel's automatic choice; the register ring; the
// prefill kernel at M >= 8), and split-K over S K-slices as S groups of rows (the CUDA backend's form:
// lib/backend/cuda split_slices) for every S that divides the K blocks, weights either as the backend's
// per-slice copies ("copy") or as K slices of the original tensor read with a row stride ("strided",
// Fp8GemmParams::ldw). Each GEMM is followed, as in the backend, by the split-K sum / widening to float32
// (row "+reduce"); the GEMM alone is timed too.
//
// Part 2, one layer's projections back to back in one graph (the decode pattern: several small GEMMs in a
// row): "separate" = the backend's current sequence (per projection: quantise the input, GEMM with the
// backend's split, sum / widen: q_a, kv_a, q_b, wq_b, wk, o_proj), "separate-nosplit", and "grouped" =
// one quantisation + ONE fp8_gemm launch per input (x -> q_a | kv_a | wk as unequal parts; q_a's normed
// output -> q_b | wq_b; o_proj alone), split-K without copies, one fp8_split_reduce each; the same with
// the GEMMs streaming weights before their PDL wait (group_info_ready); a sweep of the slice counts. (The norms and RoPE between the projections are not in the graph; indexer
// weights_proj is bf16 in GLM-5-FP8 and runs through cuBLASLt, not here.)
//
// Every graph cycles through enough copies of the weights (>= 2.5 x L2) that they come from DRAM.
// Prints tables and writes JSON. Usage: glm5rt_bench_proj [--json out.json] [--commit sha] [--rows 1,8,32]
//   [--quick] [--reps N]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <map>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "bench/common/bench_cuda.cuh"
#include "kernels/common/moe_bridge.cuh"
#include "kernels/gemm/fp8_gemm.h"

namespace k = glm5rt::kernels;

#define CK(x) BENCH_CHECK_CUDA(x)

namespace {

using glm5rt_bench::fill_f32;
using glm5rt_bench::fill_fp8;
using glm5rt_bench::hash32;
using glm5rt_bench::parse_int_list;
using glm5rt_bench::median;
using glm5rt_bench::time_ms;

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(((hash32(seed * 0x9e3779b97f4a7c15ULL + i) >> 8) * (1.0f / 16777216.0f) - 0.5f) * 2.f);
}


// Median ms of one replay of the graph that `enqueue` captures on s.
float time_graph(const std::function<void()>& enqueue, cudaStream_t s, int reps) {
  enqueue();  // eager: makes the pointer tables, checks the launches
  CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  const float ms = time_ms([&] { CK(cudaGraphLaunch(ge, s)); }, 2, reps, s);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return ms;
}

template <typename T>
T* dev_alloc(size_t count) {
  T* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(1, count) * sizeof(T)));
  return p;
}

// A dense FP8 weight [n, k] with its float32 scale_inv [ceil(n/128), k/128].
struct Weight {
  int n = 0, k = 0;
  uint8_t* w = nullptr;
  float* s = nullptr;
  size_t bytes() const { return static_cast<size_t>(n) * k + scale_count() * 4; }
  size_t scale_count() const { return static_cast<size_t>((n + 127) / 128) * (k / 128); }
};
Weight make_weight(int n, int kk, uint64_t seed) {
  Weight w;
  w.n = n;
  w.k = kk;
  w.w = dev_alloc<uint8_t>(static_cast<size_t>(n) * kk);
  w.s = dev_alloc<float>(w.scale_count());
  fill_fp8<<<1024, 256>>>(w.w, static_cast<size_t>(n) * kk, seed);
  fill_f32<<<64, 256>>>(w.s, w.scale_count(), seed + 1, 1e-3f, 3e-3f);
  CK(cudaGetLastError());
  return w;
}
void free_weight(Weight& w) {
  CK(cudaFree(w.w));
  CK(cudaFree(w.s));
  w = Weight{};
}

// The backend's slice count (CudaBackend::split_slices): the largest divisor S of the K blocks with >= 2
// blocks per slice and at most ~4 decode blocks (64 rows x one slice) per SM.
int backend_slices(int n, int kk, int sms) {
  const long long blocks = (n + 63) / 64, kb = kk / 128;
  const long long target = (4LL * sms + blocks - 1) / blocks;
  int best = 1;
  for (long long d = 2; d <= target && kb / d >= 2; ++d)
    if (kb % d == 0) best = static_cast<int>(d);
  return best;
}

// Pointer tables on the device, one per distinct pointer list, kept until the end (captured graphs read
// them). Made on first use, which time_graph's eager run does before the capture (no cudaMemcpy while
// capturing).
std::map<std::vector<const void*>, void*> g_tables;
template <typename T>
const T* const* upload_table(const std::vector<const T*>& h) {
  const std::vector<const void*> key(h.begin(), h.end());
  auto it = g_tables.find(key);
  if (it == g_tables.end()) {
    void* d = dev_alloc<char>(h.size() * sizeof(void*));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(void*), cudaMemcpyHostToDevice));
    it = g_tables.emplace(key, d).first;
  }
  return static_cast<const T* const*>(it->second);
}

// fp8_gemm's grouping of M rows x S slices (the backend's ensure_split_plans): offsets, active groups,
// count, tile prefix, row map (partial row s * M + t reads activation row t * S + s, i.e. the slice s of
// token t when the [M, K] activations are read as [M * S, K / S]).
struct Plan {
  int* mem = nullptr;
  const int *offsets, *active, *num_active, *tile_prefix, *row_map;
};
Plan make_plan(int M, int S) {
  const int tiles = (M + k::kFp8PrefillTileRows - 1) / k::kFp8PrefillTileRows;
  std::vector<int> h;
  for (int s = 0; s <= S; ++s) h.push_back(s * M);
  for (int s = 0; s < S; ++s) h.push_back(s);
  h.push_back(S);
  for (int s = 0; s <= S; ++s) h.push_back(s * tiles);
  for (int s = 0; s < S; ++s)
    for (int t = 0; t < M; ++t) h.push_back(t * S + s);
  Plan p;
  p.mem = dev_alloc<int>(h.size());
  CK(cudaMemcpy(p.mem, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  p.offsets = p.mem;
  p.active = p.mem + S + 1;
  p.num_active = p.mem + 2 * S + 1;
  p.tile_prefix = p.mem + 2 * S + 2;
  p.row_map = p.mem + 3 * S + 3;
  return p;
}

// One projection GEMM as the benchmark runs it.
enum class Layout { unsplit, copy, strided };
struct GemmCfg {
  Layout layout = Layout::unsplit;
  int slices = 1;
  int decode_kernel = 0;  // Fp8GemmParams::decode_kernel
  bool prefill = false;   // unsplit only: the prefill kernel (64-row tiles)
};

// Buffers shared by all runs: activations, partials, float32 outputs.
struct Buffers {
  uint8_t* aq;
  float* as;
  __nv_bfloat16* ab;    // bf16 activations to quantise [32, 16384]
  __nv_bfloat16* part;  // partials [max slices * rows, n]
  float* out;           // float32 results, several parts
};

// The GEMM (+ optionally the backend's sum / widening) of weight w for M rows under cfg.
void enqueue_gemm(const Weight& w, int M, const GemmCfg& cfg, const Buffers& b, cudaStream_t s, bool reduce,
                  const std::vector<Plan>& plans) {
  k::Fp8GemmParams g;
  g.n = w.n;
  g.a = b.aq;
  g.a_scale = b.as;
  g.ldc = w.n;
  g.pdl = true;
  const int S = cfg.layout == Layout::unsplit ? 1 : cfg.slices;
  const int kk = w.k, ks = kk / S, kbs = ks / 128, nb = (w.n + 127) / 128;
  if (S == 1 && cfg.layout == Layout::unsplit) {
    g.k = kk;
    g.lda = kk;
    g.ld_scale = kk / 128;
    g.w = upload_table<uint8_t>({w.w});
    g.w_scale = upload_table<float>({w.s});
    g.c = b.part;
    g.max_rows = M;
    g.decode_kernel = cfg.decode_kernel;
    g.path = cfg.prefill ? k::Fp8GemmPath::prefill : k::Fp8GemmPath::decode;
  } else {
    std::vector<const uint8_t*> tw;
    std::vector<const float*> ts;
    for (int sl = 0; sl < S; ++sl) {
      if (cfg.layout == Layout::copy) {  // [S][n][ks] slices, scales [S][nb][kbs]
        tw.push_back(w.w + static_cast<size_t>(sl) * w.n * ks);
        ts.push_back(w.s + static_cast<size_t>(sl) * nb * kbs);
      } else {  // K slices of [n][k]
        tw.push_back(w.w + static_cast<size_t>(sl) * ks);
        ts.push_back(w.s + static_cast<size_t>(sl) * kbs);
      }
    }
    if (cfg.layout == Layout::strided) {
      g.ldw = kk;
      g.ld_wscale = kk / 128;
    }
    const Plan& pl = plans.at(S);
    g.k = ks;
    g.lda = ks;
    g.ld_scale = kbs;
    g.a_row_map = pl.row_map;
    g.w = upload_table(tw);
    g.w_scale = upload_table(ts);
    g.c = b.part;
    g.num_groups = S;
    g.max_rows = S * M;
    g.group_offsets = pl.offsets;
    g.active_groups = pl.active;
    g.num_active = pl.num_active;
    g.tile_prefix = pl.tile_prefix;
    g.max_active = S;
    g.expected_rows_per_group = M;
    g.decode_kernel = cfg.decode_kernel;
    g.path = k::Fp8GemmPath::decode;
  }
  CK(k::fp8_gemm(g, s));
  if (!reduce) return;
  if (S == 1) CK(glm5k::launch_bf16_to_f32(b.part, static_cast<int64_t>(M) * w.n, b.out, s));
  else CK(glm5k::launch_sum_slices_bf16_to_f32(b.part, S, static_cast<int64_t>(M) * w.n, b.out, s));
}

// One grouped launch: parts (weights with the same k) read the same activations; S K-slices without
// copies; then one fp8_split_reduce into each part's float32 output.
void enqueue_grouped(const std::vector<const Weight*>& parts, int M, int S, const Buffers& b, cudaStream_t s,
                     const std::vector<Plan>& plans, bool early = false) {
  const int kk = parts[0]->k, ks = kk / S, kbs = ks / 128, P = static_cast<int>(parts.size());
  k::Fp8GemmParams g;
  k::Fp8SplitReduceParams r;
  int n = 0;
  g.varied_parts = true;
  g.num_parts = P;
  r.num_parts = P;
  std::vector<const uint8_t*> tw;
  std::vector<const float*> ts;
  for (int sl = 0; sl < S; ++sl)
    for (int p = 0; p < P; ++p) {
      tw.push_back(parts[p]->w + static_cast<size_t>(sl) * ks);
      ts.push_back(parts[p]->s + static_cast<size_t>(sl) * kbs);
    }
  size_t out_at = 0;
  for (int p = 0; p < P; ++p) {
    g.part_begin[p] = n;
    r.part_begin[p] = n;
    r.out[p] = b.out + out_at;
    out_at += static_cast<size_t>(M) * parts[p]->n;
    out_at = (out_at + 63) / 64 * 64;
    n += parts[p]->n;
  }
  g.part_begin[P] = n;
  r.part_begin[P] = n;
  g.n = n;
  g.k = ks;
  g.a = b.aq;
  g.a_scale = b.as;
  g.lda = ks;
  g.ld_scale = kbs;
  g.ldw = kk;
  g.ld_wscale = kk / 128;
  g.w = upload_table(tw);
  g.w_scale = upload_table(ts);
  g.c = b.part;
  g.ldc = n;
  g.pdl = true;
  g.path = k::Fp8GemmPath::decode;
  g.max_rows = S * M;
  g.expected_rows_per_group = M;
  g.group_info_ready = early;  // weights and plans are static: stream weights before the PDL wait
  if (S > 1) {
    const Plan& pl = plans.at(S);
    g.a_row_map = pl.row_map;
    g.num_groups = S;
    g.group_offsets = pl.offsets;
    g.active_groups = pl.active;
    g.num_active = pl.num_active;
    g.tile_prefix = pl.tile_prefix;
    g.max_active = S;
  }
  CK(k::fp8_gemm(g, s));
  r.in = b.part;
  r.ld_in = n;
  r.slices = S;
  r.rows = M;
  r.n = n;
  r.pdl = true;
  CK(k::fp8_split_reduce(r, s));
}

struct ShapeRow {
  std::string shape, variant;
  int n, kk, M, slices;
  bool reduce;
  double us, gbps, frac;
};

struct LayerW {
  Weight q_a, kv_a, q_b, wq_b, wk, o;
  size_t bytes() const { return q_a.bytes() + kv_a.bytes() + q_b.bytes() + wq_b.bytes() + wk.bytes() + o.bytes(); }
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, commit = "unknown", command;
  std::vector<int> rows_list = {1, 8, 32};
  bool quick = false;
  int reps = 15;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) rows_list = parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(3, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--commit SHA] [--rows 1,8,32] [--reps N] [--quick]\n", argv[0]);
      return 2;
    }
  }
  for (int M : rows_list)
    if (M < 1 || M > 32) {
      std::fprintf(stderr, "--rows: 1..32 (decode sizes)\n");
      return 2;
    }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major * 10 + prop.minor < 89) {
    std::printf("fp8_gemm needs compute capability 8.9+\n");
    return 77;
  }
  const int sms = prop.multiProcessorCount;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf("device: %s, %d SMs, L2 %d MB, cc %d.%d\n", prop.name, sms, prop.l2CacheSize >> 20, prop.major,
              prop.minor);

  // ---- ceiling: device-to-device copy, bytes read + written ----
  double copy_gbps = 0;
  {
    const size_t copy_bytes = size_t(1) << 30;
    void *c0 = dev_alloc<char>(copy_bytes), *c1 = dev_alloc<char>(copy_bytes);
    CK(cudaMemsetAsync(c0, 1, copy_bytes, s));
    const float ms = time_ms([&] { CK(cudaMemcpyAsync(c1, c0, copy_bytes, cudaMemcpyDeviceToDevice, s)); }, 3, 20, s);
    copy_gbps = 2.0 * copy_bytes / (ms * 1e-3) / 1e9;
    CK(cudaFree(c0));
    CK(cudaFree(c1));
  }
  std::printf("copy bandwidth: %.0f GB/s (read + write)\n", copy_gbps);

  const size_t l2 = static_cast<size_t>(prop.l2CacheSize);
  Buffers b;
  b.aq = dev_alloc<uint8_t>(32 * 16384);
  b.as = dev_alloc<float>(32 * 128);
  b.ab = dev_alloc<__nv_bfloat16>(32 * 16384);
  b.part = dev_alloc<__nv_bfloat16>(static_cast<size_t>(32) * 48 * 28672);
  b.out = dev_alloc<float>(static_cast<size_t>(32) * 40000 + 4096);
  fill_fp8<<<256, 256>>>(b.aq, 32 * 16384, 7);
  fill_f32<<<16, 256>>>(b.as, 32 * 128, 8, 1e-2f, 2e-2f);
  fill_bf16<<<256, 256>>>(b.ab, 32 * 16384, 9);
  CK(cudaGetLastError());
  std::vector<Plan> plans(49 * 33);  // plans[M * 49 + S]
  auto plans_for = [&](int M) {
    std::vector<Plan> v(49);
    for (int S = 2; S <= 48; ++S) v[S] = plans[M * 49 + S].mem ? plans[M * 49 + S] : (plans[M * 49 + S] = make_plan(M, S));
    return v;
  };

  // ---- part 1: one projection at a time ----
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {{"q_a", 2048, 6144},         {"kv_a_proj_with_mqa", 576, 6144}, {"indexer_wk", 128, 6144},
                          {"q_b", 16384, 2048},        {"indexer_wq_b", 4096, 2048},      {"o_proj", 6144, 16384},
                          {"kv_b (reference)", 28672, 512}, {"dense_gate_up", 24576, 6144}, {"dense_down", 6144, 12288}};
  std::vector<ShapeRow> rows;
  std::printf("\n%-20s %3s %-26s %3s %9s %9s %7s %9s %9s %7s\n", "shape", "M", "variant", "S", "gemm us", "GB/s",
              "/copy", "+red us", "GB/s", "/copy");
  for (const Shape& sh : shapes) {
    const size_t one = static_cast<size_t>(sh.n) * sh.k;
    const int copies = static_cast<int>(std::min<size_t>(256, std::max<size_t>(2, (l2 * 5 / 2 + one - 1) / one)));
    std::vector<Weight> ws;
    for (int c = 0; c < copies; ++c) ws.push_back(make_weight(sh.n, sh.k, 1000 + c));
    CK(cudaDeviceSynchronize());
    const int kb = sh.k / 128, auto_s = backend_slices(sh.n, sh.k, sms);
    for (int M : rows_list) {
      const std::vector<Plan> pl = plans_for(M);
      std::vector<std::pair<std::string, GemmCfg>> vars;
      vars.push_back({"unsplit auto-kernel", {Layout::unsplit, 1, 0, false}});
      if (M <= 4) vars.push_back({"unsplit register-ring", {Layout::unsplit, 1, 1, false}});
      if (M >= 8) vars.push_back({"unsplit prefill-kernel", {Layout::unsplit, 1, 0, true}});
      if (auto_s > 1) {
        vars.push_back({"backend split (copy)", {Layout::copy, auto_s, 0, false}});
        if (M <= 4) vars.push_back({"backend split reg-ring", {Layout::copy, auto_s, 1, false}});
      }
      for (int S = 2; S <= std::min(48, kb / 2); ++S) {
        if (kb % S != 0) continue;
        if (static_cast<long long>((sh.n + 63) / 64) * S > 6000) continue;  // far past several waves
        if (quick && S != auto_s && S != auto_s / 2 && S != auto_s * 2 && S != 2) continue;
        vars.push_back({"split strided", {Layout::strided, S, 0, false}});
      }
      for (const auto& var : vars) {
        const std::string& vname = var.first;
        const GemmCfg cfg = var.second;
        double us[2];
        for (int red = 0; red < 2; ++red) {
          const float ms = time_graph(
              [&] {
                for (int c = 0; c < copies; ++c) enqueue_gemm(ws[c], M, cfg, b, s, red == 1, pl);
              },
              s, reps);
          us[red] = ms * 1e3 / copies;
        }
        const double bytes = static_cast<double>(ws[0].bytes()) + static_cast<double>(M) * sh.k;
        const int S = cfg.layout == Layout::unsplit ? 1 : cfg.slices;
        for (int red = 0; red < 2; ++red) {
          const double gbps = bytes / (us[red] * 1e-6) / 1e9;
          rows.push_back({sh.name, vname, sh.n, sh.k, M, S, red == 1, us[red], gbps, gbps / copy_gbps});
        }
        const double g0 = bytes / (us[0] * 1e-6) / 1e9, g1 = bytes / (us[1] * 1e-6) / 1e9;
        std::printf("%-20s %3d %-26s %3d %9.2f %9.0f %7.3f %9.2f %9.0f %7.3f%s\n", sh.name, M, vname.c_str(), S, us[0],
                    g0, g0 / copy_gbps, us[1], g1, g1 / copy_gbps, S == auto_s && cfg.layout == Layout::copy ? "  <- backend" : "");
      }
    }
    for (Weight& w : ws) free_weight(w);
  }

  // ---- part 2: one layer's projections back to back ----
  const int layers = 3;  // 3 x ~160 MB >= 2.5 x L2 on the H200
  std::vector<LayerW> L(layers);
  for (int l = 0; l < layers; ++l) {
    const uint64_t sd = 5000 + 100 * l;
    L[l] = {make_weight(2048, 6144, sd), make_weight(576, 6144, sd + 1), make_weight(16384, 2048, sd + 2),
            make_weight(4096, 2048, sd + 3), make_weight(128, 6144, sd + 4), make_weight(6144, 16384, sd + 5)};
  }
  CK(cudaDeviceSynchronize());
  const double layer_bytes = static_cast<double>(L[0].bytes());
  struct LayerRow {
    int M;
    std::string variant;
    int sx, sq, so;
    double us, frac_of_copy;
  };
  std::vector<LayerRow> lrows;
  std::printf("\nOne layer's projections in one graph (q_a, kv_a, q_b, wq_b, wk, o_proj: %.1f MB; bytes floor %.1f us)\n",
              layer_bytes / 1e6, layer_bytes / (copy_gbps * 1e3));
  std::printf("%3s %-34s %4s %4s %4s %10s %8s\n", "M", "variant", "Sx", "Sq", "So", "us/layer", "/copy");
  auto quant = [&](int M, int kk) { CK(k::fp8_quantize_groups(b.ab, kk, M, kk, b.aq, kk, b.as, kk / 128, s, true)); };
  for (int M : rows_list) {
    const std::vector<Plan> pl = plans_for(M);
    auto separate = [&](bool split) {
      return [&, split] {
        for (int l = 0; l < layers; ++l)
          for (const Weight* w : {&L[l].q_a, &L[l].kv_a, &L[l].q_b, &L[l].wq_b, &L[l].wk, &L[l].o}) {
            quant(M, w->k);
            const int S = split ? backend_slices(w->n, w->k, sms) : 1;
            enqueue_gemm(*w, M, {S > 1 ? Layout::copy : Layout::unsplit, S, 0, false}, b, s, true, pl);
          }
      };
    };
    auto report = [&](const std::string& name, int sx, int sq, int so, float ms) {
      const double us = ms * 1e3 / layers, frac = layer_bytes / (us * 1e-6) / 1e9 / copy_gbps;
      lrows.push_back({M, name, sx, sq, so, us, frac});
      std::printf("%3d %-34s %4d %4d %4d %10.2f %8.3f\n", M, name.c_str(), sx, sq, so, us, frac);
    };
    report("separate (backend: split-K copies)", 0, 0, 0, time_graph(separate(true), s, reps));
    report("separate, no split", 1, 1, 1, time_graph(separate(false), s, reps));
    // The grouped form: x-group n = 2752 (44 blocks), q-group n = 20480 (320 blocks), o_proj 96 blocks.
    const int ax = backend_slices(2752, 6144, sms), aq = backend_slices(20480, 2048, sms),
              ao = backend_slices(6144, 16384, sms);
    auto grouped = [&](int sx, int sq, int so, bool early = false) {
      return [&, sx, sq, so, early] {
        for (int l = 0; l < layers; ++l) {
          quant(M, 6144);
          enqueue_grouped({&L[l].q_a, &L[l].kv_a, &L[l].wk}, M, sx, b, s, pl, early);
          quant(M, 2048);
          enqueue_grouped({&L[l].q_b, &L[l].wq_b}, M, sq, b, s, pl, early);
          quant(M, 16384);
          enqueue_grouped({&L[l].o}, M, so, b, s, pl, early);
        }
      };
    };
    report("grouped (backend rule)", ax, aq, ao, time_graph(grouped(ax, aq, ao), s, reps));
    report("grouped + early weights", ax, aq, ao, time_graph(grouped(ax, aq, ao, true), s, reps));
    std::vector<std::array<int, 3>> sweep;
    const std::vector<int> xs = quick ? std::vector<int>{6, 16, 24} : std::vector<int>{4, 6, 8, 12, 16, 24};
    const std::vector<int> qs = quick ? std::vector<int>{1, 4} : std::vector<int>{1, 2, 4, 8};
    const std::vector<int> os = quick ? std::vector<int>{2, 8} : std::vector<int>{1, 2, 4, 8, 16};
    for (int sx : xs)
      if (sx != ax) sweep.push_back({sx, aq, ao});
    for (int sq : qs)
      if (sq != aq) sweep.push_back({ax, sq, ao});
    for (int so : os)
      if (so != ao) sweep.push_back({ax, aq, so});
    for (const auto& v : sweep) report("grouped sweep", v[0], v[1], v[2], time_graph(grouped(v[0], v[1], v[2]), s, reps));
  }
  for (auto& l : L)
    for (Weight* w : {&l.q_a, &l.kv_a, &l.q_b, &l.wq_b, &l.wk, &l.o}) free_weight(*w);

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\n  \"benchmark\": \"glm5rt_bench_proj\",\n  \"command\": \"%s\",\n  \"date\": \"%s\",\n", command.c_str(),
                 date);
    std::fprintf(f, "  \"commit\": \"%s\",\n  \"device\": \"%s\",\n  \"sms\": %d,\n  \"copy_gbps\": %.1f,\n", commit.c_str(),
                 prop.name, sms, copy_gbps);
    std::fprintf(f, "  \"shapes\": [\n");
    for (size_t i = 0; i < rows.size(); ++i) {
      const ShapeRow& r = rows[i];
      std::fprintf(f,
                   "    {\"shape\": \"%s\", \"n\": %d, \"k\": %d, \"M\": %d, \"variant\": \"%s\", \"slices\": %d, "
                   "\"with_reduce\": %s, \"us\": %.3f, \"gbps\": %.1f, \"frac_of_copy\": %.4f}%s\n",
                   r.shape.c_str(), r.n, r.kk, r.M, r.variant.c_str(), r.slices, r.reduce ? "true" : "false", r.us, r.gbps,
                   r.frac, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ],\n  \"layer_bytes\": %.0f,\n  \"layer\": [\n", layer_bytes);
    for (size_t i = 0; i < lrows.size(); ++i) {
      const LayerRow& r = lrows[i];
      std::fprintf(f,
                   "    {\"M\": %d, \"variant\": \"%s\", \"slices_x\": %d, \"slices_q\": %d, \"slices_o\": %d, "
                   "\"us_per_layer\": %.3f, \"frac_of_copy\": %.4f}%s\n",
                   r.M, r.variant.c_str(), r.sx, r.sq, r.so, r.us, r.frac_of_copy, i + 1 < lrows.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
    std::printf("\nJSON: %s\n", json_path.c_str());
  }
  for (auto& [key, t] : g_tables) CK(cudaFree(t));
  return 0;
}
