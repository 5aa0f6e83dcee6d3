// Benchmark of the lightning-indexer kernels (scores + top-k, k = 2048) on an H200 or any CUDA GPU.
// Usage: bench_indexer OUT.json [--commit SHA] [--command "how it was run"] [--quick] [--b1] [--int8]
// --int8 (session 3 round 6, alone): batch-1 decode at 1K, 8K, 32K, 128K, launch_indexer and the scores alone
// with KeyFormat::kFp8 against kInt8 over the very same bytes (the two formats share the 132-byte layout),
// alternated 4 times in one process, medians; nothing else runs.
// --b1: batch-1 decode only, contexts 1K, 8K, 32K, 128K, both key formats (round 5: total_old_us / total_clf_us
// = round-4 scores + register select / + cluster select, alternated 4 times at 8K, plus FP8 batch 32 at 8K;
// total_r3_us = launch_indexer with round 3's paths forced, same process). Round 4's select (row_kernel 2)
// and the cluster select's min / max variant (3) were removed in session 4 and are no longer timed.
// Cases: decode batch 1 and 32 at context 1K..200K, prefill 4K x 4K causal, FP8 and bf16 keys. Each case
// replays a CUDA graph of several calls over rotating inputs (different pages and queries, more bytes
// than the L2 holds), so launch overhead and cache reuse stay out; the median of the replays is reported.
// The floor is the bytes that must move (keys once, q, weights, output) over the measured copy bandwidth.
#include "bench/common/bench_cuda.cuh"
#include "kernels/indexer/indexer_internal.hpp"  // launch_topk_cluster_probe (phase timestamps)
#include "kernels/indexer/indexer_params.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ki = glm5rt::kernels::indexer;

#define CHECK_CUDA(x) BENCH_CHECK_CUDA(x)

namespace {

using glm5rt_bench::hash32;
__device__ float uniform_pm1(uint64_t i, uint64_t seed) { return (hash32(i * 0x9E3779B97F4A7C15ULL + seed) >> 8) * (2.f / 16777216.f) - 1.f; }

// Random bytes that decode to finite values: e4m3 without NaN, bf16 in [-1, 1], scales in [0.5, 1.5).
__global__ void fill_e4m3(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint8_t b = hash32(i + seed * 0x1000003ULL) & 0xFF;
    if ((b & 0x7F) == 0x7F) b ^= 0x01;
    p[i] = b;
  }
}
__global__ void fill_bf16(uint16_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float f = uniform_pm1(i, seed);
    uint32_t u = __float_as_uint(f);
    p[i] = static_cast<uint16_t>(u >> 16);
  }
}
__global__ void fill_float(float* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = lo + (uniform_pm1(i, seed) * 0.5f + 0.5f) * (hi - lo);
}
// FP8 pages hold page_size scales after the values; make them positive.
__global__ void fill_fp8_scales(uint8_t* cache, int64_t pages, int page_size, uint64_t seed) {
  const int64_t n = pages * page_size;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t page = i / page_size, off = i % page_size;
    float* s = reinterpret_cast<float*>(cache + page * page_size * ki::kFp8RecordBytes + page_size * ki::kHeadDim);
    s[off] = 0.5f + (uniform_pm1(i, seed) * 0.5f + 0.5f) / 448.f * 448.f;
  }
}

struct Case {
  std::string name;
  ki::KeyFormat fmt;
  int batch;    // decode rows (one sequence each); 0 for prefill
  int context;  // keys per sequence
  int prefill_rows;
};

struct Result {
  Case c;
  int rows = 0, rotations = 0;
  // Round 5: scores (round 4 start-up) + the cluster select (row_kernel 4, first digit fixed at the top 11
  // bits; "clf" in the JSON) against the same scores + round 3's register select (row_kernel 1, the default
  // before round 5), alternated kRepeats times in --b1.
  static constexpr int kRepeats = 4;
  double total_old_us = 0, old_rep[kRepeats] = {};
  double total_clf_us = 0, topk_clf_us = 0, clf_rep[kRepeats] = {};
  // Phase cycles of the cluster select alone, block 0 of row 0, median of 21 launches: prologue, wait, keys
  // loaded, first digit, pass 0, pass 1, pass 2, exchange, stores, exit; passes run.
  double phase_clf[10] = {};
  double passes_clf = 0;
  int repeats = 0;
  double total_r3_us = 0, scores_r3_us = 0;
  double total_us = 0, total_fused_us = 0, total_unfused_us = 0, total_reg_us = 0, total_r1_us = 0, topk_reg_us = 0, scores_us = 0, topk_us = 0, topk_row_us = 0, topk_split_us = 0, bytes = 0, floor_us = 0, flops = 0;
};

