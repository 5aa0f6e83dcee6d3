// Shared by the CUDA benchmarks in bench/: a check that stops a benchmark on the first CUDA error (a
// benchmark has nothing to recover; the library itself never exits), the hash that seeds their
// device-side random fills (splitmix64's finaliser: cheap, stateless, good enough to decorrelate inputs),
// the event timer most of them report (median of repeated runs after warm-ups) and its CUDA-graph form, the parser of
// their comma-separated integer options ("--T 1,8,128"), and their JSON's pieces: the date, string escaping, the
// writer of the text.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#define BENCH_CHECK_CUDA(expr)                                                                  \
  do {                                                                                          \
    const cudaError_t e_ = (expr);                                                              \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

namespace glm5rt_bench {

__device__ inline uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.f : v[v.size() / 2];
}

// Median milliseconds of `reps` runs of f on stream s, after `warm` warm-up runs, timed with events.
template <typename F>
float time_ms(F&& f, int warm, int reps, cudaStream_t s) {
  for (int i = 0; i < warm; ++i) f();
  BENCH_CHECK_CUDA(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  BENCH_CHECK_CUDA(cudaEventCreate(&a));
  BENCH_CHECK_CUDA(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    BENCH_CHECK_CUDA(cudaEventRecord(a, s));
    f();
    BENCH_CHECK_CUDA(cudaEventRecord(b, s));
    BENCH_CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  BENCH_CHECK_CUDA(cudaEventDestroy(a));
  BENCH_CHECK_CUDA(cudaEventDestroy(b));
  return median(t);
}

// Median microseconds per call of a CUDA graph of `calls` calls enqueue(i) (i: the call's index) captured on `stream`,
// replayed `reps` times after `warm` replays (the indexer and gather-path benchmarks' graph timing).
template <typename F>
double time_graph_us(cudaStream_t stream, int calls, F&& enqueue, int warm = 3, int reps = 15) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) enqueue(i);
  BENCH_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  BENCH_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  const float ms = time_ms([&] { BENCH_CHECK_CUDA(cudaGraphLaunch(exec, stream)); }, warm, reps, stream);
  BENCH_CHECK_CUDA(cudaGetLastError());
  BENCH_CHECK_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CHECK_CUDA(cudaGraphDestroy(graph));
  return ms * 1e3 / calls;
}

// Random e4m3 codes (never the NaN codes 0x7f / 0xff), limited to |v| <= 2^3 (exponent field <= 9) so that
// sums of products stay moderate.
__global__ inline void fill_fp8(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint32_t r = hash32(seed * 0x9e3779b97f4a7c15ULL + i);
    p[i] = static_cast<uint8_t>((r & 0x80) | ((r >> 8) % 80));
  }
}

// Uniform float32 values in [lo, hi).
__global__ inline void fill_f32(float* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    p[i] = lo + (hi - lo) * (hash32(seed * 0x9e3779b97f4a7c15ULL + i) >> 8) * (1.0f / 16777216.0f);
}

// Writes `text` (a benchmark's JSON) to `path`; false, with a message, when the file cannot be written.
inline bool write_text(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  const bool ok = std::fputs(text.c_str(), f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// The current UTC time as the benchmarks' JSON "date" (2026-12-03T08:24:08Z).
inline std::string utc_now_iso() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

// `s` as the inside of a JSON string (a recorded command line, a card name): quotes and backslashes escaped, newlines
// as \n.
inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (ch == '\n') {
      o += "\\n";
      continue;
    }
    o += ch;
  }
  return o;
}

// "1,8,128" -> {1, 8, 128}; empty entries ("1,,8", a trailing comma) are skipped.
inline std::vector<int> parse_int_list(const char* s) {
  std::vector<int> v;
  std::string cur;
  for (const char* c = s;; ++c) {
    if (*c == ',' || *c == 0) {
      if (!cur.empty()) v.push_back(std::atoi(cur.c_str()));
      cur.clear();
      if (*c == 0) break;
    } else {
      cur += *c;
    }
  }
  return v;
}

}  // namespace glm5rt_bench
