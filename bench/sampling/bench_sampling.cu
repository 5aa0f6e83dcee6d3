// Times the device sampler (kernels/sampling/sampling.h) on rows of GLM-5's vocabulary (154880) of
// random normal logits (sigma 3), batch 1..128, for greedy, the whole vocabulary at temperature 1, top-k
// + top-p, top-k = 2048, top-p alone and a mix with penalty and min-p, with both kernels (round 1 and
// round 2, SampleParams::kernel) in the same run; beside it the time to copy the same rows to pinned host
// memory (the first step of sampling on the host, which then still has to sort).
//
//   bench_sampling [--vocab 154880] [--iters 50] [--kernels 12] [--json sampling.json] [--commit HASH]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/common/bench_cuda.cuh"
#include "kernels/sampling/sampling.h"

namespace {

__global__ void fill_normal(float* x, size_t n, uint64_t seed, float sigma) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float u1 = (glm5rt_bench::hash32(seed * 0x9e3779b97f4a7c15ULL + 2 * i) + 1.0f) * 0x1p-32f;
    const float u2 = glm5rt_bench::hash32(seed * 0x9e3779b97f4a7c15ULL + 2 * i + 1) * 0x1p-32f;
    x[i] = sigma * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
  }
}

struct Setting {
  const char* name;
  float temperature;
  int top_k;
  float top_p, min_p, penalty;
};

}  // namespace

