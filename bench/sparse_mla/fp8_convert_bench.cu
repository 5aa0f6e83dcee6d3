// FP8 (e4m3) -> 16-bit MMA-operand conversion ceilings on the current GPU (issue 6: can FP8 sparse MLA
// records run >= 1.6x faster than bf16 records at T=128 H=8 top-k 2048 on sm_90, which has no FP8
// mma.sync?). Standalone: needs only the CUDA runtime (and, for the helpers it times, variant 7's header).
//
// Each method runs as chains of dependent steps held in registers (kChains independent chains per thread,
// full occupancy: 8 blocks of 256 threads per SM), so that nothing can be folded or hoisted out of the loop:
// a step's input is the previous step's output, the chains start from words loaded from global memory and
// end XOR-ed into a word written to global memory. Steps:
//   cvt_chain   cvt.rn.f16x2.e4m3x2 (2 values); the f16x2 result's low half is the next e4m3x2 input
//   cvt_word    4 values of a 32-bit word by two cvt.rn.f16x2.e4m3x2 (lo, hi), XOR-ed into the next word
//   bits        the bit trick of kernels/attention/sparse_mla_reg_kernel.cuh (e4m3_pair_to_bf16x2_m120: a
//               sign-replicating PRMT, a shift and a mask per bf16x2 word holding value * 2^-120; session 9, was
//               two shifts and two masks per word after one PRMT per two words), bytes 0 / 1 of two words (4
//               values), XOR-ed into the next word
//   bits_prmt   the same pairing the word with a second input word (bytes 0 / 1 or 2 / 3 by chain parity), as
//               the kernel pairs two tokens' words
//   dequant     e4m3x2 -> f16x2 -> float2 -> * block scale -> bf16x2 (2 values), what a dequantization pass does
//   lop3        one LOP3 per step (the plain 32-bit integer ALU rate)
//   ffma        one FFMA per step (the FP32 pipe)
//   ffma_lop3   one FFMA chain and one LOP3 chain side by side (the issue rate: instructions per cycle per SM)
// The SASS of each loop is checked with `cuobjdump -sass` (instructions per step: docs/PERFORMANCE.md).
//
// Timing: cudaEvent around one launch that runs >= 2 ms (iterations calibrated per method), median of 5.
// Cycles: thread 0 of each block stamps clock64 and %globaltimer at its start and end; per SM, cycles = last
// end - first start (clock64 is per SM), and the SM clock = cycles / event time (and / globaltimer span).
// Bound: converting each of the 512 latent values of each gathered record once at T=128, top-k 2048
// (128 * 2048 records spread over all SMs) at the measured rate, compared with 53 us (1.6x the bf16 records'
// 85 us) and 85 us.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench/common/bench_cuda.cuh"  // json_escape
#include "kernels/attention/sparse_mla_reg_kernel.cuh"

#define CK(x)                                                                                       \
  do {                                                                                              \
    const cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, \
                   cudaGetErrorString(e_));                                                         \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

