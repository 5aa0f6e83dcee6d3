// One GLM-5 MoE layer at real size (hidden 6144, 256 experts x 2048 + 1 shared, top-8, random FP8
// weights, random routing through the real router) for several token counts, beside same-run ceilings:
// device copy bandwidth and cuBLASLt GEMM rates (bf16; FP8 per-tensor; FP8 128-block-scaled if offered).
// Prints a table and writes JSON. Usage: glm5rt_bench_moe [--json out.json] [--commit sha] [--tokens 1,8,...]
// [--rows default,lines,...] (only the MoE rows with these labels) [--no-gemm-ceilings] (only the copy ceiling:
// quick diagnosis runs, e.g. under compute-sanitizer)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <string>
#include <vector>

#include "bench/common/bench_cuda.cuh"
#include "kernels/gemm/fp8_gemm.h"
#include "kernels/moe/moe.h"

namespace k = glm5rt::kernels;

#define CK(x) BENCH_CHECK_CUDA(x)

namespace {

using glm5rt_bench::fill_f32;
using glm5rt_bench::fill_fp8;
using glm5rt_bench::hash32;
using glm5rt_bench::median;
using glm5rt_bench::parse_int_list;
using glm5rt_bench::time_ms;
// Approximately normal bf16 (sum of 4 uniforms), times sigma.
__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint64_t seed, float sigma) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float s = 0;
    for (int j = 0; j < 4; ++j) s += (hash32(seed * 0x9e3779b97f4a7c15ULL + i * 4 + j) >> 8) * (1.0f / 16777216.0f);
    p[i] = __float2bfloat16((s - 2.0f) * 1.7320508f * sigma);
  }
}

// Register-only mma.sync throughput: the ceiling for the SM120-portable tensor-core path on this GPU.
// FP8 (m16n8k32 e4m3) and bf16 (m16n8k16), 8 independent accumulators per warp.
template <bool kFp8>
__global__ void mma_peak_kernel(float* out, int iters, uint32_t seed) {
  float acc[8][4] = {};
  uint32_t a0 = seed ^ threadIdx.x, a1 = a0 * 3, a2 = a0 * 5, a3 = a0 * 7, b0 = a0 * 11, b1 = a0 * 13;
  if (kFp8) {  // keep the bytes finite e4m3 (no NaN codes)
    a0 &= 0x3f3f3f3f; a1 &= 0x3f3f3f3f; a2 &= 0x3f3f3f3f; a3 &= 0x3f3f3f3f; b0 &= 0x3f3f3f3f; b1 &= 0x3f3f3f3f;
  } else {
    a0 &= 0x3f7f3f7f; a1 &= 0x3f7f3f7f; a2 &= 0x3f7f3f7f; a3 &= 0x3f7f3f7f; b0 &= 0x3f7f3f7f; b1 &= 0x3f7f3f7f;
  }
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (kFp8) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
      } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      }
    }
  }
  float s = 0;
  for (int j = 0; j < 8; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}


struct LtResult {
  std::string name;
  int m = 0, n = 0, k = 0;
  double tflops = -1;
  std::string status = "ok";
};

// cuBLASLt D[m,n] = op(A)[m,k] * B[k,n], column-major, "TN" (A and B both K-major, as FP8 requires).
LtResult lt_gemm(cublasLtHandle_t lt, const char* name, cudaDataType_t in_type, int mode, int m, int n, int kk,
                 cudaStream_t s, void* ws, size_t ws_bytes) {
  LtResult r;
  r.name = name;
  r.m = m;
  r.n = n;
  r.k = kk;
  const bool fp8 = in_type == CUDA_R_8F_E4M3;
  const size_t esz = fp8 ? 1 : 2;
  void *A = nullptr, *B = nullptr, *D = nullptr;
  float *sa = nullptr, *sb = nullptr;
  CK(cudaMalloc(&A, static_cast<size_t>(m) * kk * esz));
  CK(cudaMalloc(&B, static_cast<size_t>(n) * kk * esz));
  CK(cudaMalloc(&D, static_cast<size_t>(m) * n * 2));
  const size_t sa_n = static_cast<size_t>((m + 127) / 128 + 1) * ((kk + 127) / 128 + 1) * 128;
  const size_t sb_n = static_cast<size_t>(n + 128) * ((kk + 127) / 128 + 1);
  CK(cudaMalloc(&sa, sa_n * 4));
  CK(cudaMalloc(&sb, sb_n * 4));
  if (fp8) {
    fill_fp8<<<1024, 256, 0, s>>>(static_cast<uint8_t*>(A), static_cast<size_t>(m) * kk, 11);
    fill_fp8<<<1024, 256, 0, s>>>(static_cast<uint8_t*>(B), static_cast<size_t>(n) * kk, 12);
  } else {
    fill_bf16<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(A), static_cast<size_t>(m) * kk, 11, 1.f);
    fill_bf16<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(B), static_cast<size_t>(n) * kk, 12, 1.f);
  }
  fill_f32<<<256, 256, 0, s>>>(sa, sa_n, 13, 0.5f, 1.0f);
  fill_f32<<<256, 256, 0, s>>>(sb, sb_n, 14, 0.5f, 1.0f);
  CK(cudaGetLastError());

  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasStatus_t st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  if (fp8 && st == CUBLAS_STATUS_SUCCESS) {
    if (mode != 0) {
      const int32_t ma = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, mb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof(ma));
      if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof(mb));
    }
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
  }
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&la, in_type, kk, m, kk);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&lb, in_type, kk, n, kk);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceCreate(&pref);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heur, &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    r.status = std::string("unsupported: ") + cublasLtGetStatusName(st) + (found == 0 ? " (no algorithm)" : "");
  } else {
    const float alpha = 1.f, beta = 0.f;
    cublasStatus_t run_st = CUBLAS_STATUS_SUCCESS;
    auto run = [&] {
      const cublasStatus_t x = cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &heur.algo, ws, ws_bytes, s);
      if (x != CUBLAS_STATUS_SUCCESS) run_st = x;
    };
    const float ms = time_ms(run, 3, 20, s);
    if (run_st != CUBLAS_STATUS_SUCCESS) r.status = std::string("failed: ") + cublasLtGetStatusName(run_st);
    else r.tflops = 2.0 * m * n * kk / (ms * 1e-3) / 1e12;
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (op) cublasLtMatmulDescDestroy(op);
  CK(cudaFree(A));
  CK(cudaFree(B));
  CK(cudaFree(D));
  CK(cudaFree(sa));
  CK(cudaFree(sb));
  return r;
}