using glm5rt_bench::time_graph_us;  // 3 warm-up replays, the median of 15

__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) dst[i] = __ldcs(src + i);
}

// Device-copy ceiling: a streaming copy kernel (a memcpy node in a graph may run on a copy engine,
// which is slower than what the SMs can pull).
double copy_bandwidth_gbps(cudaStream_t stream) {
  const size_t bytes = size_t(1) << 30;
  void *src, *dst;
  CHECK_CUDA(cudaMalloc(&src, bytes));
  CHECK_CUDA(cudaMalloc(&dst, bytes));
  fill_e4m3<<<1024, 256, 0, stream>>>(static_cast<uint8_t*>(src), bytes, 7);
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double us = time_graph_us(stream, 4, [&](int) {
    copy_kernel<<<sms * 8, 512, 0, stream>>>(static_cast<const float4*>(src), static_cast<float4*>(dst), bytes / 16);
  });
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * bytes / (us * 1e-6) / 1e9;  // bytes read + written
}

// The device inputs of one benchmark case: a paged key cache with `rot` rotations, each its own shuffled
// pages, queries and weights (enough rotations that the inputs of one replay exceed the L2 several times,
// at most 512), the rows' sequences and lengths, and the scores, output and top-k workspace. fmt kBf16
// fills bf16 keys and queries; kFp8 and kInt8 (the same 132-byte layout) random bytes that decode to finite
// e4m3, with positive scales. One set-up for the main cases and --int8.
struct Inputs {
  static constexpr int kK = 2048, kPageSize = 64;
  int rows = 0, seqs = 0, context = 0, pages_per_seq = 0, rot = 0, qbytes = 0;
  size_t q_row = 0, ws_bytes = 0;
  int64_t stride = 0;
  double key_bytes = 0;
  uint8_t* cache = nullptr;
  int32_t *tables = nullptr, *row_seq = nullptr, *row_len = nullptr;
  uint8_t* q = nullptr;
  float *q_scale = nullptr, *w = nullptr, *scores = nullptr;
  int32_t* out = nullptr;
  void* ws = nullptr;