namespace {

constexpr int kThreads = 256;
// 2048 threads per SM (1536 on sm_120): full occupancy needs <= 32 registers per thread. The launch uses
// what the occupancy calculator reports for every method's kernel (8 on sm_90).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
constexpr int kBlocksPerSm = 6;
#else
constexpr int kBlocksPerSm = 8;
#endif
constexpr int kChains = 8;
constexpr int kUnroll = 4;
constexpr int kInWords = 4096;

// ---- the conversions: variant 7's own helpers (kernels/attention/sparse_mla_reg_kernel.cuh) ----
using glm5rt::kernels::sparse_mla_detail::e4m3_pair_to_bf16x2_m120;
using glm5rt::kernels::sparse_mla_detail::e4m3x2_to_f16x2;
__device__ __forceinline__ uint32_t lop3_96(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
// e4m3x2 -> bf16x2 of value * scale, through f16x2 and float2.
__device__ __forceinline__ uint32_t dequant_e4m3x2_bf16x2(uint32_t x, float scale) {
  const uint32_t h = e4m3x2_to_f16x2(x);
  __half2 hh;
  *reinterpret_cast<uint32_t*>(&hh) = h;
  const float2 f = __half22float2(hh);
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// ---- methods: step(state, another chain's state (same parity), p0, p1, chain) -> next state ----
struct CvtChain {
  static constexpr int kValues = 2;
  __device__ __forceinline__ static uint32_t step(uint32_t x, uint32_t, uint32_t, uint32_t, int) { return e4m3x2_to_f16x2(x); }
};
struct CvtWord {
  static constexpr int kValues = 4;
  __device__ __forceinline__ static uint32_t step(uint32_t x, uint32_t, uint32_t, uint32_t, int) {
    return e4m3x2_to_f16x2(x) ^ e4m3x2_to_f16x2(x >> 16);
  }
};
// The bit trick's steps add an unknown word (p0, from global memory) to the next input: fed back as is, the
// result's known-zero bits (the masks) would let ptxas drop part of the next step's masking, which the
// kernel, converting arbitrary words, cannot.
struct Bits {
  static constexpr int kValues = 4;
  __device__ __forceinline__ static uint32_t step(uint32_t x, uint32_t, uint32_t p0, uint32_t, int) {
    return (e4m3_pair_to_bf16x2_m120<0>(x, x) ^ e4m3_pair_to_bf16x2_m120<1>(x, x)) + p0;
  }
};
struct BitsPrmt {
  static constexpr int kValues = 4;
  __device__ __forceinline__ static uint32_t step(uint32_t x, uint32_t, uint32_t p0, uint32_t p1, int chain) {
    return ((chain & 1) ? e4m3_pair_to_bf16x2_m120<2>(x, p1) ^ e4m3_pair_to_bf16x2_m120<3>(x, p1)
                        : e4m3_pair_to_bf16x2_m120<0>(x, p1) ^ e4m3_pair_to_bf16x2_m120<1>(x, p1)) + p0;
  }
};
struct Dequant {
  static constexpr int kValues = 2;
  __device__ __forceinline__ static uint32_t step(uint32_t x, uint32_t, uint32_t p0, uint32_t, int) {
    return dequant_e4m3x2_bf16x2(x, __uint_as_float(p0));
  }
};
struct Lop3 {
  static constexpr int kValues = 0;
  // XOR with another chain's word: a chain of LOP3s on the same two operands would be one bitwise function
  // of (x, p0, p1), which ptxas may fold into a single LOP3.
  __device__ __forceinline__ static uint32_t step(uint32_t x, uint32_t other, uint32_t p0, uint32_t, int) {
    return lop3_96(x, other, p0);
  }
};
struct Ffma {
  static constexpr int kValues = 0;
  __device__ __forceinline__ static uint32_t step(uint32_t x, uint32_t, uint32_t p0, uint32_t p1, int) {
    return __float_as_uint(fmaf(__uint_as_float(x), __uint_as_float(p0), __uint_as_float(p1)));
  }
};
struct FfmaLop3 {  // even chains FFMA, odd chains LOP3 (chain is a compile-time constant after unrolling)
  static constexpr int kValues = 0;
  __device__ __forceinline__ static uint32_t step(uint32_t x, uint32_t other, uint32_t p0, uint32_t p1, int chain) {
    return (chain & 1) ? Lop3::step(x, other, p0, p1, chain) : Ffma::step(x, other, p0, p1, chain);
  }
};

struct BlockStamp {
  long long clk0, clk1;
  unsigned long long ns0, ns1;
  int smid, pad;
};

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ int smid() {
  int s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

template <class M>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    convert_kernel(const uint32_t* __restrict__ in, const uint32_t* __restrict__ params, uint32_t* __restrict__ out,
                   int iters, BlockStamp* __restrict__ stamps) {
  long long clk0 = 0;
  unsigned long long ns0 = 0;
  if (threadIdx.x == 0) {
    ns0 = globaltimer();
    clk0 = clock64();
  }
  const int tid = blockIdx.x * kThreads + threadIdx.x;
  const uint32_t p0 = params[0], p1 = params[1];
  uint32_t s[kChains];
#pragma unroll
  for (int k = 0; k < kChains; ++k) s[k] = in[(tid * kChains + k) % kInWords];
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kChains; ++k) s[k] = M::step(s[k], s[(k + 2) % kChains], p0, p1, k);
    }
  }
  uint32_t acc = 0;
#pragma unroll
  for (int k = 0; k < kChains; ++k) acc ^= s[k];
  out[tid] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    const long long clk1 = clock64();
    BlockStamp st;
    st.clk0 = clk0;
    st.clk1 = clk1;
    st.ns0 = ns0;
    st.ns1 = globaltimer();
    st.smid = smid();
    st.pad = 0;
    stamps[blockIdx.x] = st;
  }
}

