// Distributed-shared-memory round trips between the two CTAs of a cluster (sm_90+), against the same exchange
// inside one CTA: what a per-step swap of partial scores across a CTA pair would cost (docs/PERFORMANCE.md, "Next
// step for prefill 300"). Built and run on the accelerator machine by scripts/gpu_dsmem_pingpong.sh (nvcc directly,
// not part of the CMake build: clusters need sm_90).
//
// Each test runs `iters` round trips and reports cycles (clock64 of the initiating warp) and ns per one-way hop:
//   cluster_word   lane 0 stores one word into the peer CTA's shared memory, arrives on the peer's mbarrier
//                  (release at cluster scope); the peer waits (acquire at cluster scope) and answers the same way.
//   cluster_1kb    every lane stores 32 bytes (1 KB per warp: one warp's partial scores of a 16 x 16 block) into
//                  the peer and arrives (mbarrier count 32); the peer waits, reads its 32 bytes back, answers.
//   cta_1kb        the same 1 KB exchange between two warps of one CTA through its own shared memory.
// Output: a table, and JSON (--json PATH) with the device, clocks and per-test figures.
#include <cuda_runtime.h>

#include "kernels/attention/mma_primitives.cuh"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

using glm5rt::kernels::mma::mbar_arrive;
using glm5rt::kernels::mma::mbar_init;
using glm5rt::kernels::mma::mbar_wait_parity;
using glm5rt::kernels::mma::smem_addr;