int main(int argc, char** argv) {
  int vocab = 154880, iters = 50;
  std::string which_kernels = "12";
  std::string json = "sampling.json", commit = "unknown";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--vocab") vocab = std::atoi(argv[++i]);
    else if (a == "--iters") iters = std::atoi(argv[++i]);
    else if (a == "--kernels") which_kernels = argv[++i];
    else if (a == "--json") json = argv[++i];
    else if (a == "--commit") commit = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_sampling [--vocab N] [--iters N] [--kernels 1|2|12] [--json FILE] [--commit HASH]\n");
      return 2;
    }
  }
  const Setting settings[] = {
      {"greedy", 0.f, 0, 1.f, 0.f, 1.f},
      {"T=1 whole vocabulary", 1.f, 0, 1.f, 0.f, 1.f},
      {"T=0.8 top_k=50 top_p=0.95", 0.8f, 50, 0.95f, 0.f, 1.f},
      {"T=1 top_k=2048", 1.f, 2048, 1.f, 0.f, 1.f},
      {"T=1 top_p=0.9", 1.f, 0, 0.9f, 0.f, 1.f},
      {"T=0.7 min_p=0.05 pen=1.1/64", 0.7f, 0, 1.f, 0.05f, 1.1f},
  };
  const int batches[] = {1, 8, 32, 128};
  const int max_rows = 128, window = 64;
  cudaDeviceProp prop{};
  BENCH_CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  float* logits;
  BENCH_CHECK_CUDA(cudaMalloc(&logits, size_t(max_rows) * vocab * 4));
  fill_normal<<<1024, 256>>>(logits, size_t(max_rows) * vocab, 7, 3.f);
  std::vector<const float*> ptrs(max_rows);
  for (int r = 0; r < max_rows; ++r) ptrs[r] = logits + size_t(r) * vocab;
  const float** d_ptrs;
  double* d_u;
  int32_t *d_off, *d_win, *d_out;
  BENCH_CHECK_CUDA(cudaMalloc(&d_ptrs, max_rows * sizeof(float*)));
  BENCH_CHECK_CUDA(cudaMemcpy(d_ptrs, ptrs.data(), max_rows * sizeof(float*), cudaMemcpyHostToDevice));
  std::vector<double> u(max_rows);
  for (int r = 0; r < max_rows; ++r) u[r] = (r * 0.6180339887) - std::floor(r * 0.6180339887);
  std::vector<int32_t> off(max_rows + 1), win(size_t(max_rows) * window);
  for (int r = 0; r <= max_rows; ++r) off[r] = r * window;
  for (size_t i = 0; i < win.size(); ++i) win[i] = static_cast<int32_t>((i * 2654435761u) % vocab);
  BENCH_CHECK_CUDA(cudaMalloc(&d_u, max_rows * 8));
  BENCH_CHECK_CUDA(cudaMalloc(&d_off, (max_rows + 1) * 4));
  BENCH_CHECK_CUDA(cudaMalloc(&d_win, win.size() * 4));
  BENCH_CHECK_CUDA(cudaMalloc(&d_out, max_rows * 4));
  BENCH_CHECK_CUDA(cudaMemcpy(d_u, u.data(), max_rows * 8, cudaMemcpyHostToDevice));
  BENCH_CHECK_CUDA(cudaMemcpy(d_off, off.data(), (max_rows + 1) * 4, cudaMemcpyHostToDevice));
  BENCH_CHECK_CUDA(cudaMemcpy(d_win, win.data(), win.size() * 4, cudaMemcpyHostToDevice));
  const size_t ws_bytes = glm5rt::kernels::sampling::sample_workspace_bytes(max_rows, vocab);
  void* ws;
  BENCH_CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
  float* host;
  BENCH_CHECK_CUDA(cudaMallocHost(&host, size_t(max_rows) * vocab * 4));
  cudaEvent_t e0, e1;
  BENCH_CHECK_CUDA(cudaEventCreate(&e0));
  BENCH_CHECK_CUDA(cudaEventCreate(&e1));
  auto time_it = [&](auto&& body) {
    body();  // warm-up
    BENCH_CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < iters; ++i) {
      BENCH_CHECK_CUDA(cudaEventRecord(e0));
      body();
      BENCH_CHECK_CUDA(cudaEventRecord(e1));
      BENCH_CHECK_CUDA(cudaEventSynchronize(e1));
      float ms;
      BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };

  std::ostringstream js;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  js << "{\n  \"bench\": \"sampling\",\n  \"command\": \"bench_sampling --vocab " << vocab << " --iters " << iters
     << "\",\n  \"date\": \"" << date << "\",\n  \"card\": \"" << prop.name << "\",\n  \"commit\": \"" << commit
     << "\",\n  \"vocab\": " << vocab << ",\n  \"results\": [\n";
  std::printf("device sampler, vocab %d, %s, median of %d\n\n%-32s %6s %14s %14s %14s %14s\n", vocab, prop.name, iters,
              "setting", "batch", "round-1 us", "round-2 us", "r2 us per row", "D2H copy us");
  bool first = true;
  for (const Setting& s : settings) {
    for (int B : batches) {
      glm5rt::kernels::sampling::SampleParams p;
      p.num_rows = B;
      p.vocab = vocab;
      p.logits = d_ptrs;
      if (s.penalty != 1.f) {
        p.window = d_win;
        p.window_offsets = d_off;
      }
      p.repetition_penalty = s.penalty;
      p.temperature = s.temperature;
      p.top_k = s.top_k;
      p.top_p = s.top_p;
      p.min_p = s.min_p;
      p.uniforms = d_u;
      p.out_tokens = d_out;
      p.workspace = ws;
      p.workspace_bytes = ws_bytes;
      float us[3] = {-1.f, -1.f, -1.f};
      int32_t tok[3] = {-1, -1, -1};
      for (int kernel = 1; kernel <= 2; ++kernel) {
        if (which_kernels.find(char('0' + kernel)) == std::string::npos) continue;
        p.kernel = kernel;
        us[kernel] = time_it([&] { BENCH_CHECK_CUDA(glm5rt::kernels::sampling::launch_sample_rows(p, nullptr)); });
        BENCH_CHECK_CUDA(cudaMemcpy(&tok[kernel], d_out, 4, cudaMemcpyDeviceToHost));
      }
      const float copy_us = time_it([&] {
        BENCH_CHECK_CUDA(cudaMemcpyAsync(host, logits, size_t(B) * vocab * 4, cudaMemcpyDeviceToHost, nullptr));
      });
      // Both kernels must agree on row 0's token (the tests compare every draw with sample_token).
      const bool agree = us[1] < 0.f || us[2] < 0.f || tok[1] == tok[2];
      std::printf("%-32s %6d %14.1f %14.1f %14.2f %14.1f%s\n", s.name, B, us[1], us[2], us[2] / B, copy_us,
                  agree ? "" : "  TOKENS DIFFER");
      for (int kernel = 1; kernel <= 2; ++kernel) {
        if (us[kernel] < 0.f) continue;
        js << (first ? "" : ",\n") << "    {\"setting\": \"" << s.name << "\", \"kernel\": \"v" << kernel
           << "\", \"batch\": " << B << ", \"sampler_us\": " << us[kernel] << ", \"d2h_copy_us\": " << copy_us
           << ", \"row0_token\": " << tok[kernel] << "}";
        first = false;
      }
    }
  }
  js << "\n  ]\n}\n";
  std::ofstream(json) << js.str();
  std::printf("\nwrote %s\n", json.c_str());
  return 0;
}
