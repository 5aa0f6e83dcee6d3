// What each of the SM's copy paths reaches for sparse MLA's gather (session 27): the top-k records of 128 query
// tokens x 2048 (FP8 656-byte or bf16 1152-byte records, random slots of 64K-token pools, as sparse_mla_bench), copied
// into shared memory by copy warps that do nothing else, the way the warp-specialized kernels' producers do it:
//   bulk     one cp.async.bulk per record (lanes 0-15 of a warp, a 16-record step per ring slot, an mbarrier per slot
//            with the bytes as its transaction count): the copy engine (TMA) path of variants 5, 10, 14, 16;
//   cpasync  16-byte cp.async.cg of every record chunk by all 32 lanes, arriving by cp.async.mbarrier.arrive.noinc:
//            the load / store unit path;
//   mixed    rows 0-7 of a step by bulk copies, rows 8-15 by cp.async (both paths at once);
//   ldg      gather_ceiling.cuh's kernel (16-byte loads into registers at full occupancy): the benchmark's "gather".
// Why: variant 16 (FP8, 8 heads per CTA) took ~62 ns per record per SM at T=128 whether its records came from DRAM
// or L2; this measures the copy paths alone in the kernels' shapes (copy warps per CTA, CTAs per SM, ring slots per
// warp) from DRAM and from an L2-resident pool. Session 27 (H200): not a fixed cost per copy of the engine but per
// issuing warp (one copy every ~60-120 clocks): two copy warps per SM reach 34 ns per FP8 record, four the card's
// gather ceiling (docs/PERFORMANCE.md "Session 27").
// Output: a printed table and --json PATH (default gather_paths.json). Never run as a test.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/common/bench_cuda.cuh"
#include "bench/sparse_mla/gather_ceiling.cuh"
#include "kernels/attention/mma_primitives.cuh"

namespace {

using namespace glm5rt::kernels::mma;

constexpr int kStepRows = 16;  // records per ring slot (a kernel step)

enum Mode { kBulk = 0, kCpAsync = 1, kMixed = 2 };
const char* const kModeNames[] = {"bulk", "cpasync", "mixed"};

// Ring row stride: the record and 16 bytes (the kernels' padding: 672 for FP8, 1168 for bf16).
__host__ __device__ constexpr int row_bytes(int rec) { return rec + 16; }

// Each warp copies steps gw, gw + NW, ... (gw its index in the grid, NW the grid's warps) into its own ring of `ring`
// slots, reusing a slot once its previous fill landed. The records' 16 indices of a step: one load by lanes 0-15,
// shared by shuffles.
template <int kRec, int kMode>
__global__ void __launch_bounds__(256) gather_ring_kernel(const uint8_t* __restrict__ cache,
                                                          const int32_t* __restrict__ idx, int64_t nsteps, int ring) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kRow = row_bytes(kRec);
  constexpr int kChunks = kRec / 16;
  constexpr int kFirstCp = kMode == kBulk ? kStepRows : kMode == kMixed ? kStepRows / 2 : 0;  // rows by cp.async
  constexpr int kCpChunks = (kStepRows - kFirstCp) * kChunks;
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  uint8_t* rows = smem + static_cast<size_t>(warp) * ring * kStepRows * kRow;
  const uint32_t bars = smem_addr(smem + static_cast<size_t>(nw) * ring * kStepRows * kRow) + warp * ring * 8;
  if (lane == 0)
    for (int s = 0; s < ring; ++s) mbar_init(bars + s * 8, 32);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  __syncwarp();
  const int64_t nwarps = static_cast<int64_t>(gridDim.x) * nw;
  int k = 0;
  for (int64_t step = blockIdx.x * static_cast<int64_t>(nw) + warp; step < nsteps; step += nwarps, ++k) {
    const int slot = k % ring;
    const uint32_t bar = bars + slot * 8;
    if (k >= ring) mbar_wait_parity(bar, ((k / ring) - 1) & 1);
    const int my_idx = lane < kStepRows ? __ldg(idx + step * kStepRows + lane) : 0;
    uint8_t* dst = rows + slot * kStepRows * kRow;
    if constexpr (kMode != kCpAsync) {
      if (lane == 0) mbar_expect_tx(bar, kFirstCp * kRec);
      __syncwarp();
      if (lane < kFirstCp)
        bulk_copy_g2s(smem_addr(dst + lane * kRow), cache + static_cast<int64_t>(my_idx) * kRec, kRec, bar);
    }
    if constexpr (kCpChunks > 0) {
#pragma unroll
      for (int i = 0; i < (kCpChunks + 31) / 32; ++i) {
        const int c = lane + 32 * i;
        const int r = kFirstCp + (c < kCpChunks ? c / kChunks : 0), col = c < kCpChunks ? c % kChunks : 0;
        const int rid = __shfl_sync(0xffffffffu, my_idx, r);
        if (c < kCpChunks)
          cp_async_16_nohint(smem_addr(dst + r * kRow + col * 16), cache + static_cast<int64_t>(rid) * kRec + col * 16,
                             16);
      }
      cp_async_mbar_arrive_noinc(bar);
    } else {
      mbar_arrive(bar);
    }
  }
  // Every outstanding fill landed before the CTA exits.
  for (int j = k > ring ? k - ring : 0; j < k; ++j) mbar_wait_parity(bars + (j % ring) * 8, (j / ring) & 1);
#endif
}