// The cluster-scope forms the kernels do not use (yet): an address in the peer CTA's shared memory, a store there,
// an arrival on its mbarrier (release at cluster scope) and a wait whose acquire covers the peer's stores.
__device__ __forceinline__ uint32_t map_to_rank(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_cluster_v4(uint32_t addr, uint4 v) {
  asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void arrive_remote(uint32_t cluster_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
}
__device__ __forceinline__ void wait_cluster(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, "
        "p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// mode 0: one word per hop (lane 0); mode 1: 1 KB per hop (every lane, 32 bytes).
__global__ void __cluster_dims__(2, 1, 1) pingpong_cluster(int iters, int mode, long long* cycles, uint32_t* check) {
  __shared__ __align__(16) uint4 buf[64];
  __shared__ __align__(8) uint64_t bar;
  const int lane = threadIdx.x;
  const uint32_t me = cluster_rank(), peer = me ^ 1u;
  const int arrivals = mode == 0 ? 1 : 32;
  if (lane == 0) mbar_init(smem_addr(&bar), arrivals);
  cluster_sync();  // both barriers initialised before any remote arrival
  const uint32_t peer_bar = map_to_rank(smem_addr(&bar), peer);
  const uint32_t peer_buf = map_to_rank(smem_addr(&buf[0]), peer);
  uint32_t acc = 0;
  long long t0 = clock64();
  for (int i = 0; i < iters; ++i) {
    const uint32_t parity = static_cast<uint32_t>(i) & 1u;
    if (me == 1) {  // wait for the ping first
      wait_cluster(smem_addr(&bar), parity);
      if (mode == 1) acc += buf[2 * lane].x + buf[2 * lane + 1].y;
      else if (lane == 0) acc += buf[0].x;
    }
    const uint4 v = make_uint4(i + lane, i, lane, me);
    if (mode == 1) {
      st_cluster_v4(peer_buf + (2 * lane) * 16, v);
      st_cluster_v4(peer_buf + (2 * lane + 1) * 16, v);
      arrive_remote(peer_bar);
    } else if (lane == 0) {
      st_cluster_v4(peer_buf, v);
      arrive_remote(peer_bar);
    }
    if (me == 0) {
      wait_cluster(smem_addr(&bar), parity);
      if (mode == 1) acc += buf[2 * lane].x + buf[2 * lane + 1].y;
      else if (lane == 0) acc += buf[0].x;
    }
    __syncwarp();
  }
  const long long t1 = clock64();
  if (me == 0 && lane == 0) *cycles = t1 - t0;
  check[me * 32 + lane] = acc;
  cluster_sync();  // no CTA exits while its peer may still write into it
}

// Two warps of one CTA, 1 KB per hop through the CTA's own shared memory.
__global__ void pingpong_cta(int iters, long long* cycles, uint32_t* check) {
  __shared__ __align__(16) uint4 buf[2][64];
  __shared__ __align__(8) uint64_t bar[2];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, other = warp ^ 1;
  if (threadIdx.x == 0) {
    mbar_init(smem_addr(&bar[0]), 32);
    mbar_init(smem_addr(&bar[1]), 32);
  }
  __syncthreads();
  uint32_t acc = 0;
  long long t0 = clock64();
  for (int i = 0; i < iters; ++i) {
    const uint32_t parity = static_cast<uint32_t>(i) & 1u;
    if (warp == 1) {
      mbar_wait_parity(smem_addr(&bar[1]), parity);
      acc += buf[1][2 * lane].x + buf[1][2 * lane + 1].y;
    }
    const uint4 v = make_uint4(i + lane, i, lane, warp);
    buf[other][2 * lane] = v;
    buf[other][2 * lane + 1] = v;
    mbar_arrive(smem_addr(&bar[other]));
    if (warp == 0) {
      mbar_wait_parity(smem_addr(&bar[0]), parity);
      acc += buf[0][2 * lane].x + buf[0][2 * lane + 1].y;
    }
    __syncwarp();
  }
  const long long t1 = clock64();
  if (threadIdx.x == 0) *cycles = t1 - t0;
  check[threadIdx.x] = acc;
}

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                   \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  int iters = 20000;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 9) {
    std::printf("clusters need sm_90+; this device is sm_%d%d\n", prop.major, prop.minor);
    return 0;
  }
  int clock_khz = 0;
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  long long* d_cycles = nullptr;
  uint32_t* d_check = nullptr;
  CK(cudaMalloc(&d_cycles, sizeof(long long)));
  CK(cudaMalloc(&d_check, 64 * sizeof(uint32_t)));
  struct Row {
    const char* name;
    double cycles_per_hop;
  } rows[3];
  for (int t = 0; t < 3; ++t) {
    for (int rep = 0; rep < 2; ++rep) {  // the first launch warms up
      if (t < 2) pingpong_cluster<<<2, 32>>>(iters, t, d_cycles, d_check);
      else pingpong_cta<<<1, 64>>>(iters, d_cycles, d_check);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
    }
    long long cycles = 0;
    CK(cudaMemcpy(&cycles, d_cycles, sizeof(cycles), cudaMemcpyDeviceToHost));
    rows[t] = {t == 0 ? "cluster_word" : t == 1 ? "cluster_1kb" : "cta_1kb", cycles / (2.0 * iters)};
  }
  const double ns_per_cycle = 1e6 / clock_khz;
  std::printf("DSMEM ping-pong on %s (max SM clock %.0f MHz; %d round trips per test)\n", prop.name, clock_khz / 1e3,
              iters);
  std::printf("%-14s %12s %12s\n", "test", "cycles/hop", "ns/hop");
  for (const Row& r : rows) std::printf("%-14s %12.1f %12.1f\n", r.name, r.cycles_per_hop, r.cycles_per_hop * ns_per_cycle);
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "{\"benchmark\": \"dsmem_pingpong\", \"card\": \"%s\", \"clock_mhz\": %.0f, \"iters\": %d, \"tests\": [",
                 prop.name, clock_khz / 1e3, iters);
    for (int t = 0; t < 3; ++t)
      std::fprintf(f, "%s{\"name\": \"%s\", \"cycles_per_hop\": %.2f, \"ns_per_hop\": %.2f}", t ? ", " : "", rows[t].name,
                   rows[t].cycles_per_hop, rows[t].cycles_per_hop * ns_per_cycle);
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  CK(cudaFree(d_cycles));
  CK(cudaFree(d_check));
  return 0;
}
