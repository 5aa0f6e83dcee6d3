// The machine's ceiling for sparse MLA's access pattern (session 8): every record a launch's rows name, read once
// from the pool and nothing else. The device copy rate (read + write of one contiguous buffer) overstates what a
// gather of scattered 1152- or 656-byte records can reach; this kernel measures the latter on the same cache and
// indices as the kernel under test, so that "of ceiling" for a memory-bound shape compares like with like.
//
// One warp per record, four records per warp in flight: each lane loads the index of every record (one broadcast
// transaction), then its 16-byte chunks of the four records (ld.global.nc.L1::no_allocate, the way the kernels'
// copies bypass L1), all issued before any is used; the words are folded into one register that is stored only
// when it equals an unlikely constant, so the loads stay live without writing the data back.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemm/fp8_common.cuh"  // ldg_stream: the 16-byte non-allocating load

namespace glm5rt_bench {

// kChunks: 16-byte chunks per record (72 for bf16 records of 1152 bytes, 41 for FP8 records of 656 bytes).
template <int kChunks>
__global__ void __launch_bounds__(256) gather_records_kernel(const uint4* __restrict__ cache,
                                                             const int32_t* __restrict__ idx, int64_t n,
                                                             unsigned* __restrict__ sink) {
  constexpr int kPer = (kChunks + 31) / 32;  // chunks per lane
  constexpr int kRec = 4;                    // records per warp in flight
  const int lane = threadIdx.x & 31;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t nwarps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  unsigned acc = 0;
  for (int64_t r0 = warp * kRec; r0 < n; r0 += nwarps * kRec) {
    int32_t slot[kRec];
#pragma unroll
    for (int k = 0; k < kRec; ++k) slot[k] = r0 + k < n ? __ldg(idx + r0 + k) : -1;
    uint4 v[kRec][kPer];
#pragma unroll
    for (int k = 0; k < kRec; ++k)
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int c = lane + 32 * j;
        v[k][j] = slot[k] >= 0 && c < kChunks ? glm5rt::kernels::detail::ldg_stream(cache + static_cast<int64_t>(slot[k]) * kChunks + c)
                                               : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
    for (int k = 0; k < kRec; ++k)
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc ^= v[k][j].x ^ v[k][j].y ^ v[k][j].z ^ v[k][j].w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

// Time the gather of the n records idx[0 .. n) of `cache` (record_bytes 1152 or 656) on `stream`: a CUDA graph of
// 8 launches (132 x 8 blocks of 256 threads per SM count: full occupancy), replayed 5 times after a warm-up; returns
// the median per launch in microseconds (0 for an unsupported record size).
inline double time_gather_us(const void* cache, int record_bytes, const int32_t* idx, int64_t n, int sms,
                             cudaStream_t stream) {
  auto kernel = record_bytes == 1152  ? gather_records_kernel<72>
                : record_bytes == 656 ? gather_records_kernel<41>
                                      : nullptr;
  if (!kernel || n <= 0) return 0.0;
  unsigned* sink = nullptr;
  if (cudaMalloc(&sink, sizeof(unsigned)) != cudaSuccess) return 0.0;
  const dim3 grid(static_cast<unsigned>(sms * 8)), block(256);
  const auto* base = static_cast<const uint4*>(cache);
  constexpr int K = 8;
  double result = 0.0;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  bool ok = cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess &&
            cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (ok) {
    for (int i = 0; i < K; ++i) kernel<<<grid, block, 0, stream>>>(base, idx, n, sink);
    ok = cudaStreamEndCapture(stream, &graph) == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess &&
         cudaGraphLaunch(exec, stream) == cudaSuccess && cudaStreamSynchronize(stream) == cudaSuccess;
  }
  float ts[5];
  for (int i = 0; ok && i < 5; ++i) {
    ok = cudaEventRecord(e0, stream) == cudaSuccess && cudaGraphLaunch(exec, stream) == cudaSuccess &&
         cudaEventRecord(e1, stream) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
         cudaEventElapsedTime(&ts[i], e0, e1) == cudaSuccess;
  }
  if (ok) {
    for (int i = 1; i < 5; ++i)  // insertion sort of five
      for (int j = i; j > 0 && ts[j] < ts[j - 1]; --j) {
        const float t = ts[j];
        ts[j] = ts[j - 1];
        ts[j - 1] = t;
      }
    result = ts[2] * 1e3 / K;
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaFree(sink);
  (void)cudaGetLastError();
  return result;
}

}  // namespace glm5rt_bench