struct Config {
  int ctas_per_sm, warps, ring;
};

template <int kRec, int kMode>
double time_ring(const uint8_t* cache, const int32_t* const* sets, int nsets, int64_t nrec, const Config& cfg, int sms,
                 cudaStream_t s) {
  auto kernel = gather_ring_kernel<kRec, kMode>;
  const size_t smem = static_cast<size_t>(cfg.warps) * cfg.ring * (kStepRows * row_bytes(kRec) + 8);
  if (smem > 227 * 1024 || cfg.ctas_per_sm * (smem + 1024) > 228 * 1024) return 0.0;  // does not fit the SM
  BENCH_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(sms * cfg.ctas_per_sm)), block(static_cast<unsigned>(32 * cfg.warps));
  const int64_t nsteps = nrec / kStepRows;
  return glm5rt_bench::time_graph_us(
      s, 8, [&](int i) { kernel<<<grid, block, smem, s>>>(cache, sets[i % nsets], nsteps, cfg.ring); }, 1, 5);
}

// The ring timings by record size (656, 1152) and mode.
using RingTimer = double (*)(const uint8_t*, const int32_t* const*, int, int64_t, const Config&, int, cudaStream_t);
constexpr RingTimer kRingTimers[2][3] = {
    {time_ring<656, kBulk>, time_ring<656, kCpAsync>, time_ring<656, kMixed>},
    {time_ring<1152, kBulk>, time_ring<1152, kCpAsync>, time_ring<1152, kMixed>}};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "gather_paths.json", commit = "unknown", command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  std::vector<int> recs = {656, 1152};
  std::vector<Config> configs = {{2, 1, 7}, {2, 2, 3}, {2, 4, 2}, {1, 1, 7}, {4, 1, 3}, {1, 4, 3}};
  int T = 128, topk = 2048, pool = 65536;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else if (!std::strcmp(argv[i], "--records") && i + 1 < argc) recs = glm5rt_bench::parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--T") && i + 1 < argc) T = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--configs") && i + 1 < argc) {  // "2x1x7,2x2x3": CTAs per SM x warps x ring
      configs.clear();
      for (const char* p = argv[++i]; *p;) {
        Config c{};
        int used = 0;
        if (std::sscanf(p, "%dx%dx%d%n", &c.ctas_per_sm, &c.warps, &c.ring, &used) != 3) break;
        configs.push_back(c);
        p += used;
        if (*p == ',') ++p;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--commit SHA] [--records 656,1152] [--T 128] [--configs 2x1x7,2x4x2]\n", argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  BENCH_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 9) {
    std::printf("gather_paths: needs sm_90+ (bulk copies); this device is sm_%d%d\n", prop.major, prop.minor);
    return 0;
  }
  const int sms = prop.multiProcessorCount;
  cudaStream_t s;
  BENCH_CHECK_CUDA(cudaStreamCreate(&s));

  // Index sets: "dram" = two sets of T rows, each row a different 64K-token sequence's pool (344 MB of FP8 records per
  // pair, past the 60 MB L2), alternating launch by launch; "l2" = T rows over one 4096-token pool (2.7 MB of FP8).
  const int max_seqs = 2 * T;
  const int64_t nrec = static_cast<int64_t>(T) * topk;
  std::mt19937_64 rng(1234);
  auto draw = [&](int seq0, int seqs, int pool_tokens) {
    std::vector<int32_t> perm(pool_tokens), idx(static_cast<size_t>(nrec));
    std::iota(perm.begin(), perm.end(), 0);
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < topk; ++j) {
        const size_t k = j + rng() % static_cast<uint64_t>(pool_tokens - j);
        std::swap(perm[j], perm[k]);
        idx[static_cast<size_t>(t) * topk + j] = static_cast<int32_t>(static_cast<int64_t>(seq0 + t % seqs) * pool_tokens + perm[j]);
      }
    int32_t* d;
    BENCH_CHECK_CUDA(cudaMalloc(&d, idx.size() * 4));
    BENCH_CHECK_CUDA(cudaMemcpy(d, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
    return d;
  };
  int32_t* dram_sets[2] = {draw(0, T, pool), draw(T, T, pool)};
  int32_t* l2_sets[1] = {draw(0, 1, 4096)};

  std::string json = "{\n  \"benchmark\": \"gather_paths\",\n  \"command\": \"" + glm5rt_bench::json_escape(command) +
                     "\",\n  \"date\": \"" + glm5rt_bench::utc_now_iso() + "\",\n  \"git_commit\": \"" + commit +
                     "\",\n  \"device\": \"" + std::string(prop.name) + "\",\n  \"sm_count\": " + std::to_string(sms) +
                     ",\n  \"records_per_launch\": " + std::to_string(nrec) + ",\n  \"rows\": [\n";
  std::printf("%-7s %-5s %-4s %-9s %10s %8s %14s\n", "mode", "rec", "pool", "cta/w/rng", "us", "TB/s", "ns/record/SM");
  bool first = true;
  auto row = [&](const char* mode, int rec, const char* where, const Config& c, double us) {
    if (us <= 0) return;
    const double tbps = static_cast<double>(nrec) * rec / (us * 1e-6) / 1e12;
    const double ns = us * 1e3 / (static_cast<double>(nrec) / sms);
    std::printf("%-7s %-5d %-4s %dx%dx%-5d %10.2f %8.2f %14.2f\n", mode, rec, where, c.ctas_per_sm, c.warps, c.ring, us,
                tbps, ns);
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s    {\"mode\": \"%s\", \"record_bytes\": %d, \"pool\": \"%s\", \"ctas_per_sm\": %d, \"warps\": %d, "
                  "\"ring\": %d, \"us\": %.3f, \"tbps\": %.4f, \"ns_per_record_per_sm\": %.3f}",
                  first ? "" : ",\n", mode, rec, where, c.ctas_per_sm, c.warps, c.ring, us, tbps, ns);
    json += buf;
    first = false;
  };
  for (int rec : recs) {
    if (rec != 656 && rec != 1152) continue;
    uint8_t* cache;
    const size_t slots = static_cast<size_t>(max_seqs) * pool;
    BENCH_CHECK_CUDA(cudaMalloc(&cache, slots * rec));
    BENCH_CHECK_CUDA(cudaMemset(cache, 0x11, slots * rec));
    for (int where = 0; where < 2; ++where) {
      int32_t* const* sets = where == 0 ? dram_sets : l2_sets;
      const int nsets = where == 0 ? 2 : 1;
      const char* wname = where == 0 ? "dram" : "l2";
      // ldg: the benchmark's gather ceiling (its own grid, set 0 only).
      row("ldg", rec, wname, Config{8, 8, 0},
          glm5rt_bench::time_gather_us(cache, rec, sets[0], nrec, sms, s));
      for (const Config& c : configs)
        for (int mode = 0; mode < 3; ++mode)
          row(kModeNames[mode], rec, wname, c, kRingTimers[rec == 1152][mode](cache, sets, nsets, nrec, c, sms, s));
    }
    BENCH_CHECK_CUDA(cudaFree(cache));
  }
  json += "\n  ]\n}\n";
  for (auto* d : dram_sets) BENCH_CHECK_CUDA(cudaFree(d));
  BENCH_CHECK_CUDA(cudaFree(l2_sets[0]));
  return glm5rt_bench::write_text(json_path, json) ? 0 : 1;
}