// Exactness check of the two conversions the kernels use, over all 256 e4m3 codes.
__global__ void check_kernel(uint32_t* cvt_out, uint32_t* bits_out) {
  const int c = threadIdx.x;  // code 0..255
  const uint32_t word = static_cast<uint32_t>(c) * 0x01010101u;
  cvt_out[c] = e4m3x2_to_f16x2(word);
  bits_out[c] = e4m3_pair_to_bf16x2_m120<0>(word, word);
}

double e4m3_value(int c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}
float half_bits_to_float(uint16_t h) {
  __half_raw r;
  r.x = h;
  return __half2float(__half(r));
}
float bf16_bits_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Method {
  const char* name;
  const char* what;
  int values_per_step;
  void (*launch)(int blocks, const uint32_t*, const uint32_t*, uint32_t*, int, BlockStamp*);
  const void* kernel;
};
template <class M>
void launch_m(int blocks, const uint32_t* in, const uint32_t* p, uint32_t* out, int iters, BlockStamp* st) {
  convert_kernel<M><<<blocks, kThreads>>>(in, p, out, iters, st);
}
template <class M>
Method method(const char* name, const char* what) {
  return Method{name, what, M::kValues, launch_m<M>, reinterpret_cast<const void*>(&convert_kernel<M>)};
}

struct Result {
  std::string name, what;
  int values_per_step = 0;
  int iters = 0;
  double event_ms = 0, cycles_per_sm = 0, clock_ghz_event = 0, clock_ghz_gtimer = 0;
  double steps_total = 0, values_total = 0;
  double warp_steps_per_sm_cycle = 0, values_per_sm_cycle = 0, values_per_s = 0;
  double bound_us = 0;
  uint32_t checksum = 0;
};