template <bool kFp8>
double mma_peak(int sms, cudaStream_t s) {
  float* out = nullptr;
  const int blocks = sms * 4, threads = 256, iters = 4096;
  CK(cudaMalloc(&out, sizeof(float) * blocks * threads));
  const float ms = time_ms([&] { mma_peak_kernel<kFp8><<<blocks, threads, 0, s>>>(out, iters, 7); }, 2, 10, s);
  CK(cudaGetLastError());
  CK(cudaFree(out));
  const double flops = 2.0 * 16 * 8 * (kFp8 ? 32 : 16) * 8.0 * iters * (blocks * threads / 32);
  return flops / (ms * 1e-3) / 1e12;
}

// Our dense FP8 GEMM (prefill kernel) on an m x n x k problem: the kernel's own rate beside cuBLASLt.
double ours_dense_rate(int m, int n, int kk, int tile_rows, int mma, cudaStream_t s) {
  uint8_t *a = nullptr, *w = nullptr;
  float *as = nullptr, *wsc = nullptr;
  __nv_bfloat16* c = nullptr;
  CK(cudaMalloc(&a, static_cast<size_t>(m) * kk));
  CK(cudaMalloc(&w, static_cast<size_t>(n) * kk));
  CK(cudaMalloc(&as, static_cast<size_t>(m) * (kk / 128) * 4));
  CK(cudaMalloc(&wsc, static_cast<size_t>((n + 127) / 128) * (kk / 128) * 4));
  CK(cudaMalloc(&c, static_cast<size_t>(m) * n * 2));
  fill_fp8<<<1024, 256, 0, s>>>(a, static_cast<size_t>(m) * kk, 21);
  fill_fp8<<<1024, 256, 0, s>>>(w, static_cast<size_t>(n) * kk, 22);
  fill_f32<<<256, 256, 0, s>>>(as, static_cast<size_t>(m) * (kk / 128), 23, 0.5f, 1.f);
  fill_f32<<<256, 256, 0, s>>>(wsc, static_cast<size_t>((n + 127) / 128) * (kk / 128), 24, 0.5f, 1.f);
  const uint8_t** wp = nullptr;
  const float** sp = nullptr;
  CK(cudaMalloc(&wp, sizeof(void*)));
  CK(cudaMalloc(&sp, sizeof(void*)));
  CK(cudaMemcpy(wp, &w, sizeof(void*), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(sp, &wsc, sizeof(void*), cudaMemcpyHostToDevice));
  k::Fp8GemmParams p;
  p.n = n;
  p.k = kk;
  p.a = a;
  p.a_scale = as;
  p.lda = kk;
  p.ld_scale = kk / 128;
  p.w = wp;
  p.w_scale = sp;
  p.c = c;
  p.ldc = n;
  p.max_rows = m;
  p.path = k::Fp8GemmPath::prefill;
  p.prefill_tile_rows = tile_rows;
  p.prefill_mma = mma;
  const float ms = time_ms([&] { CK(k::fp8_gemm(p, s)); }, 3, 20, s);
  CK(cudaFree(a));
  CK(cudaFree(w));
  CK(cudaFree(as));
  CK(cudaFree(wsc));
  CK(cudaFree(c));
  CK(cudaFree(wp));
  CK(cudaFree(sp));
  return 2.0 * m * n * kk / (ms * 1e-3) / 1e12;
}

struct MoeResult {
  std::string label;
  int path = 0, tile_rows = 0, mma = 0, depth = 0, front = 0, decode_kernel = 0;
  bool pdl = true;
  bool shared_stream = false;
  bool early_down = true;
  int decode_fusion = 1;
  bool stream_evict_first = false;
  bool fast_front = false;
  // Session 4's decode GEMM knobs (MoeParams::gate_up_line_copies, down_line_copies).
  bool gate_up_line_copies = false, down_line_copies = false;
  int tokens = 0;
  int distinct_experts = 0;  // routed experts with at least one token, + shared
  double weight_bytes = 0, flops = 0;
  float ms_stream = 0, ms_graph = 0;
  // Graph time per layer when layers follow each other without host gaps: 20 replays launched back to
  // back (one event pair), and one graph holding 8 consecutive layers (PDL between them, as a captured
  // forward would run them), each divided by the count.
  float ms_graph_b2b = 0, ms_graph_layers = 0;
  // Timeline of one graph replay (MoeParams::debug_stamps, %globaltimer), median of 10 replays, in us
  // from the earliest block start: per slot (start first/last, past-wait first/last, end first/last);
  // -1 where the slot's kernel did not run. span_us = last end - first start.
  bool has_timeline = false;
  double timeline[glm5rt::kernels::kMoeStampSlots][6] = {};
  double span_us = 0;
  float stage_ms[7] = {};
  double gbps = 0, tflops = 0, gemm_gbps = 0, gemm_tflops = 0;
};

std::set<std::string> parse_labels(const char* s) {
  std::set<std::string> v;
  std::string cur;
  for (const char* c = s;; ++c) {
    if (*c == ',' || *c == 0) {
      if (!cur.empty()) v.insert(cur);
      cur.clear();
      if (*c == 0) break;
    } else {
      cur += *c;
    }
  }
  return v;
}

const char* const kStampSlotNames[glm5rt::kernels::kMoeStampSlots] = {
    "logits", "front", "gate_up", "swiglu", "down", "combine", "shared_gate_up", "shared_swiglu", "shared_down",
    "logits_staged", "front_phases", "select_phases"};

// ", \"timeline_us\": {...}" for a row with a timeline (slot -> [start first, start last, waited first,
// waited last, end first, end last] in us from the earliest block start), else "".
std::string timeline_json(const MoeResult& r) {
  if (!r.has_timeline) return "";
  std::string out = ", \"span_us\": " + std::to_string(r.span_us) + ", \"timeline_us\": {";
  bool first = true;
  for (int sl = 0; sl < glm5rt::kernels::kMoeStampSlots; ++sl) {
    if (r.timeline[sl][0] < 0) continue;
    char buf[256];
    std::snprintf(buf, sizeof(buf), "%s\"%s\": [%.2f, %.2f, %.2f, %.2f, %.2f, %.2f]", first ? "" : ", ",
                  kStampSlotNames[sl], r.timeline[sl][0], r.timeline[sl][1], r.timeline[sl][2], r.timeline[sl][3],
                  r.timeline[sl][4], r.timeline[sl][5]);
    out += buf;
    first = false;
  }
  return out + "}";
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, commit = "unknown", command;
  std::vector<int> token_counts = {1, 8, 64, 512, 4096};
  std::set<std::string> only_rows;  // --rows a,b,...: only the MoE rows with these labels (empty: all)
  bool gemm_ceilings = true;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) token_counts = parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) only_rows = parse_labels(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-gemm-ceilings")) gemm_ceilings = false;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf("device: %s, %d SMs, L2 %d MB, cc %d.%d\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20, prop.major, prop.minor);

  // ---- ceiling 1: device-to-device copy, bytes read + written ----
  const size_t copy_bytes = size_t(2) << 30;
  void *c0 = nullptr, *c1 = nullptr;
  CK(cudaMalloc(&c0, copy_bytes));
  CK(cudaMalloc(&c1, copy_bytes));
  CK(cudaMemsetAsync(c0, 1, copy_bytes, s));
  const float copy_ms = time_ms([&] { CK(cudaMemcpyAsync(c1, c0, copy_bytes, cudaMemcpyDeviceToDevice, s)); }, 3, 20, s);
  const double copy_gbps = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  CK(cudaFree(c0));
  CK(cudaFree(c1));
  std::printf("copy bandwidth: %.0f GB/s (read + write)\n", copy_gbps);

  // ---- ceiling 2: cuBLASLt ----
  std::vector<LtResult> lts;
  struct Dense {
    int bm, mma;
    double tflops;
  };
  std::vector<Dense> dense = {{64, 1, 0}, {64, 2, 0}, {128, 1, 0}, {128, 2, 0}};
  double ours_dense = 0, mma_fp8 = -1, mma_bf16 = -1;
  if (gemm_ceilings) {
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasLtCreate failed\n");
    return 1;
  }
  const size_t lt_ws_bytes = size_t(64) << 20;
  void* lt_ws = nullptr;
  CK(cudaMalloc(&lt_ws, lt_ws_bytes));
  lts.push_back(lt_gemm(lt, "cublaslt_bf16", CUDA_R_16BF, 0, 8192, 8192, 8192, s, lt_ws, lt_ws_bytes));
  lts.push_back(lt_gemm(lt, "cublaslt_fp8_tensor_scale", CUDA_R_8F_E4M3, 0, 8192, 8192, 8192, s, lt_ws, lt_ws_bytes));
  lts.push_back(lt_gemm(lt, "cublaslt_fp8_block128_scale", CUDA_R_8F_E4M3, 1, 8192, 8192, 8192, s, lt_ws, lt_ws_bytes));
  // The MoE's T=4096 gate_up shape as one dense problem (36864 rows = 4096 tokens x 9 experts).
  lts.push_back(lt_gemm(lt, "cublaslt_fp8_tensor_scale_moe_shape", CUDA_R_8F_E4M3, 0, 4096, 36864, 6144, s, lt_ws, lt_ws_bytes));
  for (const auto& r : lts)
    std::printf("%-40s %5dx%5dx%5d  %8.1f TFLOP/s  %s\n", r.name.c_str(), r.m, r.n, r.k, r.tflops, r.status.c_str());
  // Our prefill kernel, each shape (64/128-row tiles) x tensor-core instruction (1 native FP8 mma,
  // 2 f16 mma after in-register conversion).
  for (auto& d : dense) {
    d.tflops = ours_dense_rate(8192, 8192, 8192, d.bm, d.mma, s);
    std::printf("ours_fp8_prefill bm%-3d %-9s 8192x8192x8192  %8.1f TFLOP/s\n", d.bm, d.mma == 1 ? "fp8-mma" : "f16-mma",
                d.tflops);
  }
  for (const auto& d : dense) ours_dense = std::max(ours_dense, d.tflops);
  mma_fp8 = mma_peak<true>(prop.multiProcessorCount, s);
  mma_bf16 = mma_peak<false>(prop.multiProcessorCount, s);
  std::printf("mma.sync register-only peak: fp8 m16n8k32 %.1f TFLOP/s, bf16 m16n8k16 %.1f TFLOP/s\n", mma_fp8, mma_bf16);
  CK(cudaFree(lt_ws));
  cublasLtDestroy(lt);
  }
  std::fflush(stdout);

  // ---- the MoE layer ----
  const int H = 6144, I = 2048, E = 256, K = 8;
  const size_t gu_bytes = size_t(I) * H, dn_bytes = size_t(H) * I;
  const size_t gu_sc = size_t(I / 128) * (H / 128), dn_sc = size_t(H / 128) * (I / 128);
  const double expert_bytes = 2.0 * gu_bytes + dn_bytes + 4.0 * (2 * gu_sc + dn_sc);
  uint8_t* wq = nullptr;
  float* wsc = nullptr;
  const size_t per_expert_q = 2 * gu_bytes + dn_bytes, per_expert_s = 2 * gu_sc + dn_sc;
  CK(cudaMalloc(&wq, per_expert_q * (E + 1)));
  CK(cudaMalloc(&wsc, per_expert_s * (E + 1) * 4));
  fill_fp8<<<4096, 256, 0, s>>>(wq, per_expert_q * (E + 1), 1);
  fill_f32<<<1024, 256, 0, s>>>(wsc, per_expert_s * (E + 1), 2, 0.5f / 256, 2.0f / 256);
  std::vector<const uint8_t*> gu_w((E + 1) * 2), dn_w(E + 1);
  std::vector<const float*> gu_s((E + 1) * 2), dn_s(E + 1);
  for (int e = 0; e <= E; ++e) {
    uint8_t* base = wq + per_expert_q * e;
    float* sbase = wsc + per_expert_s * e;
    gu_w[2 * e] = base;
    gu_w[2 * e + 1] = base + gu_bytes;
    dn_w[e] = base + 2 * gu_bytes;
    gu_s[2 * e] = sbase;
    gu_s[2 * e + 1] = sbase + gu_sc;
    dn_s[e] = sbase + 2 * gu_sc;
  }
  const uint8_t **d_guw, **d_dnw;
  const float **d_gus, **d_dns;
  CK(cudaMalloc(&d_guw, gu_w.size() * sizeof(void*)));
  CK(cudaMalloc(&d_dnw, dn_w.size() * sizeof(void*)));
  CK(cudaMalloc(&d_gus, gu_s.size() * sizeof(void*)));
  CK(cudaMalloc(&d_dns, dn_s.size() * sizeof(void*)));
  CK(cudaMemcpy(d_guw, gu_w.data(), gu_w.size() * sizeof(void*), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_dnw, dn_w.data(), dn_w.size() * sizeof(void*), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_gus, gu_s.data(), gu_s.size() * sizeof(void*), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_dns, dn_s.data(), dn_s.size() * sizeof(void*), cudaMemcpyHostToDevice));
  __nv_bfloat16* rw = nullptr;
  float* rb = nullptr;
  CK(cudaMalloc(&rw, size_t(E) * H * 2));
  CK(cudaMalloc(&rb, E * 4));
  fill_bf16<<<1024, 256, 0, s>>>(rw, size_t(E) * H, 3, 0.02f);
  fill_f32<<<1, 256, 0, s>>>(rb, E, 4, -0.05f, 0.05f);
  CK(cudaGetLastError());

  std::vector<MoeResult> results;
  cudaEvent_t ev[8];
  for (auto& e : ev) CK(cudaEventCreate(&e));
  cudaStream_t side_stream;
  CK(cudaStreamCreateWithFlags(&side_stream, cudaStreamNonBlocking));
  cudaEvent_t side_ev[2];
  for (auto& e : side_ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  struct Config {
    int tokens, path, tile_rows, mma;
    bool pdl;
    std::string label;
    int depth = 0;
    int front = 0;
    int decode_kernel = 0;
    bool shared_stream = false;  // the shared expert on a second stream (MoeParams::shared_stream)
    bool early_down = glm5rt::kernels::MoeParams{}.early_down;  // the library default unless a row says
    int decode_fusion = glm5rt::kernels::MoeParams{}.decode_fusion;  // likewise (the combine in the down GEMM)
    bool stream_evict_first = glm5rt::kernels::MoeParams{}.stream_evict_first;
    bool fast_front = glm5rt::kernels::MoeParams{}.fast_front;
    bool fast_select = glm5rt::kernels::MoeParams{}.fast_select;
    bool permute_single_pass = glm5rt::kernels::MoeParams{}.permute_single_pass;
    bool gate_up_line_copies = glm5rt::kernels::MoeParams{}.gate_up_line_copies;
    bool down_line_copies = glm5rt::kernels::MoeParams{}.down_line_copies;
  };
  std::vector<Config> configs;
  for (int T : token_counts) configs.push_back({T, 0, 0, 0, true, "default"});
  // Alternatives measured in the same run: without programmatic dependent launch, and the other GEMM
  // paths / tile shapes / mma instructions where the choice matters.
  for (int T : token_counts) configs.push_back({T, 0, 0, 0, false, "no-pdl"});
  for (int T : token_counts) {
    // Decode kernels: by default the cp.async ring where its grid fits one wave (T=1), else the register
    // ring. "reg-ring": the register ring only (depth 3 where that fits one wave, else 2); "depth2" /
    // "depth3": the register ring at a fixed depth ("depth2" = the previous run's default).
    if (T == 1) {
      configs.push_back({T, 0, 0, 0, true, "reg-ring", 0, 0, 1});
      configs.push_back({T, 0, 0, 0, true, "depth2", 2, 0, 1});
    }
    // T=8 and T=64 (several waves): the cp.async ring at depth 3 is now the automatic choice; "reg-ring"
    // keeps the register ring (the previous default there).
    if (T == 8 || T == 64) configs.push_back({T, 0, 0, 0, true, "reg-ring", 0, 0, 1});
    // The shared expert forked onto a second stream before the router (applies up to 32 tokens).
    if (T <= 32) configs.push_back({T, 0, 0, 0, true, "shared-strm", 0, 0, 0, true});
    // The down GEMM released early by SwiGLU, prefetching its first weights into L2 (MoeParams::early_down;
    // off by default since the H200 run of b9c632f: 0.1331 against 0.1304 ms at T=1, 0.575 / 0.571 at T=8).
    if (T <= 64) configs.push_back({T, 0, 0, 0, true, "early-down", 0, 0, 0, false, true});
    // The separate route / permute / quantise kernels instead of the fused small-batch front.
    if (T <= 32) configs.push_back({T, 0, 0, 0, true, "sep-front", 0, 1});
    // Every decode-fusion level explicitly (MoeParams::decode_fusion): "unfused" 0 = the previous default
    // (separate SwiGLU and combine kernels), "fuse-comb" 1 = the combine inside the down GEMM,
    // "fuse-swig" 2 = also SwiGLU in the down GEMM's prologue (up to 2 tokens; at T=8 the same as 1). The
    // "default" row is whichever the library default is; all three rows are here so that the comparison
    // survives flipping it.
    if (T <= 32) {
      const char* names[3] = {"unfused", "fuse-comb", "fuse-swig"};
      for (int level = 0; level < 3; ++level) {
        Config c{T, 0, 0, 0, true, names[level]};
        c.decode_fusion = level;
        configs.push_back(c);
      }
    }
    // Round 5's changes one at a time against the library defaults (MoeParams), and "old" = both off (the
    // previous default): the fast front (cp.async staging + quantisation in the router logits kernel,
    // compact front kernel) and the evict_first weight streams. (The shared expert's L2 prefetch rows of
    // rounds 5-6 went with that option, removed in session 4: measured no gain.)
    if (T <= 16) {
      struct Alt {
        const char* name;
        int fast, ef;  // -1: library default
      };
      const Alt alts[] = {{"old", 0, 0}, {"no-fastfr", 0, -1}, {"no-ef", -1, 0}};
      for (const Alt& a : alts) {
        Config c{T, 0, 0, 0, true, a.name};
        if (a.fast >= 0) c.fast_front = a.fast != 0;
        if (a.ef >= 0) c.stream_evict_first = a.ef != 0;
        configs.push_back(c);
      }
    }
    if (T <= 32) {
      // Round 6: the fast selection (MoeParams::fast_select) on and off, one stream and the shared expert
      // on a second stream.
      const struct {
        const char* name;
        bool on, strm;
      } sels[] = {{"fast-sel", true, false}, {"slow-sel", false, false}, {"fast-sel-shstrm", true, true}};
      for (const auto& fs : sels) {
        Config c{T, 0, 0, 0, true, fs.name};
        c.fast_select = fs.on;
        c.shared_stream = fs.strm;
        configs.push_back(c);
      }
    }
    // Round 7: the permutation's single-pass form (MoeParams::permute_single_pass, the default since
    // f6d2a2e) off ("perm-2p") and on ("perm-1p"). (The front in the router's last block went: removed in
    // session 4, measured slower.)
    if (T <= 16) {
      for (const bool one_pass : {false, true}) {
        Config c{T, 0, 0, 0, true, one_pass ? "perm-1p" : "perm-2p"};
        c.permute_single_pass = one_pass;
        configs.push_back(c);
      }
    }
    // Session 4: the decode GEMMs' knobs, each row setting them explicitly. "lines": whole-line weight copies in both
    // GEMMs (gate_up_line_copies, down_line_copies; the default since the H200 run at 48a277e), "gu-lines" /
    // "dn-lines" in one of them only; "-fc": with decode_fusion 1 (no SwiGLU prologue in the down GEMM);
    // "-shstrm": with the shared expert on a second stream; "s4-base" / "s4-base-shstrm": every session-4 knob
    // at its previous value (no line copies: the defaults before 48a277e). (The 2-warp gate_up rows "gu-w2*" were
    // removed with the 2-warp blocks: no established gain.)
    if (T <= 16) {
      const struct {
        const char* name;
        int gu_lines, dn_lines, fusion;
        bool strm;
      } s4[] = {{"s4-base", 0, 0, -1, false},      {"s4-base-shstrm", 0, 0, -1, true},
                {"gu-lines", 1, 0, -1, false},     {"dn-lines", 0, 1, -1, false},
                {"lines", 1, 1, -1, false},        {"lines-fc", 1, 1, 1, false},
                // Line copies beside the second stream (the combination that stopped with an illegal
                // instruction at 0844c2c; see PERFORMANCE.md "MoE session 4, call 3").
                {"lines-shstrm", 1, 1, -1, true},  {"gu-lines-shstrm", 1, 0, -1, true},
                {"dn-lines-shstrm", 0, 1, -1, true}};
      for (const auto& v : s4) {
        Config c{T, 0, 0, 0, true, v.name};
        if (v.gu_lines >= 0) c.gate_up_line_copies = v.gu_lines != 0;
        if (v.dn_lines >= 0) c.down_line_copies = v.dn_lines != 0;
        if (v.fusion >= 0) c.decode_fusion = v.fusion;
        c.shared_stream = v.strm;
        configs.push_back(c);
      }
    }
    if (T == 64) {
      Config c{T, 0, 0, 0, true, "no-ef"};
      c.stream_evict_first = false;
      configs.push_back(c);
    }
    if (T == 64) configs.push_back({T, 2, 64, 0, true, "prefill64"});
    if (T == 512) {
      configs.push_back({T, 1, 0, 0, true, "decode"});
      configs.push_back({T, 2, 128, 0, true, "prefill128"});
    }
    if (T == 4096) {
      configs.push_back({T, 2, 128, 0, true, "prefill128"});
      configs.push_back({T, 2, 64, 1, true, "p64-fp8mma"});
      configs.push_back({T, 2, 128, 1, true, "p128-fp8mma"});
    }
  }
  if (!only_rows.empty())
    configs.erase(std::remove_if(configs.begin(), configs.end(),
                                 [&](const Config& c) { return only_rows.count(c.label) == 0; }),
                  configs.end());
  for (const Config& cfg : configs) {
    const int T = cfg.tokens;
    MoeResult r;
    r.tokens = T;
    r.label = cfg.label;
    r.path = cfg.path;
    r.tile_rows = cfg.tile_rows;
    r.mma = cfg.mma;
    r.pdl = cfg.pdl;
    r.depth = cfg.depth;
    r.front = cfg.front;
    r.decode_kernel = cfg.decode_kernel;
    r.shared_stream = cfg.shared_stream;
    r.early_down = cfg.early_down;
    r.decode_fusion = cfg.decode_fusion;
    r.stream_evict_first = cfg.stream_evict_first;
    r.fast_front = cfg.fast_front;
    r.gate_up_line_copies = cfg.gate_up_line_copies;
    r.down_line_copies = cfg.down_line_copies;
    __nv_bfloat16 *x = nullptr, *out = nullptr;
    int* ids = nullptr;
    float* wts = nullptr;
    CK(cudaMalloc(&x, size_t(T) * H * 2));
    CK(cudaMalloc(&out, size_t(T) * H * 2));
    CK(cudaMalloc(&ids, size_t(T) * K * 4));
    CK(cudaMalloc(&wts, size_t(T) * K * 4));
    fill_bf16<<<1024, 256, 0, s>>>(x, size_t(T) * H, 100 + T, 1.0f);
    const size_t ws_bytes = k::moe_workspace_size(T, H, I, E, K);
    void* ws = nullptr;
    CK(cudaMalloc(&ws, ws_bytes));
    k::MoeParams p;
    p.tokens = T;
    p.hidden = H;
    p.inter = I;
    p.num_experts = E;
    p.top_k = K;
    p.routed_scaling_factor = 2.5f;
    p.x = x;
    p.router_weight = rw;
    p.router_bias = rb;
    p.gate_up_w = d_guw;
    p.gate_up_s = d_gus;
    p.down_w = d_dnw;
    p.down_s = d_dns;
    p.out = out;
    p.topk_ids_out = ids;
    p.topk_weights_out = wts;
    p.path = cfg.path;
    p.prefill_tile_rows = cfg.tile_rows;
    p.prefill_mma = cfg.mma;
    p.pdl = cfg.pdl;
    p.decode_depth = cfg.depth;
    p.front_path = cfg.front;
    p.decode_kernel = cfg.decode_kernel;
    p.early_down = cfg.early_down;
    p.decode_fusion = cfg.decode_fusion;
    p.stream_evict_first = cfg.stream_evict_first;
    p.fast_front = cfg.fast_front;
    p.fast_select = cfg.fast_select;
    p.permute_single_pass = cfg.permute_single_pass;
    p.gate_up_line_copies = cfg.gate_up_line_copies;
    p.down_line_copies = cfg.down_line_copies;
    if (cfg.shared_stream) {
      p.shared_stream = side_stream;
      p.shared_events[0] = side_ev[0];
      p.shared_events[1] = side_ev[1];
    }
    r.ms_stream = time_ms([&] { CK(k::moe_forward(p, ws, ws_bytes, s)); }, 3, 20, s);
    // Distinct experts actually read.
    std::vector<int> hid(size_t(T) * K);
    CK(cudaMemcpy(hid.data(), ids, hid.size() * 4, cudaMemcpyDeviceToHost));
    r.distinct_experts = static_cast<int>(std::set<int>(hid.begin(), hid.end()).size()) + 1;
    r.weight_bytes = r.distinct_experts * expert_bytes;
    r.flops = 2.0 * T * (K + 1) * 3.0 * H * I;
    // Graph replay: the launch sequence as the runtime would issue it per layer.
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CK(k::moe_forward(p, ws, ws_bytes, s));
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    r.ms_graph = time_ms([&] { CK(cudaGraphLaunch(exec, s)); }, 3, 20, s);
    {
      constexpr int kB2b = 20;
      r.ms_graph_b2b = time_ms([&] { for (int i = 0; i < kB2b; ++i) CK(cudaGraphLaunch(exec, s)); }, 1, 5, s) / kB2b;
      constexpr int kLayers = 8;
      cudaGraph_t g8;
      cudaGraphExec_t e8;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kLayers; ++i) CK(k::moe_forward(p, ws, ws_bytes, s));
      CK(cudaStreamEndCapture(s, &g8));
      CK(cudaGraphInstantiate(&e8, g8, 0));
      r.ms_graph_layers = time_ms([&] { CK(cudaGraphLaunch(e8, s)); }, 2, 10, s) / kLayers;
      CK(cudaGraphExecDestroy(e8));
      CK(cudaGraphDestroy(g8));
    }
    if (T <= 8) {
      // The timeline: a graph of the same layer with the stamps on, replayed 10 times.
      constexpr int kWords = k::kMoeStampSlots * k::kMoeStampWords;
      unsigned long long* d_st = nullptr;
      CK(cudaMalloc(&d_st, sizeof(unsigned long long) * kWords));
      std::vector<unsigned long long> init(kWords), got(kWords);
      for (int i = 0; i < kWords; ++i) init[i] = (i % 2 == 0) ? ~0ull : 0ull;
      k::MoeParams pt = p;
      pt.debug_stamps = d_st;
      cudaGraph_t gt;
      cudaGraphExec_t et;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      CK(k::moe_forward(pt, ws, ws_bytes, s));
      CK(cudaStreamEndCapture(s, &gt));
      CK(cudaGraphInstantiate(&et, gt, 0));
      std::vector<double> vals[k::kMoeStampSlots][6];
      std::vector<double> spans;
      for (int rep = 0; rep < 13; ++rep) {
        CK(cudaMemcpyAsync(d_st, init.data(), sizeof(unsigned long long) * kWords, cudaMemcpyHostToDevice, s));
        CK(cudaGraphLaunch(et, s));
        CK(cudaMemcpyAsync(got.data(), d_st, sizeof(unsigned long long) * kWords, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        if (rep < 3) continue;  // warm-up
        unsigned long long t0 = ~0ull, t1 = 0;
        for (int sl = 0; sl < k::kMoeStampSlots; ++sl) {
          if (got[sl * 6] != ~0ull) t0 = std::min(t0, got[sl * 6]);
          if (got[sl * 6 + 5] != 0) t1 = std::max(t1, got[sl * 6 + 5]);
        }
        spans.push_back(t1 > t0 ? (t1 - t0) * 1e-3 : 0.0);
        for (int sl = 0; sl < k::kMoeStampSlots; ++sl)
          for (int w = 0; w < 6; ++w) {
            const unsigned long long v = got[sl * 6 + w];
            const bool unset = (w % 2 == 0) ? v == ~0ull : v == 0;
            vals[sl][w].push_back(unset ? -1.0 : (static_cast<double>(v) - static_cast<double>(t0)) * 1e-3);
          }
      }
      auto med = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
      };
      r.has_timeline = true;
      r.span_us = med(spans);
      for (int sl = 0; sl < k::kMoeStampSlots; ++sl)
        for (int w = 0; w < 6; ++w) r.timeline[sl][w] = med(vals[sl][w]);
      CK(cudaGraphExecDestroy(et));
      CK(cudaGraphDestroy(gt));
      CK(cudaFree(d_st));
    }
    // Stage breakdown (separate runs with events between stages; median per stage).
    std::vector<float> st[7];
    p.stage_events = ev + 1;
    for (int rep = 0; rep < 10; ++rep) {
      CK(cudaEventRecord(ev[0], s));
      CK(k::moe_forward(p, ws, ws_bytes, s));
      CK(cudaEventSynchronize(ev[7]));
      for (int i = 0; i < 7; ++i) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
        st[i].push_back(ms);
      }
    }
    for (int i = 0; i < 7; ++i) r.stage_ms[i] = median(st[i]);
    const float best = std::min(r.ms_stream, r.ms_graph);
    r.gbps = r.weight_bytes / (best * 1e-3) / 1e9;
    r.tflops = r.flops / (best * 1e-3) / 1e12;
    const float gemm_ms = r.stage_ms[3] + r.stage_ms[5];
    r.gemm_gbps = r.weight_bytes / (gemm_ms * 1e-3) / 1e9;
    r.gemm_tflops = r.flops / (gemm_ms * 1e-3) / 1e12;
    results.push_back(r);
    // One line per row as it finishes (a crash in a later row keeps the earlier figures).
    std::printf("row %-20s T=%-4d ms graph %.4f b2b %.4f layers8 %.4f strm %.4f\n", r.label.c_str(), T, r.ms_graph,
                r.ms_graph_b2b, r.ms_graph_layers, r.ms_stream);
    std::fflush(stdout);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    CK(cudaFree(ws));
    CK(cudaFree(x));
    CK(cudaFree(out));
    CK(cudaFree(ids));
    CK(cudaFree(wts));
  }

  double lt_fp8 = -1, lt_bf16 = -1, lt_fp8_block = -1;
  for (const auto& r : lts) {
    if (r.name == "cublaslt_bf16") lt_bf16 = r.tflops;
    if (r.name == "cublaslt_fp8_tensor_scale") lt_fp8 = r.tflops;
    if (r.name == "cublaslt_fp8_block128_scale") lt_fp8_block = r.tflops;
  }
  const double dense_ceiling = std::max(lt_fp8, lt_bf16);

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f) {
      std::fprintf(f, "{\n  \"benchmark\": \"moe\",\n  \"command\": \"%s\",\n  \"date\": \"%s\",\n  \"card\": \"%s\",\n",
                   command.c_str(), date, prop.name);
      std::fprintf(f, "  \"git_commit\": \"%s\",\n  \"sms\": %d,\n  \"copy_gbps\": %.1f,\n", commit.c_str(),
                   prop.multiProcessorCount, copy_gbps);
      std::fprintf(f, "  \"cublaslt\": [\n");
      for (size_t i = 0; i < lts.size(); ++i)
        std::fprintf(f, "    {\"name\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"tflops\": %.2f, \"status\": \"%s\"}%s\n",
                     lts[i].name.c_str(), lts[i].m, lts[i].n, lts[i].k, lts[i].tflops, lts[i].status.c_str(),
                     i + 1 < lts.size() ? "," : "");
      std::fprintf(f, "  ],\n  \"ours_fp8_prefill_dense_8192_tflops\": {");
      for (size_t i = 0; i < dense.size(); ++i)
        std::fprintf(f, "%s\"bm%d_%s\": %.2f", i ? ", " : "", dense[i].bm, dense[i].mma == 1 ? "fp8mma" : "f16mma",
                     dense[i].tflops);
      std::fprintf(f, "},\n");
      std::fprintf(f, "  \"mma_sync_peak_tflops\": {\"fp8_m16n8k32\": %.2f, \"bf16_m16n8k16\": %.2f},\n", mma_fp8, mma_bf16);
      std::fprintf(f, "  \"moe\": {\"hidden\": %d, \"inter\": %d, \"experts\": %d, \"top_k\": %d, \"shared\": 1, "
                      "\"expert_bytes\": %.0f},\n  \"results\": [\n", H, I, E, K, expert_bytes);
      for (size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        std::fprintf(f,
                     "    {\"config\": \"%s\", \"tokens\": %d, \"experts_read\": %d, \"weight_bytes\": %.0f, \"flops\": %.0f, "
                     "\"ms_stream\": %.4f, \"ms_graph\": %.4f, \"stage_ms\": {\"route\": %.4f, \"permute\": %.4f, "
                     "\"quantize\": %.4f, \"gate_up\": %.4f, \"swiglu\": %.4f, \"down\": %.4f, \"combine\": %.4f}, "
                     "\"weight_gbps\": %.1f, \"tflops\": %.2f, \"gemm_only_gbps\": %.1f, \"gemm_only_tflops\": %.2f, "
                     "\"bw_ratio_vs_copy\": %.3f, \"rate_ratio_vs_cublaslt_fp8\": %.3f, \"rate_ratio_vs_cublaslt_bf16\": %.3f, "
                     "\"pdl\": %s, \"path\": %d, \"tile_rows\": %d, \"prefill_mma\": %d, \"decode_depth\": %d, "
                     "\"decode_kernel\": %d, \"front_path\": %d, \"shared_stream\": %s, \"early_down\": %s, \"decode_fusion\": %d, "
                     "\"stream_evict_first\": %s, \"fast_front\": %s, "
                     "\"gate_up_line_copies\": %s, \"down_line_copies\": %s, "
                     "\"ms_graph_b2b\": %.4f, "
                     "\"ms_graph_layers8\": %.4f%s}%s\n",
                     r.label.c_str(), r.tokens, r.distinct_experts, r.weight_bytes, r.flops, r.ms_stream, r.ms_graph, r.stage_ms[0],
                     r.stage_ms[1], r.stage_ms[2], r.stage_ms[3], r.stage_ms[4], r.stage_ms[5], r.stage_ms[6], r.gbps,
                     r.tflops, r.gemm_gbps, r.gemm_tflops, r.gbps / copy_gbps,
                     dense_ceiling > 0 ? r.tflops / dense_ceiling : -1.0, lt_bf16 > 0 ? r.tflops / lt_bf16 : -1.0,
                     r.pdl ? "true" : "false", r.path, r.tile_rows, r.mma, r.depth, r.decode_kernel, r.front,
                     r.shared_stream ? "true" : "false", r.early_down ? "true" : "false", r.decode_fusion,
                     r.stream_evict_first ? "true" : "false", r.fast_front ? "true" : "false",
                     r.gate_up_line_copies ? "true" : "false", r.down_line_copies ? "true" : "false",
                     r.ms_graph_b2b, r.ms_graph_layers,
                     timeline_json(r).c_str(), i + 1 < results.size() ? "," : "");
      }
      std::fprintf(f, "  ]\n}\n");
      std::fclose(f);
    } else {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
    }
  }

  // Timelines first (the summary table stays last in the output).
  for (const auto& r : results) {
    if (!r.has_timeline) continue;
    std::printf("\ntimeline %s T=%d (us from the first block start; graph span %.1f us, ms graph %.4f, b2b %.4f, "
                "8-layer graph %.4f per layer)\n", r.label.c_str(), r.tokens, r.span_us, r.ms_graph, r.ms_graph_b2b,
                r.ms_graph_layers);
    std::printf("  %-15s %8s %8s %8s %8s %8s %8s\n", "kernel", "start0", "start1", "waited0", "waited1", "end0", "end1");
    for (int sl = 0; sl < k::kMoeStampSlots; ++sl) {
      if (r.timeline[sl][0] < 0) continue;
      std::printf("  %-15s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f\n", kStampSlotNames[sl], r.timeline[sl][0], r.timeline[sl][1],
                  r.timeline[sl][2], r.timeline[sl][3], r.timeline[sl][4], r.timeline[sl][5]);
    }
  }
  std::printf("\nGLM-5 MoE layer on %s (copy %.0f GB/s; cuBLASLt bf16 %.0f, fp8 %.0f, fp8 block-128 %.0f TFLOP/s;"
              " ours dense fp8 best %.0f; mma.sync peak fp8 %.0f bf16 %.0f)\n", prop.name, copy_gbps,
              lt_bf16, lt_fp8, lt_fp8_block, ours_dense, mma_fp8, mma_bf16);
  std::printf("\n%-18s %6s %7s %9s %9s %9s %8s %8s %8s %8s %8s %8s %7s %7s\n", "config", "T", "experts", "MB read", "ms strm",
              "ms graph", "b2b", "layers8", "gate_up", "down", "other", "GB/s", "bw/cpy", "rate/lt");
  (void)0;
  for (const auto& r : results) {
    const float other = r.stage_ms[0] + r.stage_ms[1] + r.stage_ms[2] + r.stage_ms[4] + r.stage_ms[6];
    std::printf("%-18s %6d %7d %9.1f %9.4f %9.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.0f %7.3f %7.3f\n", r.label.c_str(), r.tokens,
                r.distinct_experts, r.weight_bytes / 1e6, r.ms_stream, r.ms_graph, r.ms_graph_b2b, r.ms_graph_layers,
                r.stage_ms[3], r.stage_ms[5], other, r.gbps, r.gbps / copy_gbps,
                dense_ceiling > 0 ? r.tflops / dense_ceiling : -1.0);
  }
  return 0;
}
