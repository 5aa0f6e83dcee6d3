// The tensor-core rates that kernels under the SM120 rules can reach on the card at hand: mma.sync
// issued back to back from registers (no memory traffic at all), per instruction shape the project's
// kernels use. This is the ceiling the sparse MLA and FP8 GEMM figures are compared with, beside the
// cuBLAS / cuBLASLt rates (which on Hopper come from wgmma, an instruction SM120 does not have).
//
//   glm5rt_bench_mma_peak [--json PATH] [--commit SHA]
//
// Every warp runs kChains independent accumulator chains (enough to cover the MMA latency) for kIters
// rounds; operands are fixed registers seeded from the thread id so the compiler cannot fold them; the
// accumulators are written out so that the work cannot be removed. Grid: 8 blocks of 8 warps per SM
// (enough warps to saturate every sub-partition). Reported: the median of 7 timed launches after 2 warm-ups.
// On sm_90 the e4m3 form is not a native instruction (ptxas lowers it to conversions + f16 MMAs): its row
// shows what an FP8 mma.sync kernel can reach on a Hopper card, not what it reaches on SM120.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/common/bench_cuda.cuh"

namespace {

constexpr int kChains = 8;
constexpr int kIters = 4096;
constexpr int kWarpsPerBlock = 8;

enum class Shape { kBf16, kF16, kE4m3, kS8 };

struct ShapeInfo {
  const char* name;
  const char* ptx;
  double flops_per_mma;  // 2 * m * n * k
};

ShapeInfo info(Shape s) {
  switch (s) {
    case Shape::kBf16: return {"bf16 m16n8k16 (f32 acc)", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 2.0 * 16 * 8 * 16};
    case Shape::kF16: return {"f16 m16n8k16 (f32 acc)", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 2.0 * 16 * 8 * 16};
    case Shape::kE4m3: return {"e4m3 m16n8k32 (f32 acc)", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", 2.0 * 16 * 8 * 32};
    default: return {"s8 m16n8k32 (s32 acc)", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", 2.0 * 16 * 8 * 32};
  }
}

template <Shape S>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (S == Shape::kBf16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (S == Shape::kF16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (S == Shape::kE4m3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  } else {
    // s32 accumulators carried in float registers' bits (the values are only written out).
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(*reinterpret_cast<uint32_t*>(&d[0])), "+r"(*reinterpret_cast<uint32_t*>(&d[1])),
                   "+r"(*reinterpret_cast<uint32_t*>(&d[2])), "+r"(*reinterpret_cast<uint32_t*>(&d[3]))
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

template <Shape S>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) mma_loop(float* out, uint32_t seed) {
  uint32_t a[4], b[2];
  // Small finite values in every format (0x3c00 = 1.0 in f16, 0x3f80 = 1.0 in bf16, 0x38 = 1.0 in e4m3).
  const uint32_t base = S == Shape::kBf16 ? 0x3f803f80u : S == Shape::kF16 ? 0x3c003c00u : 0x38383838u;
  for (int i = 0; i < 4; ++i) a[i] = base ^ ((seed + threadIdx.x + i) & 0x00010001u);
  for (int i = 0; i < 2; ++i) b[i] = base ^ ((seed + threadIdx.x * 3 + i) & 0x00010001u);
  float d[kChains][4] = {};
  for (int it = 0; it < kIters; ++it) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) mma<S>(d[c], a, b);
  }
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

struct Row {
  std::string name;
  double ms, tflops;
};

template <Shape S>
Row run(int sms, float* out, cudaStream_t stream) {
  const int blocks = sms * 8;
  const double mmas = static_cast<double>(blocks) * kWarpsPerBlock * kIters * kChains;
  const float ms = glm5rt_bench::time_ms([&] { mma_loop<S><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(out, 1u); }, 2, 7, stream);
  BENCH_CHECK_CUDA(cudaGetLastError());
  return {info(S).name, ms, mmas * info(S).flops_per_mma / (ms * 1e-3) / 1e12};
}

}  // namespace

int main(int argc, char** argv) {
  const char* json = nullptr;
  std::string commit = "unknown";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!std::strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--commit SHA]\n", argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  BENCH_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  BENCH_CHECK_CUDA(cudaStreamCreate(&stream));
  float* out;
  const int sms = prop.multiProcessorCount;
  BENCH_CHECK_CUDA(cudaMalloc(&out, sizeof(float) * sms * 8 * kWarpsPerBlock * 32));
  std::vector<Row> rows = {run<Shape::kBf16>(sms, out, stream), run<Shape::kF16>(sms, out, stream),
                           run<Shape::kE4m3>(sms, out, stream), run<Shape::kS8>(sms, out, stream)};
  std::printf("device: %s (sm_%d%d, %d SMs)\n%-28s %10s %12s\n", prop.name, prop.major, prop.minor, sms, "mma.sync shape", "ms",
              "TFLOP/s");
  for (const Row& r : rows) std::printf("%-28s %10.3f %12.1f\n", r.name.c_str(), r.ms, r.tflops);
  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json);
      return 1;
    }
    std::fprintf(f, "{\n  \"bench\": \"glm5rt_bench_mma_peak\",\n  \"device\": \"%s\",\n  \"sm\": %d,\n  \"sms\": %d,\n  \"commit\": \"%s\",\n"
                    "  \"chains_per_warp\": %d,\n  \"warps_per_sm\": %d,\n  \"rows\": [\n",
                 prop.name, prop.major * 10 + prop.minor, sms, commit.c_str(), kChains, 8 * kWarpsPerBlock);
    for (size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f, "    {\"shape\": \"%s\", \"ms\": %.4f, \"tflops\": %.2f}%s\n", rows[i].name.c_str(), rows[i].ms, rows[i].tflops,
                   i + 1 < rows.size() ? "," : "");
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
  BENCH_CHECK_CUDA(cudaFree(out));
  return 0;
}