using glm5rt_bench::json_escape;

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, commit = "unknown", command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--commit SHA]\n", argv[0]);
      return 2;
    }
  }
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  if (prop.major * 10 + prop.minor < 89) {
    std::fprintf(stderr, "cvt.rn.f16x2.e4m3x2 needs sm_89 or newer (this GPU: sm_%d%d)\n", prop.major, prop.minor);
    return 1;
  }
  const int sms = prop.multiProcessorCount;
  std::printf("GPU: %s, %d SMs, sm_%d%d\n", prop.name, sms, prop.major, prop.minor);

  // Exactness of the conversions over all 256 codes (NaN codes 0x7f / 0xff skipped).
  uint32_t *d_cvt = nullptr, *d_bits = nullptr;
  CK(cudaMalloc(&d_cvt, 256 * 4));
  CK(cudaMalloc(&d_bits, 256 * 4));
  check_kernel<<<1, 256>>>(d_cvt, d_bits);
  CK(cudaGetLastError());
  std::vector<uint32_t> h_cvt(256), h_bits(256);
  CK(cudaMemcpy(h_cvt.data(), d_cvt, 1024, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(h_bits.data(), d_bits, 1024, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    const double ref = e4m3_value(c);
    const float a = half_bits_to_float(static_cast<uint16_t>(h_cvt[c] & 0xffff));
    const float b = bf16_bits_to_float(static_cast<uint16_t>(h_bits[c] & 0xffff)) * 1.329227995784916e36f;  // * 2^120
    if (a != static_cast<float>(ref) || b != static_cast<float>(ref)) ++bad;
  }
  std::printf("exactness over 254 e4m3 codes: cvt and bit trick %s (%d mismatches)\n", bad ? "FAIL" : "exact", bad);
  CK(cudaFree(d_cvt));
  CK(cudaFree(d_bits));

  // Inputs: random e4m3 words (finite codes), params: scale 0.75 / LOP3 operands / FFMA constants.
  std::vector<uint32_t> h_in(kInWords);
  uint32_t rng = 0x12345678u;
  for (auto& w : h_in) {
    rng = rng * 1664525u + 1013904223u;
    w = (rng >> 1) & 0x3e3e3e3eu;  // |value| < 448: exponent bits never all ones
  }
  uint32_t *d_in = nullptr, *d_p = nullptr, *d_out = nullptr;
  BlockStamp* d_st = nullptr;
  CK(cudaMalloc(&d_in, kInWords * 4));
  CK(cudaMalloc(&d_p, 16));
  CK(cudaMemcpy(d_in, h_in.data(), kInWords * 4, cudaMemcpyHostToDevice));

  const Method methods[] = {
      method<CvtChain>("cvt_chain", "cvt.rn.f16x2.e4m3x2, 2 values per step (result feeds the next step)"),
      method<CvtWord>("cvt_word", "2x cvt.rn.f16x2.e4m3x2 on a 32-bit word (lo, hi) + XOR, 4 values per step"),
      method<Bits>("bits", "sign-replicating PRMT + shift + mask -> 2 bf16x2 (value * 2^-120), XOR + add, 4 values"),
      method<BitsPrmt>("bits_prmt", "the same on two chains' words (the kernel's GEMM2 pairing), XOR + add, 4 values"),
      method<Dequant>("dequant", "e4m3x2 -> f16x2 -> float2 -> * scale -> bf16x2, 2 values per step"),
      method<Lop3>("lop3", "one LOP3 per step (integer ALU rate)"),
      method<Ffma>("ffma", "one FFMA per step (FP32 pipe)"),
      method<FfmaLop3>("ffma_lop3", "FFMA and LOP3 chains side by side, one instruction per step (issue rate)"),
  };

  // One wave of resident blocks on every SM: the smallest occupancy over the methods' kernels.
  int blocks_per_sm = 1 << 30;
  for (const Method& m : methods) {
    int n = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, m.kernel, kThreads, 0));
    blocks_per_sm = std::min(blocks_per_sm, n);
  }
  if (blocks_per_sm < 1) {
    std::fprintf(stderr, "no block of %d threads fits on an SM\n", kThreads);
    return 1;
  }
  const int blocks = sms * blocks_per_sm;
  const int threads_total = blocks * kThreads;
  std::printf("%d blocks (%d per SM) x %d threads, %d chains x %d unroll per thread\n", blocks, blocks_per_sm, kThreads,
              kChains, kUnroll);
  CK(cudaMalloc(&d_out, static_cast<size_t>(threads_total) * 4));
  CK(cudaMalloc(&d_st, static_cast<size_t>(blocks) * sizeof(BlockStamp)));

  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<BlockStamp> h_st(blocks);
  std::vector<Result> results;

  // Bound parameters (issue 6): T=128 query tokens, top-k 2048, 512 latent e4m3 values per record.
  const double records = 128.0 * 2048.0;
  const double values_needed = records * 512.0;
  const double records_per_sm = records / sms;

  for (const Method& m : methods) {
    const uint32_t params[4] = {m.values_per_step ? 0x3f400000u /* 0.75f */ : 0x3f7fff00u, 0x2e5a1c37u, 0, 0};
    // Lop3 uses p0 / p1 as bit patterns; ffma as float multiplier (~1) and addend (tiny).
    CK(cudaMemcpy(d_p, params, 16, cudaMemcpyHostToDevice));
    auto time_once = [&](int iters, double* ms) {
      CK(cudaEventRecord(e0));
      m.launch(blocks, d_in, d_p, d_out, iters, d_st);
      CK(cudaEventRecord(e1));
      CK(cudaGetLastError());
      CK(cudaEventSynchronize(e1));
      float f = 0;
      CK(cudaEventElapsedTime(&f, e0, e1));
      *ms = f;
    };
    double ms = 0;
    time_once(64, &ms);  // warm-up
    int iters = 256;
    time_once(iters, &ms);
    while (ms < 0.5 && iters < (1 << 24)) {
      iters *= 4;
      time_once(iters, &ms);
    }
    iters = static_cast<int>(std::min(1e9, std::ceil(iters * 2.5 / ms)));  // ~2.5 ms
    std::vector<double> mss;
    std::vector<double> cyc_runs, gt_runs;
    for (int r = 0; r < 5; ++r) {
      time_once(iters, &ms);
      mss.push_back(ms);
      CK(cudaMemcpy(h_st.data(), d_st, static_cast<size_t>(blocks) * sizeof(BlockStamp), cudaMemcpyDeviceToHost));
      std::vector<long long> c0(sms, -1), c1(sms, -1);
      std::vector<unsigned long long> n0(sms, 0), n1(sms, 0);
      for (const BlockStamp& st : h_st) {
        if (st.smid < 0 || st.smid >= sms) continue;
        const int s = st.smid;
        if (c0[s] < 0 || st.clk0 < c0[s]) c0[s] = st.clk0, n0[s] = st.ns0;
        if (c1[s] < 0 || st.clk1 > c1[s]) c1[s] = st.clk1, n1[s] = st.ns1;
      }
      double csum = 0, nsum = 0;
      int used = 0;
      for (int s = 0; s < sms; ++s) {
        if (c0[s] < 0) continue;
        csum += static_cast<double>(c1[s] - c0[s]);
        nsum += static_cast<double>(n1[s] - n0[s]);
        ++used;
      }
      cyc_runs.push_back(used ? csum / used : 0);
      gt_runs.push_back(used ? nsum / used : 0);
    }
    // Median run by event time.
    std::vector<int> order(mss.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return mss[a] < mss[b]; });
    const int med = order[order.size() / 2];
    uint32_t cs = 0;
    {
      std::vector<uint32_t> h_out(threads_total);
      CK(cudaMemcpy(h_out.data(), d_out, h_out.size() * 4, cudaMemcpyDeviceToHost));
      // Threads tid and tid + 512 start from the same words (kInWords / kChains = 512), so an XOR fold would
      // cancel to 0: a position-weighted sum does not.
      for (size_t i = 0; i < h_out.size(); ++i) cs += h_out[i] * static_cast<uint32_t>(2 * i + 1);
    }
    Result r;
    r.name = m.name;
    r.what = m.what;
    r.values_per_step = m.values_per_step;
    r.iters = iters;
    r.event_ms = mss[med];
    r.cycles_per_sm = cyc_runs[med];
    r.clock_ghz_event = r.cycles_per_sm / (r.event_ms * 1e6);
    r.clock_ghz_gtimer = gt_runs[med] > 0 ? r.cycles_per_sm / gt_runs[med] : 0;
    r.steps_total = static_cast<double>(threads_total) * kChains * kUnroll * iters;
    r.values_total = r.steps_total * m.values_per_step;
    r.warp_steps_per_sm_cycle = r.steps_total / 32.0 / (sms * r.cycles_per_sm);
    r.values_per_sm_cycle = r.values_total / (sms * r.cycles_per_sm);
    r.values_per_s = r.values_total / (r.event_ms * 1e-3);
    r.bound_us = m.values_per_step ? values_needed / r.values_per_s * 1e6 : 0;
    r.checksum = cs;
    results.push_back(r);
  }

  std::printf("\n%-10s %6s %9s %10s %9s %9s %11s %12s %12s %10s %8s %8s\n", "method", "val/st", "iters", "event_ms",
              "cyc/SM(M)", "clk GHz", "clk(gtimer)", "warp-st/SM/c", "values/SM/c", "Gvalues/s", "bound us",
              "/53us");
  for (const Result& r : results) {
    std::printf("%-10s %6d %9d %10.3f %9.3f %9.3f %11.3f %12.3f %12.1f %10.1f", r.name.c_str(), r.values_per_step,
                r.iters, r.event_ms, r.cycles_per_sm / 1e6, r.clock_ghz_event, r.clock_ghz_gtimer,
                r.warp_steps_per_sm_cycle, r.values_per_sm_cycle, r.values_per_s / 1e9);
    if (r.values_per_step) std::printf(" %8.2f %8.3f\n", r.bound_us, r.bound_us / 53.0);
    else std::printf(" %8s %8s\n", "-", "-");
  }
  double clk_sum = 0;
  for (const Result& r : results) clk_sum += r.clock_ghz_event;
  const double clk = clk_sum / results.size();
  std::printf("\nBound arithmetic (T=128, top-k 2048, 512 latent values per record, each converted once):\n");
  std::printf("  records %.0f, per SM %.1f, values per SM %.0f; mean SM clock %.3f GHz\n", records, records_per_sm,
              records_per_sm * 512.0, clk);
  std::printf("  at 53 us: %.0f cycles per SM, %.0f warp-instruction issue slots per SM (4 schedulers), %.1f per record"
              " (= %.0f thread-instruction slots)\n",
              53e-6 * clk * 1e9, 4 * 53e-6 * clk * 1e9, 4 * 53e-6 * clk * 1e9 / records_per_sm,
              32 * 4 * 53e-6 * clk * 1e9 / records_per_sm);
  for (const Result& r : results) {
    if (!r.values_per_step) continue;
    const double cyc = records_per_sm * 512.0 / r.values_per_sm_cycle;
    std::printf("  %-10s %.0f cycles per SM = %.2f us at %.3f GHz (%.1f%% of 53 us, %.1f%% of 85 us); %.1f warp-steps per "
                "record\n",
                r.name.c_str(), cyc, cyc / (r.clock_ghz_event * 1e3), r.clock_ghz_event, 100.0 * r.bound_us / 53.0,
                100.0 * r.bound_us / 85.0, 512.0 / r.values_per_step / 32.0);
  }

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    char date[64];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::fprintf(f,
                 "{\n  \"command\": \"%s\",\n  \"date\": \"%s\",\n  \"git_commit\": \"%s\",\n  \"card\": \"%s\",\n"
                 "  \"sms\": %d,\n  \"cc\": \"%d.%d\",\n  \"blocks\": %d,\n  \"threads_per_block\": %d,\n"
                 "  \"chains_per_thread\": %d,\n  \"unroll\": %d,\n  \"exactness_mismatches\": %d,\n"
                 "  \"bound\": {\"records\": %.0f, \"records_per_sm\": %.3f, \"values\": %.0f, \"target_us\": 53.0, "
                 "\"bf16_us\": 85.0, \"mean_clock_ghz\": %.4f},\n  \"methods\": [\n",
                 json_escape(command).c_str(), date, json_escape(commit).c_str(), json_escape(prop.name).c_str(), sms,
                 prop.major, prop.minor, blocks, kThreads, kChains, kUnroll, bad, records, records_per_sm,
                 values_needed, clk);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(f,
                   "    {\"name\": \"%s\", \"what\": \"%s\", \"values_per_step\": %d, \"iters\": %d, \"event_ms\": %.4f, "
                   "\"cycles_per_sm\": %.0f, \"clock_ghz_event\": %.4f, \"clock_ghz_globaltimer\": %.4f, "
                   "\"warp_steps_per_sm_cycle\": %.4f, \"values_per_sm_cycle\": %.3f, \"values_per_s\": %.4e, "
                   "\"bound_us\": %.3f, \"checksum\": %u}%s\n",
                   r.name.c_str(), json_escape(r.what).c_str(), r.values_per_step, r.iters, r.event_ms, r.cycles_per_sm,
                   r.clock_ghz_event, r.clock_ghz_gtimer, r.warp_steps_per_sm_cycle, r.values_per_sm_cycle,
                   r.values_per_s, r.bound_us, r.checksum, i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
    std::printf("wrote %s\n", json_path.c_str());
  }
  CK(cudaFree(d_in));
  CK(cudaFree(d_p));
  CK(cudaFree(d_out));
  CK(cudaFree(d_st));
  return bad ? 1 : 0;
}