  // h_seq / h_len: each row's sequence (< seqs) and visible keys (<= context).
  Inputs(ki::KeyFormat fmt, int num_seqs, int ctx, const std::vector<int32_t>& h_seq, const std::vector<int32_t>& h_len,
         cudaStream_t stream, std::mt19937_64& rng)
      : rows(static_cast<int>(h_seq.size())), seqs(num_seqs), context(ctx) {
    const bool bf16 = fmt == ki::KeyFormat::kBf16;
    const int rec = bf16 ? ki::kBf16RecordBytes : ki::kFp8RecordBytes;
    pages_per_seq = (context + kPageSize - 1) / kPageSize;
    key_bytes = double(seqs) * context * rec;
    rot = std::clamp(static_cast<int>((256e6 + key_bytes - 1) / key_bytes), 1, 512);
    const int64_t pages = int64_t(rot) * seqs * pages_per_seq;
    qbytes = bf16 ? 2 : 1;
    CHECK_CUDA(cudaMalloc(&cache, pages * kPageSize * rec));
    if (bf16) {
      fill_bf16<<<4096, 256, 0, stream>>>(reinterpret_cast<uint16_t*>(cache), pages * kPageSize * rec / 2, rng());
    } else {
      fill_e4m3<<<4096, 256, 0, stream>>>(cache, pages * kPageSize * rec, rng());
      fill_fp8_scales<<<4096, 256, 0, stream>>>(cache, pages, kPageSize, rng());
    }
    std::vector<int32_t> perm(pages);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    CHECK_CUDA(cudaMalloc(&tables, perm.size() * 4));
    CHECK_CUDA(cudaMemcpy(tables, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMalloc(&row_seq, rows * 4));
    CHECK_CUDA(cudaMalloc(&row_len, rows * 4));
    CHECK_CUDA(cudaMemcpy(row_seq, h_seq.data(), rows * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(row_len, h_len.data(), rows * 4, cudaMemcpyHostToDevice));
    q_row = size_t(ki::kHeads) * ki::kHeadDim * qbytes;
    const size_t head_values = size_t(rows) * ki::kHeads * rot;
    CHECK_CUDA(cudaMalloc(&q, q_row * rows * rot));
    CHECK_CUDA(cudaMalloc(&q_scale, head_values * 4));
    CHECK_CUDA(cudaMalloc(&w, head_values * 4));
    if (bf16)
      fill_bf16<<<1024, 256, 0, stream>>>(reinterpret_cast<uint16_t*>(q), q_row * rows * rot / 2, rng());
    else
      fill_e4m3<<<1024, 256, 0, stream>>>(q, q_row * rows * rot, rng());
    fill_float<<<256, 256, 0, stream>>>(q_scale, head_values, rng(), 0.001f, 0.003f);
    fill_float<<<256, 256, 0, stream>>>(w, head_values, rng(), -0.18f, 0.18f);
    stride = ki::indexer_score_stride(context);
    CHECK_CUDA(cudaMalloc(&scores, size_t(rows) * stride * 4));
    CHECK_CUDA(cudaMalloc(&out, size_t(rows) * kK * 4));
    ws_bytes = ki::indexer_topk_workspace_bytes(rows);
    CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
    CHECK_CUDA(ki::clear_indexer_topk_workspace(ws, ws_bytes, stream));  // once; every call leaves it zero
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaGetLastError());
  }
  Inputs(const Inputs&) = delete;
  Inputs& operator=(const Inputs&) = delete;
  ~Inputs() {
    cudaFree(cache);
    cudaFree(tables);
    cudaFree(row_seq);
    cudaFree(row_len);
    cudaFree(q);
    cudaFree(q_scale);
    cudaFree(w);
    cudaFree(scores);
    cudaFree(out);
    cudaFree(ws);
  }

  // Rotation r's scores call (early_pages: ScoreParams::early_pages, -1 default, 0 round 3, 1 round 4).
  ki::ScoreParams params(int r, ki::KeyFormat fmt, int early_pages = -1) const {
    ki::ScoreParams p;
    p.early_pages = early_pages;
    p.rows.num_rows = rows;
    p.rows.row_seq = row_seq;
    p.rows.row_len = row_len;
    p.rows.block_tables = tables + int64_t(r) * seqs * pages_per_seq;
    p.rows.block_table_stride = pages_per_seq;
    p.rows.page_size = kPageSize;
    p.rows.max_row_len = context;
    p.format = fmt;
    p.q = q + q_row * rows * r;
    p.q_scale = q_scale + size_t(rows) * ki::kHeads * r;
    p.weights = w + size_t(rows) * ki::kHeads * r;
    p.key_cache = cache;
    p.scores = scores;
    p.score_stride = stride;
    return p;
  }
  // Rotation r's top-k alone on the scores buffer (split, row_kernel: TopkParams'; -1 choose).
  ki::TopkParams topk_params(int r, int split = -1, int row_kernel = -1) const {
    ki::TopkParams tp;
    tp.rows = params(r, ki::KeyFormat::kFp8).rows;
    tp.k = kK;
    tp.scores = scores;
    tp.score_stride = stride;
    tp.out_slots = out;
    tp.workspace = ws;
    tp.workspace_bytes = ws_bytes;
    tp.split = split;
    tp.row_kernel = row_kernel;
    return tp;
  }
};

Result run_case(const Case& c, double bw_gbps, cudaStream_t stream, std::mt19937_64& rng, bool b1) {
  const int k = Inputs::kK;
  const bool prefill = c.prefill_rows > 0;
  const int seqs = prefill ? 1 : c.batch;
  const int T = prefill ? c.prefill_rows : c.batch;
  std::vector<int32_t> h_seq(T), h_len(T);
  for (int t = 0; t < T; ++t) {
    h_seq[t] = prefill ? 0 : t;
    h_len[t] = prefill ? c.context - T + t + 1 : c.context;
  }
  const Inputs in(c.fmt, seqs, c.context, h_seq, h_len, stream, rng);
  const int rot = in.rot;
  int early_pages = -1;  // of every scores call below: -1 default, 0 round 3, 1 round 4
  auto params = [&](int r) { return in.params(r, c.fmt, early_pages); };
  // One call per rotation, median of the graph replays: launch_indexer_ex (fused, row_kernel as its
  // arguments; -1 -1 = launch_indexer), the scores alone, the top-k alone (split, row_kernel as TopkParams').
  auto time_indexer = [&](int fused, int row_kernel) {
    return time_graph_us(stream, rot, [&](int r) {
      CHECK_CUDA(ki::launch_indexer_ex(params(r), k, in.out, nullptr, in.ws, in.ws_bytes, fused, row_kernel, stream));
    });
  };
  auto time_scores = [&] {
    return time_graph_us(stream, rot, [&](int r) { CHECK_CUDA(ki::launch_indexer_scores(params(r), stream)); });
  };
  auto time_topk = [&](int split, int row_kernel) {
    return time_graph_us(stream, rot, [&](int r) { CHECK_CUDA(ki::launch_indexer_topk(in.topk_params(r, split, row_kernel), stream)); });
  };
  Result res;
  res.c = c;
  res.rows = T;
  res.rotations = rot;
  res.total_us = time_indexer(-1, -1);
  // Round 3's choices forced, whatever the default: the scores prologue (early_pages 0) and, where a
  // one-block select runs, the register select (row_kernel 1).
  const bool reg_case = c.context > k && c.context <= ki::kRegSelectMaxRowLen;
  early_pages = 0;
  res.total_r3_us = time_indexer(-1, reg_case ? 1 : -1);
  res.scores_r3_us = time_scores();
  early_pages = -1;
  // Where the fused kernel can run, the same call with it forced and with it refused (scores kernel +
  // top-k kernel), measured in the same run whatever launch_indexer chose.
  if (ki::indexer_fused_eligible(params(0), in.ws, in.ws_bytes)) {
    res.total_fused_us = time_indexer(1, -1);
    res.total_unfused_us = time_indexer(0, -1);
  }
  // Rows short enough for the register select (round 3): scores + register select (PDL) against scores +
  // the round-1 row kernel, and the register select alone, whatever the planner chose.
  if (c.context <= ki::kRegSelectMaxRowLen) {
    early_pages = 0;  // +reg: round 3 exactly
    res.total_reg_us = time_indexer(0, 1);
    early_pages = 1;  // round 5: the cluster select against the previous default, alternated
    if (reg_case) {
      res.repeats = b1 ? Result::kRepeats : 1;
      for (int i = 0; i < res.repeats; ++i) {
        res.old_rep[i] = time_indexer(0, 1);
        res.clf_rep[i] = time_indexer(0, 4);
      }
      auto median = [](const double* v, int n) {
        std::vector<double> x(v, v + n);
        std::sort(x.begin(), x.end());
        return x[x.size() / 2];
      };
      res.total_old_us = median(res.old_rep, res.repeats);
      res.total_clf_us = median(res.clf_rep, res.repeats);
      if (b1 && c.batch == 1 && c.context <= 8192) {  // phase probe of the cluster select, without PDL
        unsigned long long* d_probe;
        CHECK_CUDA(cudaMalloc(&d_probe, 16 * sizeof(unsigned long long)));
        std::vector<std::vector<double>> d(10);
        double passes = 0;
        const int n = 21;
        for (int i = 0; i < n; ++i) {
          CHECK_CUDA(cudaMemset(d_probe, 0, 16 * sizeof(unsigned long long)));
          CHECK_CUDA(ki::detail::launch_topk_cluster_probe(in.topk_params(i % rot, 0, 4), d_probe, stream));
          unsigned long long h[16];
          CHECK_CUDA(cudaMemcpyAsync(h, d_probe, sizeof h, cudaMemcpyDeviceToHost, stream));
          CHECK_CUDA(cudaStreamSynchronize(stream));
          // phases: 0-1 prologue, 1-2 wait, 2-3 load, 3-4 first digit, passes 4-5, 5-6, 6-7 (0 when not
          // run: the interval then ends at the last pass's stamp), 7-8 exchange, 8-9 stores, 9-10 exit
          unsigned long long last = h[4];
          int np = 0;
          double ph[10] = {double(h[1] - h[0]), double(h[2] - h[1]), double(h[3] - h[2]), double(h[4] - h[3])};
          for (int q = 0; q < 3; ++q) {
            ph[4 + q] = h[5 + q] ? double(h[5 + q] - last) : 0.0;
            if (h[5 + q]) {
              last = h[5 + q];
              ++np;
            }
          }
          ph[7] = double(h[8] - last);
          ph[8] = double(h[9] - h[8]);
          ph[9] = double(h[10] - h[9]);
          for (int q = 0; q < 10; ++q) d[q].push_back(ph[q]);
          passes += np;
        }
        for (int q = 0; q < 10; ++q) {
          std::sort(d[q].begin(), d[q].end());
          res.phase_clf[q] = d[q][n / 2];
        }
        res.passes_clf = passes / n;
        cudaFree(d_probe);
      }
    } else {
      res.total_clf_us = time_indexer(0, 4);
      res.total_old_us = time_indexer(0, 1);
    }
    early_pages = -1;
    res.topk_clf_us = time_topk(0, 4);
    res.total_r1_us = time_indexer(0, 0);
    res.topk_reg_us = time_topk(0, 1);
  }
  res.scores_us = time_scores();
  // Top-k alone, with the automatic choice and with each path forced (the scores of the last rotation):
  // row = the round-1 kernel (the register select is timed as topk_reg_us), split = the split path.
  res.topk_us = time_topk(-1, -1);
  res.topk_row_us = time_topk(0, 0);
  if (!prefill) res.topk_split_us = time_topk(1, -1);
  double visible = 0;
  for (int t = 0; t < T; ++t) visible += h_len[t];
  res.bytes = in.key_bytes + double(T) * (in.q_row + ki::kHeads * 4.0 * (in.qbytes == 1 ? 2 : 1) + k * 4.0);
  res.floor_us = res.bytes / (bw_gbps * 1e9) * 1e6;
  res.flops = visible * ki::kHeads * ki::kHeadDim * 2.0;
  return res;
}

// --int8: FP8 (e4m3) against int8 keys and queries over the same bytes, batch-1 decode at one context.
struct Int8Pair {
  static constexpr int kRepeats = 4;
  int context = 0, rotations = 0;
  double total[2][kRepeats] = {}, scores[2][kRepeats] = {};  // [0] fp8, [1] int8
  double total_med[2] = {}, scores_med[2] = {};
};

Int8Pair run_int8_pair(int context, cudaStream_t stream, std::mt19937_64& rng) {
  const Inputs in(ki::KeyFormat::kFp8, 1, context, {0}, {context}, stream, rng);  // finite e4m3; any int8
  Int8Pair res;
  res.context = context;
  res.rotations = in.rot;
  const ki::KeyFormat fmts[2] = {ki::KeyFormat::kFp8, ki::KeyFormat::kInt8};
  for (int i = 0; i < Int8Pair::kRepeats; ++i)
    for (int f = 0; f < 2; ++f) {
      res.total[f][i] = time_graph_us(stream, in.rot, [&](int r) {
        CHECK_CUDA(ki::launch_indexer(in.params(r, fmts[f]), Inputs::kK, in.out, nullptr, in.ws, in.ws_bytes, stream));
      });
      res.scores[f][i] = time_graph_us(stream, in.rot, [&](int r) { CHECK_CUDA(ki::launch_indexer_scores(in.params(r, fmts[f]), stream)); });
    }
  auto median = [](const double* v, int n) {
    std::vector<double> x(v, v + n);
    std::sort(x.begin(), x.end());
    return 0.5 * (x[(n - 1) / 2] + x[n / 2]);
  };
  for (int f = 0; f < 2; ++f) {
    res.total_med[f] = median(res.total[f], Int8Pair::kRepeats);
    res.scores_med[f] = median(res.scores[f], Int8Pair::kRepeats);
  }
  return res;
}

std::string join_us(const double* v, int n) {
  std::string o;
  char buf[32];
  for (int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.3f", i ? ", " : "", v[i]);
    o += buf;
  }
  return o;
}

using glm5rt_bench::json_escape;

// Opens the JSON output and writes the fields every run shares, up to the opening of its "cases" list
// (extra: more "key": value lines); null (reported) when the file cannot be written.
FILE* open_json(const std::string& path, const char* benchmark, const char* extra, const cudaDeviceProp& prop,
                const char* date, const std::string& commit, const std::string& command, double bw) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::perror(path.c_str());
    return nullptr;
  }
  std::fprintf(f, "{\n  \"benchmark\": \"%s\",\n  \"card\": \"%s\",\n  \"sms\": %d,\n  \"date\": \"%s\",\n  \"git_commit\": \"%s\",\n",
               benchmark, json_escape(prop.name).c_str(), prop.multiProcessorCount, date, json_escape(commit).c_str());
  std::fprintf(f, "  \"command\": \"%s\",\n  \"k\": 2048,\n  \"page_size\": 64,\n%s  \"copy_bandwidth_GBps\": %.1f,\n  \"cases\": [\n",
               json_escape(command).c_str(), extra, bw);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.json [--commit SHA] [--command TEXT] [--quick] [--b1]\n", argv[0]);
    return 2;
  }
  std::string out_path = argv[1], commit = "unknown", command = "bench_indexer";
  bool quick = false, b1 = false, int8 = false;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
    else if (!std::strcmp(argv[i], "--command") && i + 1 < argc) command = argv[++i];
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--b1")) b1 = true;
    else if (!std::strcmp(argv[i], "--int8")) int8 = true;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  std::mt19937_64 rng(std::random_device{}());
  const double bw = copy_bandwidth_gbps(stream);
  std::printf("device %s, %d SMs, copy bandwidth %.0f GB/s (read + write)\n", prop.name, prop.multiProcessorCount, bw);
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  if (int8) {
    std::vector<Int8Pair> pairs;
    for (int ctx : {1024, 8192, 32768, 131072}) pairs.push_back(run_int8_pair(ctx, stream, rng));
    FILE* f = open_json(out_path, "indexer_int8_vs_fp8", "  \"batch\": 1,\n", prop, date, commit, command, bw);
    if (!f) return 1;
    std::printf("\nint8 against FP8 keys + queries, batch-1 decode, same bytes, alternated %d times (us, medians; repeats fp8/int8)\n", Int8Pair::kRepeats);
    std::printf("  %-8s %9s %9s %8s | %10s %10s | %s\n", "context", "fp8 total", "int8 tot", "delta", "fp8 scores", "int8 score", "repeats total fp8/int8");
    for (size_t i = 0; i < pairs.size(); ++i) {
      const Int8Pair& r = pairs[i];
      std::printf("  %-8d %9.2f %9.2f %+8.2f | %10.2f %10.2f |", r.context, r.total_med[0], r.total_med[1], r.total_med[1] - r.total_med[0],
                  r.scores_med[0], r.scores_med[1]);
      for (int j = 0; j < Int8Pair::kRepeats; ++j) std::printf(" %.2f/%.2f", r.total[0][j], r.total[1][j]);
      std::printf("\n");
      std::fprintf(f, "    {\"context\": %d, \"rotations\": %d, \"fp8_total_us\": %.3f, \"int8_total_us\": %.3f, \"fp8_scores_us\": %.3f, "
                      "\"int8_scores_us\": %.3f, \"fp8_total_repeats_us\": [%s], \"int8_total_repeats_us\": [%s], \"fp8_scores_repeats_us\": [%s], "
                      "\"int8_scores_repeats_us\": [%s]}%s\n",
                   r.context, r.rotations, r.total_med[0], r.total_med[1], r.scores_med[0], r.scores_med[1],
                   join_us(r.total[0], Int8Pair::kRepeats).c_str(), join_us(r.total[1], Int8Pair::kRepeats).c_str(),
                   join_us(r.scores[0], Int8Pair::kRepeats).c_str(), join_us(r.scores[1], Int8Pair::kRepeats).c_str(),
                   i + 1 < pairs.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
    std::printf("wrote %s\n", out_path.c_str());
    return 0;
  }

  std::vector<Case> cases;
  const std::vector<int> contexts = quick ? std::vector<int>{8192}
                                    : b1  ? std::vector<int>{1024, 8192, 32768, 131072}
                                          : std::vector<int>{1024, 8192, 32768, 131072, 202752};
  for (ki::KeyFormat fmt : {ki::KeyFormat::kFp8, ki::KeyFormat::kBf16}) {
    const char* f = fmt == ki::KeyFormat::kFp8 ? "fp8" : "bf16";
    for (int batch : {1, 32}) {
      if (b1 && batch != 1) continue;
      for (int ctx : contexts) cases.push_back({std::string("decode_") + f + "_b" + std::to_string(batch) + "_ctx" + std::to_string(ctx), fmt, batch, ctx, 0});
    }
    if (!b1) cases.push_back({std::string("prefill_") + f + "_4096x4096", fmt, 0, 4096, 4096});
    // --b1 also times batch 32 at 8K once (FP8): whether the cluster select should serve more than
    // kClusterSelectMaxRows rows (launch_indexer keeps the register select there).
    if (b1 && fmt == ki::KeyFormat::kFp8) cases.push_back({"decode_fp8_b32_ctx8192", fmt, 32, 8192, 0});
  }
  std::vector<Result> results;
  for (const Case& c : cases) {
    results.push_back(run_case(c, bw, stream, rng, b1));
    const Result& r = results.back();
    std::printf("%-28s total %9.2f us (fused %7.2f unfused %7.2f; +reg %7.2f +r1 %7.2f)  scores %9.2f  topk %9.2f (row %9.2f reg %7.2f split %9.2f)  floor %8.2f  x%.2f\n", c.name.c_str(),
                r.total_us, r.total_fused_us, r.total_unfused_us, r.total_reg_us, r.total_r1_us, r.scores_us, r.topk_us, r.topk_row_us, r.topk_reg_us, r.topk_split_us, r.floor_us, r.total_us / r.floor_us);
    std::printf("%-28s round 3 %8.2f us  default %8.2f us  (scores r3 %7.2f default %7.2f; +reg r3 %7.2f; reg alone %7.2f)\n",
                "", r.total_r3_us, r.total_us, r.scores_r3_us, r.scores_us, r.total_reg_us, r.topk_reg_us);
    if (r.total_clf_us > 0) {
      std::printf("%-28s round 5: old (r4 scores + reg select) %7.2f us, new (r4 scores + cluster select) %7.2f us; cluster select alone %7.2f us; repeats old/new:",
                  "", r.total_old_us, r.total_clf_us, r.topk_clf_us);
      for (int i = 0; i < r.repeats; ++i) std::printf(" %.2f/%.2f", r.old_rep[i], r.clf_rep[i]);
      std::printf("\n");
      const double* ph = r.phase_clf;
      if (ph[2] != 0 || ph[3] != 0)
        std::printf("%-28s phases cluster select (SM cycles, block 0, median of 21, %.1f passes): prologue %.0f wait %.0f load %.0f first-digit %.0f pass0 %.0f pass1 %.0f pass2 %.0f exchange %.0f stores %.0f exit %.0f\n",
                    "", r.passes_clf, ph[0], ph[1], ph[2], ph[3], ph[4], ph[5], ph[6], ph[7], ph[8], ph[9]);
    }
    std::fflush(stdout);
  }
  // Summary last (the device call's output tail): round 3 forced against the default, same process, per case.
  std::printf("\nsummary (us; total = scores + top-k, one call; scores alone r3 / default; register select alone)\n");
  std::printf("  %-28s %8s %8s | %8s %8s | %8s\n", "case", "total r3", "default", "scores3", "scores", "reg");
  for (const Result& r : results)
    std::printf("  %-28s %8.2f %8.2f | %8.2f %8.2f | %8.2f\n", r.c.name.c_str(), r.total_r3_us, r.total_us, r.scores_r3_us,
                r.scores_us, r.topk_reg_us);
  std::printf("\nround 5 summary (us; one call = scores + top-k; old = round-4 scores + register select, the default before round 5;\n"
              "new = round-4 scores + cluster select; medians of the alternated repeats; default = launch_indexer as committed)\n");
  std::printf("  %-26s %7s %7s %7s | %7s %7s | %s\n", "case", "old", "new", "default", "reg", "cl", "repeats old/new");
  for (const Result& r : results) {
    std::printf("  %-26s %7.2f %7.2f %7.2f | %7.2f %7.2f |", r.c.name.c_str(), r.total_old_us, r.total_clf_us, r.total_us,
                r.topk_reg_us, r.topk_clf_us);
    for (int i = 0; i < r.repeats; ++i) std::printf(" %.2f/%.2f", r.old_rep[i], r.clf_rep[i]);
    std::printf("\n");
  }
  for (const Result& r : results) {
    const double* ph = r.phase_clf;
    if (ph[2] == 0 && ph[3] == 0) continue;
    std::printf("  %-26s cl phases (cycles): prologue %.0f wait %.0f load %.0f digit0 %.0f p0 %.0f p1 %.0f p2 %.0f exch %.0f stores %.0f exit %.0f (%.1f passes)\n",
                r.c.name.c_str(), ph[0], ph[1], ph[2], ph[3], ph[4], ph[5], ph[6], ph[7], ph[8], ph[9], r.passes_clf);
  }

  FILE* f = open_json(out_path, "indexer", "", prop, date, commit, command, bw);
  if (!f) return 1;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::fprintf(f,
                 "    {\"name\": \"%s\", \"format\": \"%s\", \"kind\": \"%s\", \"batch\": %d, \"rows\": %d, \"context\": %d, "
                 "\"rotations\": %d, \"total_old_us\": %.3f, \"repeats_old_us\": [%s], "
                 "\"total_clf_us\": %.3f, \"topk_clf_us\": %.3f, \"repeats_clf_us\": [%s], \"phases_clf_cycles\": [%s], \"passes_clf\": %.2f, \"total_r3_us\": %.3f, \"scores_r3_us\": %.3f, \"total_us\": %.3f, \"total_fused_us\": %.3f, \"total_unfused_us\": %.3f, \"total_reg_us\": %.3f, \"total_r1_us\": %.3f, \"topk_reg_us\": %.3f, \"scores_us\": %.3f, \"topk_us\": %.3f, \"topk_row_us\": %.3f, "
                 "\"topk_split_us\": %.3f, \"bytes\": %.0f, "
                 "\"floor_us\": %.3f, \"ratio_to_floor\": %.3f, \"score_tflops\": %.2f}%s\n",
                 r.c.name.c_str(), r.c.fmt == ki::KeyFormat::kFp8 ? "fp8" : "bf16", r.c.prefill_rows ? "prefill" : "decode",
                 r.c.batch, r.rows, r.c.context, r.rotations, r.total_old_us, join_us(r.old_rep, r.repeats).c_str(),
                 r.total_clf_us, r.topk_clf_us, join_us(r.clf_rep, r.repeats).c_str(),
                 join_us(r.phase_clf, r.phase_clf[2] > 0 ? 10 : 0).c_str(), r.passes_clf, r.total_r3_us, r.scores_r3_us, r.total_us, r.total_fused_us, r.total_unfused_us, r.total_reg_us, r.total_r1_us, r.topk_reg_us, r.scores_us, r.topk_us, r.topk_row_us, r.topk_split_us, r.bytes, r.floor_us,
                 r.total_us / r.floor_us, r.flops / (r.scores_us * 1e-6) / 1e12, i + 1 < results.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
