// Indexer kernels against CPU references: exact top-k (ties included) on identical float32 scores,
// scores against a double-precision reference on the same quantized inputs, and recall of the true
// float32 top-k through the bf16, FP8 and int8 paths (int8: >= 0.99). Inputs are fresh random data every
// run (seed printed).
#include "tests/gpu/indexer_reference.hpp"

#include "kernels/indexer/indexer_select.cuh"

#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

// Printed whether the test passes or not (doctest's MESSAGE shows only with failures).
#define REPORT(x)                           \
  do {                                      \
    std::ostringstream o_;                  \
    o_ << x;                                \
    std::printf("%s\n", o_.str().c_str()); \
    MESSAGE(o_.str());                      \
  } while (0)

namespace {

using namespace glm5rt::indexer_test;
namespace ki = glm5rt::kernels::indexer;

#define CUDA_OK(expr)                                                      \
  do {                                                                     \
    const cudaError_t err_ = (expr);                                       \
    REQUIRE_MESSAGE(err_ == cudaSuccess, #expr << ": " << cudaGetErrorString(err_)); \
  } while (0)

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) { CUDA_OK(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T))); }
  DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    CUDA_OK(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<T> download() const {
    std::vector<T> host(count);
    CUDA_OK(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  void fill_bytes(int value) { CUDA_OK(cudaMemset(ptr, value, std::max<size_t>(count, 1) * sizeof(T))); }
};

std::mt19937_64 fresh_rng(const char* what) {
  const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  REPORT(what << ": seed " << seed);
  return std::mt19937_64(seed);
}

// Random block tables (shuffled pages) for rows that each own a sequence.
struct Tables {
  int page_size = 64, stride = 0;
  std::vector<int32_t> tables;
  Tables(const std::vector<int32_t>& lens, std::mt19937_64& rng, int page_size_ = 64) : page_size(page_size_) {
    int max_pages = 1, total = 0;
    for (int n : lens) {
      max_pages = std::max(max_pages, (n + page_size - 1) / page_size);
      total += (n + page_size - 1) / page_size;
    }
    stride = max_pages;
    std::vector<int32_t> perm(total + 5);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    tables.assign(lens.size() * stride, 0);
    int next = 0;
    for (size_t s = 0; s < lens.size(); ++s)
      for (int pg = 0; pg < (lens[s] + page_size - 1) / page_size; ++pg) tables[s * stride + pg] = perm[next++];
  }
  int32_t slot(int seq, int pos) const { return tables[seq * stride + pos / page_size] * page_size + pos % page_size; }
};

// Runs launch_indexer_topk on host score rows and checks each row's set against the exact reference.
void check_topk_rows_path(const std::vector<std::vector<float>>& rows_scores, int k, std::mt19937_64& rng, int split,
                          int row_kernel = -1, int page_size = 64) {
  const int T = static_cast<int>(rows_scores.size());
  std::vector<int32_t> lens(T), seqs(T);
  int max_len = 0;
  for (int t = 0; t < T; ++t) {
    lens[t] = static_cast<int32_t>(rows_scores[t].size());
    seqs[t] = t;
    max_len = std::max(max_len, lens[t]);
  }
  const int64_t stride = ki::indexer_score_stride(max_len) + 4;  // slack that must never be read
  std::vector<float> scores(static_cast<size_t>(T) * stride, std::nanf(""));  // NaN past each row's end
  for (int t = 0; t < T; ++t) std::copy(rows_scores[t].begin(), rows_scores[t].end(), scores.begin() + t * stride);
  Tables tables(lens, rng, page_size);
  DeviceBuffer<float> d_scores(scores);
  DeviceBuffer<int32_t> d_lens(lens), d_seqs(seqs), d_tables(tables.tables);
  DeviceBuffer<int32_t> d_out(static_cast<size_t>(T) * k);
  DeviceBuffer<float> d_out_scores(static_cast<size_t>(T) * k);
  d_out.fill_bytes(0x7B);         // poison
  d_out_scores.fill_bytes(0xFF);  // NaN poison

  ki::TopkParams p;
  p.rows.num_rows = T;
  p.rows.row_seq = d_seqs.ptr;
  p.rows.row_len = d_lens.ptr;
  p.rows.block_tables = d_tables.ptr;
  p.rows.block_table_stride = tables.stride;
  p.rows.page_size = tables.page_size;
  p.rows.max_row_len = max_len;
  p.k = k;
  p.scores = d_scores.ptr;
  p.score_stride = stride;
  p.out_slots = d_out.ptr;
  p.out_scores = d_out_scores.ptr;
  DeviceBuffer<uint8_t> workspace(ki::indexer_topk_workspace_bytes(T));
  workspace.fill_bytes(0x5C);  // garbage past the header must not matter
  CUDA_OK(ki::clear_indexer_topk_workspace(workspace.ptr, static_cast<size_t>(T) * ki::detail::kHeaderWords * 4, nullptr));
  p.workspace = workspace.ptr;
  p.workspace_bytes = workspace.count;
  p.split = split;
  p.row_kernel = row_kernel;
  // Twice on the same workspace: each call must leave the header zero for the next (no clearing per call).
  CUDA_OK(ki::launch_indexer_topk(p, nullptr));
  CUDA_OK(ki::launch_indexer_topk(p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto out = d_out.download();
  const auto out_scores = d_out_scores.download();
  {
    const auto ws = workspace.download();
    bool header_zero = true;
    for (size_t i = 0; i < static_cast<size_t>(T) * ki::detail::kHeaderWords * 4; ++i) header_zero &= ws[i] == 0;
    CHECK_MESSAGE(header_zero, "the top-k workspace header is not zero after the call");
  }
  for (int t = 0; t < T; ++t) {
    const auto ref = ref_topk_positions(rows_scores[t].data(), lens[t], k);
    std::multiset<int32_t> want, got;
    for (int pos : ref) want.insert(tables.slot(t, pos));
    int padding = 0;
    bool scores_ok = true;
    std::map<int32_t, int> pos_of_slot;  // the reference positions by slot (a linear search per entry was O(k^2))
    for (int pos2 : ref) pos_of_slot.emplace(tables.slot(t, pos2), pos2);
    for (int i = 0; i < k; ++i) {
      const int32_t s = out[static_cast<size_t>(t) * k + i];
      const float sc = out_scores[static_cast<size_t>(t) * k + i];
      if (s == -1) {
        ++padding;
        scores_ok &= std::isinf(sc) && sc < 0;
        continue;
      }
      got.insert(s);
      // the score returned must be the row's score at that slot's position
      const auto found = pos_of_slot.find(s);
      const int pos = found == pos_of_slot.end() ? -1 : found->second;
      scores_ok &= pos >= 0 && !std::isnan(sc) && ki::detail::order_key(sc) == ki::detail::order_key(rows_scores[t][pos]);
    }
    INFO("row " << t << " len " << lens[t] << " k " << k << " page size " << page_size
                << (split == 1 ? " (split path)" : row_kernel == 1 ? " (register select)"
                                   : row_kernel == 4 ? " (cluster select)" : " (one block per row)"));
    CHECK(padding == std::max(0, k - lens[t]));
    CHECK(got == want);
    CHECK(scores_ok);
  }
}

// Both top-k paths: one block per row, and the split (histogram, filter, finish) path.
void check_topk_rows(const std::vector<std::vector<float>>& rows_scores, int k, std::mt19937_64& rng) {
  check_topk_rows_path(rows_scores, k, rng, 0);
  check_topk_rows_path(rows_scores, k, rng, 1);
}

// The register select (one block per row, rows of at most 16384 keys in registers, round 3: row_kernel 1)
// and round 5's cluster select (one cluster of 8 blocks per row, first digit fixed at the top 11 bits:
// row_kernel 4) on the same rows. (Round 4's select, 2, and the cluster select with a min / max first
// digit, 3, were removed in session 4.)
void check_topk_rows_reg(const std::vector<std::vector<float>>& rows_scores, int k, std::mt19937_64& rng, int page_size = 64) {
  check_topk_rows_path(rows_scores, k, rng, 0, 1, page_size);
  check_topk_rows_path(rows_scores, k, rng, 0, 4, page_size);
}

}  // namespace

TEST_CASE("indexer register select equals the CPU reference exactly (rows up to 16K, ties, page tables)") {
  auto rng = fresh_rng("register select");
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> small(0, 15);
  auto random_row = [&](int n) {
    std::vector<float> r(n);
    for (auto& v : r) v = normal(rng);
    return r;
  };
  SUBCASE("random rows: 8K and 16K keys, each register width (4K, 8K, 16K rows per launch), k = 2048") {
    // One launch per width: the kernel's width follows the launch's longest row.
    for (int width : {4096, 8192, 16384}) {
      std::vector<std::vector<float>> rows;
      for (int n : {1, 2, 100, 2047, 2048, 2049, 3000, width - 1, width}) rows.push_back(random_row(n));
      if (width >= 8192) rows.push_back(random_row(8192));
      if (width == 16384) rows.push_back(random_row(12345));
      check_topk_rows_reg(rows, 2048, rng);
    }
  }
  SUBCASE("scores of one sign (narrow first digit), positive and negative, and concentrated rows") {
    std::vector<std::vector<float>> rows;
    for (int n : {8192, 16384}) {
      std::vector<float> r(n);
      for (auto& v : r) v = std::fabs(normal(rng));
      rows.push_back(r);
      for (auto& v : r) v = -std::fabs(normal(rng)) * 1e-20f;
      rows.push_back(r);
      for (auto& v : r) v = 10.f + 1e-3f * normal(rng);
      rows.push_back(r);
      for (auto& v : r) v = 1.f + 1e-7f * static_cast<float>(small(rng));  // a few ulps apart
      rows.push_back(r);
    }
    check_topk_rows_reg(rows, 2048, rng);
  }
  SUBCASE("ties: 16 distinct values, zeros of both signs, all-equal rows, a single top value") {
    std::vector<std::vector<float>> rows;
    for (int n : {3000, 8192, 16384}) {
      std::vector<float> r(n);
      for (auto& v : r) v = static_cast<float>(small(rng)) * 0.25f;
      rows.push_back(r);
    }
    std::vector<float> zeros(16384);
    for (auto& v : zeros) v = (small(rng) & 1) ? 0.f : -0.f;
    rows.push_back(zeros);
    rows.push_back(std::vector<float>(10000, 1.5f));
    rows.push_back(std::vector<float>(16384, -3.0f));
    std::vector<float> one_top(8192, 0.5f);
    one_top[5000] = 2.f;  // the k-th key is one of 8191 equal ones
    rows.push_back(one_top);
    std::vector<float> extremes = random_row(9000);
    extremes[1] = 3e38f;
    extremes[2] = -3e38f;
    extremes[3] = 1e-40f;  // subnormal
    rows.push_back(extremes);
    check_topk_rows_reg(rows, 2048, rng);
  }
  SUBCASE("random page tables with other page sizes (power of two or not, past the staged table)") {
    std::vector<std::vector<float>> rows;
    for (int n : {700, 2049, 8192, 16384}) rows.push_back(random_row(n));
    std::vector<float> ties(16384);
    for (auto& v : ties) v = static_cast<float>(small(rng));
    rows.push_back(ties);
    for (int page_size : {1, 16, 48, 64, 100}) check_topk_rows_reg(rows, 2048, rng, page_size);
  }
  SUBCASE("rows of at most 8K keys (the 4K- and 8K-wide kernels): the k-th key at the edge of a sign") {
    // Every shape within 8K (the narrower register widths; the cluster select's 256-thread blocks): rows
    // with k - 1, k, k + 1 keys >= 0 (the k-th key on either side of zero), distinct and tied, both
    // zeros, one sign only. (Written for round 4's sign split, removed in session 4; kept as edge cases.)
    const int k = 2048;
    std::vector<std::vector<float>> rows;
    for (int n : {3000, 8192}) {
      for (int m : {0, 1, k - 1, k, k + 1, n - 1, n}) {
        std::vector<float> r(n), t(n);
        for (int i = 0; i < n; ++i) {
          r[i] = i < m ? std::fabs(normal(rng)) : -std::fabs(normal(rng)) - 1e-3f;
          t[i] = i < m ? ((small(rng) & 1) ? 0.f : 1.f) : ((small(rng) & 1) ? -1.f : -2.f);
        }
        std::shuffle(r.begin(), r.end(), rng);
        std::shuffle(t.begin(), t.end(), rng);
        rows.push_back(r);
        rows.push_back(t);
      }
      std::vector<float> z(n);
      for (auto& v : z) v = (small(rng) & 1) ? 0.f : -0.f;
      rows.push_back(z);
      std::vector<float> zm(n);
      for (auto& v : zm) v = (small(rng) & 3) ? ((small(rng) & 1) ? 0.f : -0.f) : -1e-30f;
      rows.push_back(zm);
      rows.push_back(std::vector<float>(n, -3.f));
      std::vector<float> one_top(n, -0.5f);
      one_top[n / 2] = 2.f;
      rows.push_back(one_top);
      std::vector<float> extremes = random_row(n);
      extremes[1] = 3e38f;
      extremes[2] = -3e38f;
      extremes[3] = 1e-40f;
      extremes[4] = -1e-40f;
      rows.push_back(extremes);
      for (auto& v : one_top) v = 1.f + 1e-7f * static_cast<float>(small(rng));  // a few ulps apart, one sign
      rows.push_back(one_top);
    }
    for (int n : {1, 700, 2048, 2049}) rows.push_back(random_row(n));
    check_topk_rows_reg(rows, k, rng);
    std::vector<std::vector<float>> rows4;  // the same shapes in a launch of the 4K-wide kernel
    for (const auto& r : rows)
      if (r.size() <= 4096) rows4.push_back(r);
    check_topk_rows_reg(rows4, k, rng);
    for (int page_size : {1, 16, 100}) check_topk_rows_reg(rows, k, rng, page_size);
    for (int kk : {1, 100, 4096}) check_topk_rows_reg(rows, kk, rng);
  }
  SUBCASE("other k: 1, 100, 4096") {
    std::vector<std::vector<float>> rows;
    for (int n : {1, 4095, 4097, 16384}) rows.push_back(random_row(n));
    std::vector<float> r(5000);
    for (auto& v : r) v = static_cast<float>(small(rng));
    rows.push_back(r);
    for (int k : {1, 100, 4096}) check_topk_rows_reg(rows, k, rng);
  }
}

TEST_CASE("indexer top-k equals the CPU reference exactly on identical float32 scores (ties included)") {
  auto rng = fresh_rng("topk exact");
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> small(0, 15);
  auto random_row = [&](int n) {
    std::vector<float> r(n);
    for (auto& v : r) v = normal(rng);
    return r;
  };
  SUBCASE("random rows of many lengths, k = 2048") {
    std::vector<std::vector<float>> rows;
    for (int n : {1, 2, 100, 2047, 2048, 2049, 5000, 65536, 202752}) rows.push_back(random_row(n));
    check_topk_rows(rows, 2048, rng);
  }
  SUBCASE("heavy ties: 16 distinct values, zeros of both signs, all-equal rows") {
    std::vector<std::vector<float>> rows;
    for (int n : {3000, 50000, 202752}) {
      std::vector<float> r(n);
      for (auto& v : r) v = static_cast<float>(small(rng)) * 0.25f;
      rows.push_back(r);
    }
    std::vector<float> zeros(30000);
    for (auto& v : zeros) v = (small(rng) & 1) ? 0.f : -0.f;
    rows.push_back(zeros);
    rows.push_back(std::vector<float>(10000, 1.5f));
    rows.push_back(std::vector<float>(202752, -3.0f));  // candidates overflow shared memory
    check_topk_rows(rows, 2048, rng);
  }
  SUBCASE("concentrated scores (top digit bin overflows) and negative scores") {
    std::vector<std::vector<float>> rows;
    for (int n : {20000, 150000}) {
      std::vector<float> r(n);
      for (auto& v : r) v = 10.f + 1e-3f * normal(rng);
      rows.push_back(r);
      for (auto& v : r) v = -std::fabs(normal(rng)) * 1e-20f;
      rows.push_back(r);
    }
    check_topk_rows(rows, 2048, rng);
  }
  SUBCASE("many rows of mixed lengths and distributions") {
    std::vector<std::vector<float>> rows;
    std::uniform_int_distribution<int> length(1, 40000);
    for (int t = 0; t < 80; ++t) {
      std::vector<float> r(length(rng));
      for (auto& v : r) v = t % 3 == 0 ? static_cast<float>(small(rng)) : t % 3 == 1 ? normal(rng) : 5.f + 1e-4f * normal(rng);
      rows.push_back(r);
    }
    check_topk_rows(rows, 2048, rng);
  }
  SUBCASE("other k: 1, 100, 4096") {
    std::vector<std::vector<float>> rows;
    for (int n : {1, 4095, 4097, 30000}) rows.push_back(random_row(n));
    for (int n : {5000}) {
      std::vector<float> r(n);
      for (auto& v : r) v = static_cast<float>(small(rng));
      rows.push_back(r);
    }
    for (int k : {1, 100, 4096}) check_topk_rows(rows, k, rng);
  }
}

TEST_CASE("indexer top-k rejects bad arguments with cudaErrorInvalidValue and removed paths with cudaErrorNotSupported") {
  ki::TopkParams p;
  p.rows.num_rows = 1;
  int32_t dummy_i = 0;
  float dummy_f = 0;
  p.rows.row_seq = p.rows.row_len = p.rows.block_tables = &dummy_i;
  p.scores = &dummy_f;
  p.out_slots = &dummy_i;
  p.score_stride = 4;
  p.k = 0;
  CHECK(ki::launch_indexer_topk(p, nullptr) == cudaErrorInvalidValue);
  p.k = ki::kMaxTopK + 1;
  CHECK(ki::launch_indexer_topk(p, nullptr) == cudaErrorInvalidValue);
  p.k = 16;
  p.split = 1;  // the split path without a workspace
  CHECK(ki::launch_indexer_topk(p, nullptr) == cudaErrorInvalidValue);
  p.split = 0;
  p.row_kernel = 1;  // the register select for rows longer than it holds
  p.rows.max_row_len = ki::kRegSelectMaxRowLen + 1;
  p.score_stride = ki::kRegSelectMaxRowLen + 4;
  CHECK(ki::launch_indexer_topk(p, nullptr) == cudaErrorInvalidValue);
  p.row_kernel = 4;  // round 5's cluster select: same limit
  CHECK(ki::launch_indexer_topk(p, nullptr) == cudaErrorInvalidValue);
  p.row_kernel = 5;
  p.rows.max_row_len = 4;
  p.score_stride = 4;
  CHECK(ki::launch_indexer_topk(p, nullptr) == cudaErrorInvalidValue);
  // Removed paths (round 4's select, the cluster select with a min / max first digit): a clear status on
  // otherwise valid arguments, through both entry points, and nothing launched.
  for (int removed : {ki::kRowKernelRemovedRound4, ki::kRowKernelRemovedClusterMinMax}) {
    CAPTURE(removed);
    p.row_kernel = removed;
    CHECK(ki::launch_indexer_topk(p, nullptr) == cudaErrorNotSupported);
    ki::ScoreParams rsp;
    rsp.rows = p.rows;
    CHECK(ki::launch_indexer_ex(rsp, p.k, &dummy_i, nullptr, nullptr, 0, 0, removed, nullptr) == cudaErrorNotSupported);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
  p.row_kernel = -1;
  ki::ScoreParams sp;
  sp.rows.num_rows = 1;
  sp.rows.max_row_len = 8;
  CHECK(ki::launch_indexer_scores(sp, nullptr) == cudaErrorInvalidValue);  // null pointers
  sp.early_pages = 2;
  CHECK(ki::launch_indexer_scores(sp, nullptr) == cudaErrorInvalidValue);
}

namespace {

struct DeviceProblem {
  DeviceBuffer<uint8_t> cache, q;
  DeviceBuffer<float> q_scale, w;
  DeviceBuffer<int32_t> seqs, lens, tables;
  int64_t stride;
  DeviceBuffer<float> scores;
  int early_pages = -1;  // ScoreParams::early_pages of every call
  explicit DeviceProblem(const Problem& p)
      : cache(p.cache), q(p.q), q_scale(p.q_scale), w(p.w), seqs(p.row_seq), lens(p.row_len), tables(p.block_tables),
        stride(ki::indexer_score_stride(p.max_row_len())), scores(static_cast<size_t>(p.rows()) * stride) {
    scores.fill_bytes(0xFF);  // NaN poison
  }
  ki::ScoreParams params(const Problem& p) const {
    ki::ScoreParams sp;
    sp.rows.num_rows = p.rows();
    sp.rows.row_seq = seqs.ptr;
    sp.rows.row_len = lens.ptr;
    sp.rows.block_tables = tables.ptr;
    sp.rows.block_table_stride = p.table_stride;
    sp.rows.page_size = p.page_size;
    sp.rows.max_row_len = p.max_row_len();
    sp.format = p.fmt;
    sp.q = q.ptr;
    sp.q_scale = q_scale.ptr;
    sp.weights = w.ptr;
    sp.key_cache = cache.ptr;
    sp.scores = scores.ptr;
    sp.score_stride = stride;
    sp.early_pages = early_pages;
    return sp;
  }
};

// GPU scores vs the double reference on the same quantized values, with the round-3 prologue
// (early_pages 0) and round 4's (1): both must also give bit-identical scores. Returns the relative L2 error.
double check_scores(const Problem& p, double max_rel_l2) {
  DeviceProblem d(p);
  d.early_pages = 0;
  CUDA_OK(ki::launch_indexer_scores(d.params(p), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto scores_r3 = d.scores.download();
  d.scores.fill_bytes(0xFF);
  d.early_pages = 1;
  CUDA_OK(ki::launch_indexer_scores(d.params(p), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto scores = d.scores.download();
  bool identical = true;
  for (int t = 0; t < p.rows(); ++t)
    for (int j = 0; j < p.row_len[t]; ++j)
      identical &= std::memcmp(&scores[static_cast<size_t>(t) * d.stride + j], &scores_r3[static_cast<size_t>(t) * d.stride + j], 4) == 0;
  CHECK_MESSAGE(identical, "scores with early_pages 1 differ from early_pages 0");
  double err2 = 0, ref2 = 0;
  bool finite = true;
  for (int t = 0; t < p.rows(); ++t)
    for (int j = 0; j < p.row_len[t]; ++j) {
      const double ref = ref_score(p, t, j, false);
      const float got = scores[static_cast<size_t>(t) * d.stride + j];
      finite &= std::isfinite(got);
      err2 += (got - ref) * (got - ref);
      ref2 += ref * ref;
    }
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
  CHECK(finite);
  CHECK(rel <= max_rel_l2);
  return rel;
}

const char* fmt_name(KeyFormat f) { return f == KeyFormat::kBf16 ? "bf16" : f == KeyFormat::kInt8 ? "int8" : "fp8"; }
// A run_pipeline label: the format's name, then what.
std::string label(KeyFormat f, const char* what) { return std::string(fmt_name(f)) + " " + what; }

}  // namespace

TEST_CASE("indexer scores match the double reference on the same quantized inputs") {
  auto rng = fresh_rng("scores");
  for (KeyFormat fmt : {KeyFormat::kBf16, KeyFormat::kFp8, KeyFormat::kInt8}) {
    // H200 (sm_90): 1.5e-7 (bf16) and 9e-8 (FP8) measured. FP8 keeps headroom for native e4m3 MMAs
    // (SM120), whose accumulation precision was not measured here. int8 sums are exact in int32, only
    // the float epilogue rounds.
    const double tol = fmt == KeyFormat::kFp8 ? 1e-3 : 1e-5;
    SUBCASE("decode rows of several sequences and lengths") {
      const Problem p = make_problem(fmt, {1, 63, 64, 1000, 5000}, {0, 1, 2, 3, 4, 4}, {1, 63, 64, 1000, 5000, 4321}, rng);
      const double rel = check_scores(p, tol);
      REPORT(fmt_name(fmt) << " decode scores rel L2 error " << rel);
    }
    SUBCASE("long decode rows, and 64 rows whose blocks walk several chunks (page-id prefetch)") {
      const Problem p = make_problem(fmt, {20000, 50000}, {0, 1}, {20000, 50000}, rng);
      const double rel = check_scores(p, tol);
      REPORT(fmt_name(fmt) << " long decode scores rel L2 error " << rel);
      std::vector<int> keys;
      std::vector<int32_t> seqs, lens;
      std::uniform_int_distribution<int> length(1500, 4000);
      for (int t = 0; t < 64; ++t) {
        keys.push_back(length(rng));
        seqs.push_back(t);
        lens.push_back(keys.back());
      }
      const Problem many = make_problem(fmt, keys, seqs, lens, rng, 32);
      const double rel_many = check_scores(many, tol);
      REPORT(fmt_name(fmt) << " 64-row decode scores rel L2 error " << rel_many);
    }
    SUBCASE("prefill chunk, causal, two sequences sharing row groups") {
      std::vector<int32_t> seqs, lens;
      for (int i = 0; i < 150; ++i) seqs.push_back(0), lens.push_back(200 + i + 1);   // rows at positions 200..349
      for (int i = 0; i < 151; ++i) seqs.push_back(1), lens.push_back(i + 1);         // a fresh prompt
      const Problem p = make_problem(fmt, {350, 151}, seqs, lens, rng, 16);
      const double rel = check_scores(p, tol);
      REPORT(fmt_name(fmt) << " prefill scores rel L2 error " << rel);
    }
  }
}

namespace {

// One launch_indexer_ex call (`repeats` times on the same zeroed workspace) on problem p; checks every
// row: -1 padding, finite scores, the set equal to the CPU top-k of the GPU's own scores (all positions
// for rows of at most k keys). Returns the slots.
std::vector<int32_t> run_pipeline(const Problem& p, DeviceProblem& d, int k, int fused, bool with_workspace, int repeats,
                                  const char* what, int row_kernel = -1) {
  DeviceBuffer<int32_t> out(static_cast<size_t>(p.rows()) * k);
  DeviceBuffer<float> out_scores(static_cast<size_t>(p.rows()) * k);
  out.fill_bytes(0x7B);
  out_scores.fill_bytes(0xFF);
  DeviceBuffer<uint8_t> workspace(with_workspace ? ki::indexer_topk_workspace_bytes(p.rows()) : 0);
  if (with_workspace) CUDA_OK(ki::clear_indexer_topk_workspace(workspace.ptr, workspace.count, nullptr));
  for (int i = 0; i < repeats; ++i)
    CUDA_OK(ki::launch_indexer_ex(d.params(p), k, out.ptr, out_scores.ptr, with_workspace ? workspace.ptr : nullptr,
                                  with_workspace ? workspace.count : 0, fused, row_kernel, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const auto slots = out.download();
  const auto got_scores = out_scores.download();
  const auto gpu_scores = d.scores.download();
  if (with_workspace) {
    const auto ws = workspace.download();
    bool header_zero = true;
    for (size_t i = 0; i < static_cast<size_t>(p.rows()) * ki::detail::kHeaderWords * 4; ++i) header_zero &= ws[i] == 0;
    CHECK_MESSAGE(header_zero, what << ": the top-k workspace header is not zero after the call");
  }
  int rows_ok = 0;
  for (int t = 0; t < p.rows(); ++t) {
    const int len = p.row_len[t], seq = p.row_seq[t];
    INFO(what << " row " << t << " len " << len);
    std::set<int32_t> got;
    int padding = 0;
    bool finite = true, pad_ok = true;
    for (int i = 0; i < k; ++i) {
      const int32_t s = slots[static_cast<size_t>(t) * k + i];
      const float sc = got_scores[static_cast<size_t>(t) * k + i];
      if (s == -1) {
        ++padding;
        pad_ok &= std::isinf(sc) && sc < 0;
      } else {
        got.insert(s);
        finite &= std::isfinite(sc);
      }
    }
    CHECK(finite);
    CHECK(pad_ok);
    CHECK(padding == std::max(0, k - len));
    CHECK(got.size() == static_cast<size_t>(std::min(k, len)));
    std::set<int32_t> exact;
    for (int pos : ref_topk_positions(&gpu_scores[static_cast<size_t>(t) * d.stride], len, k)) exact.insert(slot_of(p, seq, pos));
    CHECK(got == exact);
    rows_ok += got == exact ? 1 : 0;
  }
  REPORT(what << ": " << rows_ok << " of " << p.rows() << " rows equal the CPU top-k of the GPU scores");
  return slots;
}

// Recall of the true top-k (float32 inputs before quantization, double arithmetic) and agreement with the
// top-k of the same quantized inputs computed in double on the CPU, for row t.
double check_recall(const Problem& p, const std::vector<int32_t>& slots, int k, int t, KeyFormat fmt) {
  const int len = p.row_len[t], seq = p.row_seq[t];
  std::set<int32_t> got(slots.begin() + static_cast<size_t>(t) * k, slots.begin() + static_cast<size_t>(t + 1) * k);
  std::vector<float> truth(len), quant(len);
  for (int j = 0; j < len; ++j) {
    truth[j] = static_cast<float>(ref_score(p, t, j, true));
    quant[j] = static_cast<float>(ref_score(p, t, j, false));
  }
  const auto true_top = ref_topk_positions(truth.data(), len, k);
  const auto quant_top = ref_topk_positions(quant.data(), len, k);
  const std::set<int> quant_set(quant_top.begin(), quant_top.end());
  int hit = 0, quant_hit = 0, agree = 0;
  for (int pos : true_top) {
    hit += got.count(slot_of(p, seq, pos)) ? 1 : 0;
    quant_hit += quant_set.count(pos) ? 1 : 0;
  }
  for (int pos : quant_top) agree += got.count(slot_of(p, seq, pos)) ? 1 : 0;
  const double recall = static_cast<double>(hit) / true_top.size();
  const double quant_recall = static_cast<double>(quant_hit) / true_top.size();
  const double agreement = static_cast<double>(agree) / quant_top.size();
  REPORT(fmt_name(fmt) << " row " << t << " len " << len << " recall " << recall << " (CPU double on the same "
                       << "quantized inputs: " << quant_recall << "), agreement with that CPU top-k " << agreement);
  INFO(fmt_name(fmt) << " row " << t << " len " << len);
  CHECK(agreement >= 0.995);  // the kernel adds (almost) nothing to the quantization's own loss
  if (fmt == KeyFormat::kBf16) {
    CHECK(recall >= 0.99);
  } else if (fmt == KeyFormat::kInt8) {
    // int8 with one amax / 127 scale per vector: the CPU in double on the same int8 values gets 0.992-0.995
    // on i.i.d. data at 8K-32K keys (worst of 24 rows 0.9897 at 32K), so each row >= 0.985 and the mean
    // of a subcase's rows >= 0.99 (check_int8_mean).
    CHECK(recall >= quant_recall - 0.005);
    CHECK(recall >= 0.985);
  } else {
    // e4m3 keys with one scale per token cannot reach 0.99 on i.i.d. Gaussian data: the CPU in double on
    // the same e4m3 values gets 0.97-0.98 at 8K-32K keys. Hold the kernel to that, not to a fixed 0.99.
    CHECK(recall >= quant_recall - 0.005);
    CHECK(recall >= 0.95);
  }
  return recall;
}

// Issue 7's bar for the int8 format: mean recall of the float32 top-k >= 0.99 over a subcase's rows.
void check_int8_mean(KeyFormat fmt, const std::vector<double>& recalls, const char* what) {
  if (fmt != KeyFormat::kInt8 || recalls.empty()) return;
  double sum = 0;
  for (double r : recalls) sum += r;
  const double mean = sum / recalls.size();
  REPORT("int8 " << what << ": mean recall " << mean << " over " << recalls.size() << " rows");
  CHECK_MESSAGE(mean >= 0.99, "int8 " << what << ": mean recall " << mean);
}

// Zero keys (and FP8 scales) make every score 0: each row's top-k must be positions 0..k-1 (ties to the
// lower position). Rows of 12000 and 3000 keys through launch_indexer_ex(fused, row_kernel).
void check_all_equal_rows(KeyFormat fmt, std::mt19937_64& rng, int k, int fused, int row_kernel, int early_pages,
                          const char* what) {
  Problem zero = make_problem(fmt, {12000, 3000}, {0, 1}, {12000, 3000}, rng);
  std::fill(zero.cache.begin(), zero.cache.end(), 0);
  DeviceProblem dz(zero);
  dz.early_pages = early_pages;
  const auto slots = run_pipeline(zero, dz, k, fused, true, 2, what, row_kernel);
  for (int t = 0; t < 2; ++t) {
    std::set<int32_t> got(slots.begin() + t * k, slots.begin() + (t + 1) * k), want;
    for (int pos = 0; pos < k; ++pos) want.insert(slot_of(zero, t, pos));
    CHECK_MESSAGE(got == want, what << ": all-equal row " << t << ": not positions 0..k-1");
  }
}

bool same_sets(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int rows, int k) {
  bool same = true;
  for (int t = 0; t < rows; ++t) {
    std::multiset<int32_t> x(a.begin() + t * k, a.begin() + (t + 1) * k), y(b.begin() + t * k, b.begin() + (t + 1) * k);
    same &= x == y;
  }
  return same;
}

}  // namespace

TEST_CASE("indexer scores + top-k: exact on its own scores, -1 padding, recall of the float32 top-k") {
  auto rng = fresh_rng("pipeline");
  const int k = 2048;
  const KeyFormat formats[] = {KeyFormat::kBf16, KeyFormat::kFp8, KeyFormat::kInt8};
  // (Subcases hold the loop over formats, not the other way round: each subcase runs once per test run.)
  SUBCASE("long decode rows: split path (scores count the histogram) against one block per row") {
    for (KeyFormat fmt : formats) {
      const Problem p = make_problem(fmt, {1, 700, 8192, 32768}, {0, 1, 2, 3, 3}, {1, 700, 8192, 32768, 20000}, rng);
      DeviceProblem d(p);
      const auto split = run_pipeline(p, d, k, -1, true, 2, label(fmt, "split").c_str());
      const auto rows = run_pipeline(p, d, k, -1, false, 1, "one block per row");
      CHECK_MESSAGE(same_sets(split, rows, p.rows(), k), "split and one-block-per-row top-k differ");
      std::vector<double> r;
      for (int t : {2, 3, 4}) r.push_back(check_recall(p, split, k, t, fmt));
      check_int8_mean(fmt, r, "split, rows of 8K / 32K / 20K keys");
    }
  }
  SUBCASE("short decode rows: fused kernel (one token; shorter than k; k; k + 1; 8K; 16K)") {
    for (KeyFormat fmt : formats) {
      const Problem p = make_problem(fmt, {1, 700, 2048, 2049, 8192, 16384}, {0, 1, 2, 3, 4, 5, 4},
                                     {1, 700, 2048, 2049, 8192, 16384, 5000}, rng);
      DeviceProblem d(p);
      // 3 calls on one workspace: the per-row block counters must wrap back to zero every time.
      const auto fused = run_pipeline(p, d, k, 1, true, 3, label(fmt, "fused").c_str());
      const auto rows = run_pipeline(p, d, k, 0, false, 1, "unfused, one block per row");
      CHECK_MESSAGE(same_sets(fused, rows, p.rows(), k), "fused and unfused top-k differ");
      d.early_pages = 0;  // round 3's scores prologue
      const auto fused_r3 = run_pipeline(p, d, k, 1, true, 2, "fused, early_pages 0");
      d.early_pages = -1;
      CHECK_MESSAGE(same_sets(fused, fused_r3, p.rows(), k), "fused top-k differs between early_pages 0 and default");
      std::vector<double> r;
      for (int t : {4, 5}) r.push_back(check_recall(p, fused, k, t, fmt));
      check_int8_mean(fmt, r, "fused, rows of 8K / 16K keys");
    }
  }
  SUBCASE("fused kernel at 8K and on all-equal scores (zero keys: the lowest positions win)") {
    for (KeyFormat fmt : formats) {
      const Problem p = make_problem(fmt, {8192}, {0}, {8192}, rng);
      DeviceProblem d(p);
      run_pipeline(p, d, k, 1, true, 2, "fused b1 8K");
      // What launch_indexer picks by itself for rows of at most k keys: the fused kernel, no selection.
      const Problem short_rows = make_problem(fmt, {1, 700, 2048}, {0, 1, 2}, {1, 700, 2048}, rng);
      DeviceProblem ds(short_rows);
      run_pipeline(short_rows, ds, k, -1, true, 2, "rows of at most k keys, automatic path");
      check_all_equal_rows(fmt, rng, k, 1, -1, -1, "fused, all-equal scores");
    }
  }
  SUBCASE("scores + register select (launched behind the scores kernel with PDL), both key formats") {
    for (KeyFormat fmt : formats) {
      const Problem p = make_problem(fmt, {1, 700, 2048, 2049, 8192, 16384}, {0, 1, 2, 3, 4, 5, 4},
                                     {1, 700, 2048, 2049, 8192, 16384, 5000}, rng);
      DeviceProblem d(p);
      // Round 3 (early_pages 0, row_kernel 1); round 4's scores start-up (early_pages 1, the default) with
      // the register select (what row_kernel -1 runs for more than kClusterSelectMaxRows rows, or with
      // GLM5RT_INDEXER_CLUSTER=0), same problem.
      d.early_pages = 0;
      const auto reg = run_pipeline(p, d, k, 0, true, 3, label(fmt, "register select").c_str(), 1);
      d.early_pages = 1;
      const auto reg_e = run_pipeline(p, d, k, 0, true, 3, label(fmt, "register select, round-4 scores").c_str(), 1);
      // Round 5: the cluster select behind round 4's scores (3 calls: its shared memory is reused).
      const auto cl = run_pipeline(p, d, k, 0, true, 3, label(fmt, "cluster select").c_str(), 4);
      d.early_pages = -1;
      const auto rows = run_pipeline(p, d, k, 0, false, 1, "round-1 row kernel", 0);
      CHECK_MESSAGE(same_sets(reg, rows, p.rows(), k), "register select and round-1 row kernel differ");
      CHECK_MESSAGE(same_sets(reg_e, rows, p.rows(), k), "register select (round-4 scores) and round-1 row kernel differ");
      CHECK_MESSAGE(same_sets(cl, rows, p.rows(), k), "cluster select and round-1 row kernel differ");
      std::vector<double> r;
      for (int t : {4, 5}) r.push_back(check_recall(p, reg, k, t, fmt));
      for (int t : {4, 5}) r.push_back(check_recall(p, cl, k, t, fmt));
      check_int8_mean(fmt, r, "register / cluster selects, rows of 8K / 16K keys");
      const Problem b1 = make_problem(fmt, {8192}, {0}, {8192}, rng);
      DeviceProblem d1(b1);
      for (int rk : {1, 4}) {
        d1.early_pages = rk == 1 ? 0 : 1;
        run_pipeline(b1, d1, k, 0, false, 2, rk == 4 ? "cluster select b1 8K" : "register select b1 8K", rk);
        // and what launch_indexer picks by itself (round 4's scores start-up with the cluster select)
        run_pipeline(b1, d1, k, -1, true, 2, "b1 8K, automatic path");
      }
      check_all_equal_rows(fmt, rng, k, 0, 1, 0, "register select, all-equal scores");
      check_all_equal_rows(fmt, rng, k, 0, 1, 1, "register select (round-4 scores), all-equal scores");
      check_all_equal_rows(fmt, rng, k, 0, 4, 1, "cluster select, all-equal scores");
      check_all_equal_rows(fmt, rng, k, -1, -1, -1, "automatic path, all-equal scores");
    }
  }
  SUBCASE("batch 32 decode (split path) and a causal prefill chunk (one block per row)") {
    for (KeyFormat fmt : formats) {
      std::vector<int> keys;
      std::vector<int32_t> seqs, lens;
      std::uniform_int_distribution<int> length(1, 20000);
      for (int t = 0; t < 32; ++t) {
        keys.push_back(t == 0 ? 20000 : length(rng));
        seqs.push_back(t);
        lens.push_back(keys.back());
      }
      const Problem b32 = make_problem(fmt, keys, seqs, lens, rng);
      DeviceProblem d32(b32);
      const auto split = run_pipeline(b32, d32, k, -1, true, 2, "batch 32");
      const auto rows = run_pipeline(b32, d32, k, -1, false, 1, "batch 32, one block per row");
      CHECK_MESSAGE(same_sets(split, rows, b32.rows(), k), "batch 32: split and one-block-per-row top-k differ");
      std::vector<int32_t> pseq, plen;
      for (int i = 0; i < 300; ++i) pseq.push_back(0), plen.push_back(1900 + i + 1);  // positions 1900..2199
      const Problem pre = make_problem(fmt, {2200}, pseq, plen, rng, 16);
      DeviceProblem dp(pre);
      run_pipeline(pre, dp, k, -1, true, 1, "prefill chunk");
    }
  }
}
