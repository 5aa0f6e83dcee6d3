// Multi-pool launches (batched decode over several caches): one sparse MLA / indexer launch whose rows read
// records from different pools must give exactly what the same rows give when each pool runs alone.
//
// Sparse MLA: three pools, each a separate allocation of two layers of its own random records with its own
// slot count and so its own per-layer stride (the backend's layout: layer l of a pool at base + l *
// layer_bytes); the launch reads layer 1. Reference for the rows of pool p: the single-pool launch over
// pool p's layer 1 with the same T rows, whose plan (splits, variant, heads per CTA) is therefore the same:
// results must be bitwise equal. A row that read another pool, layer 0 or a wrong stride would see other
// records and fail.
// Indexer: sequences own disjoint pages of one cache; pool s (two layers, its own stride) holds at layer 1
// only sequence s's pages, every other page replaced by other keys. Reference: the single-pool launch over
// the original cache; scores must be bitwise equal and the top-k sets equal.
// The single-pool kernels themselves are checked against float32 CPU references in test_sparse_mla.cu and
// test_indexer.cu. Outputs are poisoned before every run; inputs are fresh random data (seed printed).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "indexer_reference.hpp"
#include "kernels/attention/sparse_mla.h"
#include "kernels/indexer/indexer_params.hpp"

namespace {

namespace gk = glm5rt::kernels;
namespace ki = glm5rt::kernels::indexer;

#define MP_CUDA_REQUIRE(x)                                                \
  do {                                                                    \
    cudaError_t e_ = (x);                                                 \
    REQUIRE_MESSAGE(e_ == cudaSuccess, #x, ": ", cudaGetErrorString(e_)); \
  } while (0)

struct Dev {
  void* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t bytes) : n(bytes ? bytes : 16) { MP_CUDA_REQUIRE(cudaMalloc(&p, n)); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(p); }
  void put(const void* h, size_t bytes, size_t at = 0) {
    MP_CUDA_REQUIRE(cudaMemcpy(static_cast<char*>(p) + at, h, bytes, cudaMemcpyHostToDevice));
  }
  void poison() { MP_CUDA_REQUIRE(cudaMemset(p, 0xFF, n)); }  // NaN bytes for floats and bf16
  // A sparse MLA workspace: the fused combine's counters (zeroed once at allocation, left zero by every
  // call) stay untouched, the partials are poisoned.
  void poison_mla_workspace() {
    if (n > gk::kMlaCombineCounterBytes)
      MP_CUDA_REQUIRE(cudaMemset(static_cast<char*>(p) + gk::kMlaCombineCounterBytes, 0xFF, n - gk::kMlaCombineCounterBytes));
  }
  template <typename T>
  std::vector<T> get(size_t count) const {
    std::vector<T> v(count);
    MP_CUDA_REQUIRE(cudaMemcpy(v.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

std::mt19937_64 fresh_rng() {
  std::random_device rd;
  const uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  MESSAGE("seed ", seed);
  return std::mt19937_64(seed);
}

// Random, finite cache records in `fmt` (bf16: 576 values; FP8: 512 e4m3 + 4 scales + 64 bf16 rope), four
// 16-bit draws per generator call (millions of records per test). bf16 values: random sign and mantissa,
// magnitudes in [2^-9, 1); e4m3 bytes: any but the NaN codes; scales in (0, 2 / 448].
uint16_t random_bf16(uint64_t bits) {
  const uint16_t exp = static_cast<uint16_t>(118 + (bits >> 7) % 9);  // 2^-9 .. 2^-1 (x 1.mantissa)
  return static_cast<uint16_t>((bits & 0x8000u) | (exp << 7) | (bits & 0x7fu));
}
void random_mla_records(uint8_t* r, int64_t count, gk::MlaCacheFormat fmt, std::mt19937_64& rng) {
  if (fmt == gk::MlaCacheFormat::kBf16) {
    auto* v = reinterpret_cast<uint16_t*>(r);
    for (int64_t i = 0; i < count * 576; i += 4) {
      const uint64_t x = rng();
      for (int j = 0; j < 4; ++j) v[i + j] = random_bf16(x >> (16 * j));
    }
    return;
  }
  for (int64_t s = 0; s < count; ++s, r += gk::kMlaFp8RecordBytes) {
    for (int i = 0; i < 512; i += 8) {
      uint64_t x = rng();
      for (int j = 0; j < 8; ++j, x >>= 8) r[i + j] = (x & 0x7f) == 0x7f ? static_cast<uint8_t>(x ^ 1) : static_cast<uint8_t>(x);
    }
    const uint64_t x = rng();
    for (int b = 0; b < 4; ++b) {
      const float scale = static_cast<float>(1 + ((x >> (16 * b)) & 0xffff)) / (32768.f * 448.f);
      std::memcpy(r + 512 + 4 * b, &scale, 4);
    }
    auto* rope = reinterpret_cast<uint16_t*>(r + 528);
    for (int i = 0; i < 64; i += 4) {
      const uint64_t y = rng();
      for (int j = 0; j < 4; ++j) rope[i + j] = random_bf16(y >> (16 * j));
    }
  }
}

struct MlaCase {
  int T = 8, H = 64, topk = 512;
  gk::MlaCacheFormat fmt = gk::MlaCacheFormat::kBf16;
  int variant = 0, splits = 0;
  int combine = 0;  // SparseMlaParams::combine
  int num_sms = 0;  // SparseMlaParams::num_sms (0 = the device's; 8 with T = 225: the last partial wave split)
};

// Rows are assigned to pools 0..2 at random; one extra row (when T >= 4) names pool 3, outside the table,
// and must attend to nothing. Every pool holds its own random records (two layers, its own slot count and
// so its own layer stride); pool 1 holds fewer slots than the indices reach, so its rows' larger indices
// must be dropped exactly as a single-pool launch over that pool drops them. Reference for the rows of
// pool p: the single-pool launch over pool p's layer 1 (same T, same plan).
void check_mla_multi_pool(const MlaCase& c, std::mt19937_64& rng) {
  CAPTURE(c.T);
  CAPTURE(c.H);
  CAPTURE(c.topk);
  CAPTURE(static_cast<int>(c.fmt));
  CAPTURE(c.variant);
  CAPTURE(c.splits);
  const int64_t rec = c.fmt == gk::MlaCacheFormat::kBf16 ? gk::kMlaBf16RecordBytes : gk::kMlaFp8RecordBytes;
  const int64_t n_index = 3000;  // indices are drawn below this
  constexpr int kPools = 3;
  const int64_t pool_slots[kPools] = {n_index, n_index / 2, n_index + 517};  // slots per layer of each pool
  std::uniform_int_distribution<int> pick_pool(0, kPools - 1);
  std::vector<int32_t> row_pool(c.T);
  for (int t = 0; t < c.T; ++t) row_pool[t] = t < kPools ? t : pick_pool(rng);  // every pool has a row
  if (c.T >= 4) row_pool[c.T - 1] = kPools;                                      // outside the table

  // Query, indices (-1 padding and entries outside every pool included), pools.
  std::vector<uint16_t> q(static_cast<size_t>(c.T) * c.H * 576);
  for (size_t i = 0; i < q.size(); i += 4) {
    const uint64_t x = rng();
    for (size_t j = 0; j < 4 && i + j < q.size(); ++j) q[i + j] = random_bf16(x >> (16 * j));
  }
  std::vector<int32_t> idx(static_cast<size_t>(c.T) * c.topk);
  std::uniform_int_distribution<int> slot(0, static_cast<int>(n_index) - 1);
  for (int t = 0; t < c.T; ++t)
    for (int i = 0; i < c.topk; ++i) {
      const int r = static_cast<int>(rng() % 64);
      idx[static_cast<size_t>(t) * c.topk + i] = r == 0 ? -1 : r == 1 ? static_cast<int32_t>(n_index + 700) : slot(rng);
    }
  std::vector<std::unique_ptr<Dev>> pools;
  std::vector<gk::MlaPool> table(kPools);
  for (int p = 0; p < kPools; ++p) {
    const int64_t layer_bytes = pool_slots[p] * rec;
    std::vector<uint8_t> host(static_cast<size_t>(2 * layer_bytes));
    random_mla_records(host.data(), 2 * pool_slots[p], c.fmt, rng);
    pools.push_back(std::make_unique<Dev>(host.size()));
    pools.back()->put(host.data(), host.size());
    table[p].base = pools.back()->p;
    table[p].num_slots = pool_slots[p];
    table[p].layer_bytes = layer_bytes;
  }

  Dev d_q(q.size() * 2), d_idx(idx.size() * 4), d_table(sizeof(gk::MlaPool) * kPools),
      d_rp(static_cast<size_t>(c.T) * 4);
  d_q.put(q.data(), q.size() * 2);
  d_idx.put(idx.data(), idx.size() * 4);
  d_table.put(table.data(), sizeof(gk::MlaPool) * kPools);
  d_rp.put(row_pool.data(), row_pool.size() * 4);
  const size_t n_out = static_cast<size_t>(c.T) * c.H * 512, n_lse = static_cast<size_t>(c.T) * c.H;
  Dev d_out(n_out * 2), d_lse(n_lse * 4);

  gk::SparseMlaParams base;
  base.q = d_q.p;
  base.format = c.fmt;
  base.indices = d_idx.as<int32_t>();
  base.out = d_out.p;
  base.lse = d_lse.as<float>();
  base.num_tokens = c.T;
  base.num_heads = c.H;
  base.topk = c.topk;
  base.softmax_scale = 0.0417f;
  base.num_splits = c.splits;
  base.kernel_variant = c.variant;
  base.combine = c.combine;
  base.num_sms = c.num_sms;
  base.cache = table[0].base;  // for the workspace size only (the plan does not depend on the pool)
  base.num_slots = pool_slots[0];
  const size_t ws_bytes = gk::sparse_mla_workspace_size(base);
  Dev d_ws(ws_bytes);
  MP_CUDA_REQUIRE(cudaMemset(d_ws.p, 0, d_ws.n));  // the fused combine's counters start at zero

  // Multi-pool run.
  gk::SparseMlaParams mp = base;
  mp.cache = nullptr;
  mp.num_slots = 0;
  mp.pools = d_table.as<gk::MlaPool>();
  mp.row_pool = d_rp.as<int32_t>();
  mp.num_pools = kPools;
  mp.pool_layer = 1;
  REQUIRE(gk::sparse_mla_workspace_size(mp) == ws_bytes);
  d_out.poison();
  d_lse.poison();
  d_ws.poison_mla_workspace();
  MP_CUDA_REQUIRE(gk::sparse_mla_forward(mp, d_ws.p, ws_bytes, nullptr));
  MP_CUDA_REQUIRE(cudaDeviceSynchronize());
  const auto out = d_out.get<uint16_t>(n_out);
  const auto lse = d_lse.get<float>(n_lse);

  // Each pool alone (its layer 1, same T, same plan); compare that pool's rows bitwise.
  for (int p = 0; p < kPools; ++p) {
    CAPTURE(p);
    gk::SparseMlaParams sp = base;
    sp.cache = static_cast<const uint8_t*>(table[p].base) + table[p].layer_bytes;
    sp.num_slots = pool_slots[p];
    d_out.poison();
    d_lse.poison();
    d_ws.poison_mla_workspace();
    MP_CUDA_REQUIRE(gk::sparse_mla_forward(sp, d_ws.p, ws_bytes, nullptr));
    MP_CUDA_REQUIRE(cudaDeviceSynchronize());
    const auto ro = d_out.get<uint16_t>(n_out);
    const auto rl = d_lse.get<float>(n_lse);
    int rows = 0;
    for (int t = 0; t < c.T; ++t) {
      if (row_pool[t] != p) continue;
      ++rows;
      const size_t o0 = static_cast<size_t>(t) * c.H * 512, l0 = static_cast<size_t>(t) * c.H;
      CHECK_MESSAGE(std::memcmp(out.data() + o0, ro.data() + o0, static_cast<size_t>(c.H) * 512 * 2) == 0, "out of row ", t);
      CHECK_MESSAGE(std::memcmp(lse.data() + l0, rl.data() + l0, static_cast<size_t>(c.H) * 4) == 0, "lse of row ", t);
      for (int h = 0; h < c.H; ++h) REQUIRE(std::isfinite(rl[l0 + h]));  // the reference itself is sane
    }
    CHECK(rows > 0);
  }
  // The row whose pool is outside the table attends to nothing.
  if (c.T >= 4) {
    const int t = c.T - 1;
    for (size_t i = 0; i < static_cast<size_t>(c.H) * 512; ++i)
      REQUIRE_MESSAGE(out[static_cast<size_t>(t) * c.H * 512 + i] == 0, "out of the row without a pool, element ", i);
    for (int h = 0; h < c.H; ++h) REQUIRE(lse[static_cast<size_t>(t) * c.H + h] == -INFINITY);
  }
}

}  // namespace

TEST_CASE("multi-pool sparse MLA equals each pool run alone (bf16 and FP8 records, every variant)") {
  auto rng = fresh_rng();
  for (auto fmt : {gk::MlaCacheFormat::kBf16, gk::MlaCacheFormat::kFp8})
    for (int variant : {0, 1, 2, 3, 5, 7, 10, 11, 14}) {
      // Decode batch (the backend's case), heads of GLM-5 (64) and a small count; forced splits.
      check_mla_multi_pool(MlaCase{32, 64, 2048, fmt, variant, 0}, rng);
      check_mla_multi_pool(MlaCase{5, 16, 300, fmt, variant, 0}, rng);
      // 8 heads x 4 splits: the fused combine by default; also with round 3's combine kernel and the
      // chunked one.
      for (int combine : {0, 1, 2}) check_mla_multi_pool(MlaCase{3, 8, 200, fmt, variant, 4, combine}, rng);
    }
  // Prefill-like row count, automatic plan.
  check_mla_multi_pool(MlaCase{130, 16, 256, gk::MlaCacheFormat::kBf16, 0, 0}, rng);
  check_mla_multi_pool(MlaCase{130, 16, 256, gk::MlaCacheFormat::kFp8, 0, 0}, rng);
  // A GLM-5 decode batch of 8 rows at top-k 2048, automatic plan: on sm_90+ FP8 records run variant 14's small-T plan
  // (64 heads x 16 splits, session 13's small_t_v14_splits), bf16 ones variant 10's (session 30; was 11); 5 rows at
  // 128 heads: variant 14 in both formats.
  for (auto fmt : {gk::MlaCacheFormat::kBf16, gk::MlaCacheFormat::kFp8}) {
    check_mla_multi_pool(MlaCase{8, 64, 2048, fmt, 0, 0}, rng);
    check_mla_multi_pool(MlaCase{5, 128, 2048, fmt, 0, 0}, rng);
  }
  // 64 heads on 8 forced SMs: the last token's row (of 225) as a launch of its own, its pool index offset with it.
  for (auto fmt : {gk::MlaCacheFormat::kBf16, gk::MlaCacheFormat::kFp8})
    check_mla_multi_pool(MlaCase{225, 64, 160, fmt, 0, 0, 0, 8}, rng);
}

TEST_CASE("multi-pool sparse MLA: bad pool parameters are rejected without launching") {
  // A valid multi-pool call first (so that the rejections below are the pool checks' doing).
  std::vector<uint8_t> zeros(16 * gk::kMlaBf16RecordBytes, 0);
  Dev q(8 * 576 * 2), idx(4), out(8 * 512 * 2), lse(8 * 4), rp(4), cache(zeros.size()), tab(sizeof(gk::MlaPool));
  q.put(zeros.data(), 8 * 576 * 2);
  idx.put(zeros.data(), 4);  // slot 0
  rp.put(zeros.data(), 4);   // pool 0
  cache.put(zeros.data(), zeros.size());
  gk::MlaPool pool;
  pool.base = cache.p;
  pool.num_slots = 16;
  pool.layer_bytes = 0;
  tab.put(&pool, sizeof pool);
  gk::SparseMlaParams p;
  p.q = q.p;
  p.indices = idx.as<int32_t>();
  p.out = out.p;
  p.lse = lse.as<float>();
  p.num_tokens = 1;
  p.num_heads = 8;
  p.topk = 1;
  p.softmax_scale = 0.1f;
  p.num_splits = 1;
  p.pools = tab.as<gk::MlaPool>();
  p.row_pool = rp.as<int32_t>();
  p.num_pools = 1;
  MP_CUDA_REQUIRE(gk::sparse_mla_forward(p, nullptr, 0, nullptr));
  MP_CUDA_REQUIRE(cudaDeviceSynchronize());
  const auto l = lse.get<float>(1);
  CHECK(l[0] == 0.f);  // one valid all-zero record: score 0, lse = log(exp(0)) = 0
  gk::SparseMlaParams b = p;
  b.row_pool = nullptr;
  CHECK(gk::sparse_mla_forward(b, nullptr, 0, nullptr) == cudaErrorInvalidValue);
  b = p;
  b.num_pools = 0;
  CHECK(gk::sparse_mla_forward(b, nullptr, 0, nullptr) == cudaErrorInvalidValue);
  b = p;
  b.pool_layer = -1;
  CHECK(gk::sparse_mla_forward(b, nullptr, 0, nullptr) == cudaErrorInvalidValue);
  (void)cudaGetLastError();
}

namespace {

namespace it = glm5rt::indexer_test;

// The indexer over sequences whose keys live in one pool each (pool s = sequence s), at layer 1 of a
// two-layer pool with its own stride; the pages of the other sequences are overwritten there. Reference:
// the same rows over the problem's single cache. Scores (every visible key) and the top-k sets must be
// equal; fused: -1 forced off, 1 forced on, -1 chosen.
void check_indexer_multi_pool(ki::KeyFormat fmt, const std::vector<int>& seq_keys, const std::vector<int32_t>& row_seq,
                              const std::vector<int32_t>& row_len, int k, int fused, bool workspace, bool scores_only,
                              std::mt19937_64& rng, int row_kernel = -1) {
  CAPTURE(static_cast<int>(fmt));
  CAPTURE(k);
  CAPTURE(fused);
  CAPTURE(row_kernel);
  CAPTURE(workspace);
  CAPTURE(row_seq.size());
  const it::Problem pr = it::make_problem(fmt, seq_keys, row_seq, row_len, rng);
  const int S = static_cast<int>(seq_keys.size()), T = pr.rows();
  const int64_t pb = it::page_bytes(fmt, pr.page_size);
  const int64_t cache_pages = static_cast<int64_t>(pr.cache.size()) / pb;
  // Pool s: two layers of (cache_pages + 2 s + 1) pages (strides differ), layer 1 = the cache with every
  // page that sequence s does not own replaced by another random page.
  std::vector<std::unique_ptr<Dev>> pools;
  std::vector<ki::KeyPool> table(S);
  for (int s = 0; s < S; ++s) {
    const int64_t pages = cache_pages + 2 * s + 1, layer_bytes = pages * pb;
    std::set<int32_t> own;
    const int own_pages = (seq_keys[s] + pr.page_size - 1) / pr.page_size;
    for (int pg = 0; pg < own_pages; ++pg) own.insert(pr.block_tables[static_cast<size_t>(s) * pr.table_stride + pg]);
    // Other pages: the cache's pages shifted by s + 1 (other keys, finite, in the format's layout).
    std::vector<uint8_t> host(static_cast<size_t>(2 * layer_bytes));
    for (int64_t pg = 0; pg < 2 * pages; ++pg)
      std::memcpy(host.data() + pg * pb, pr.cache.data() + ((pg % pages) + s + 1) % cache_pages * pb, pb);
    for (int32_t pg : own) std::memcpy(host.data() + layer_bytes + pg * pb, pr.cache.data() + pg * pb, pb);
    pools.push_back(std::make_unique<Dev>(host.size()));
    pools.back()->put(host.data(), host.size());
    table[s].base = pools.back()->p;
    table[s].layer_bytes = layer_bytes;
  }
  const int max_len = pr.max_row_len();
  const int64_t stride = ki::indexer_score_stride(max_len);
  Dev d_cache(pr.cache.size()), d_q(pr.q.size()), d_qs(pr.q_scale.size() * 4), d_w(pr.w.size() * 4),
      d_seq(static_cast<size_t>(T) * 4), d_len(static_cast<size_t>(T) * 4), d_bt(pr.block_tables.size() * 4),
      d_scores(static_cast<size_t>(T) * stride * 4), d_slots(static_cast<size_t>(T) * k * 4),
      d_table(sizeof(ki::KeyPool) * S);
  d_cache.put(pr.cache.data(), pr.cache.size());
  d_q.put(pr.q.data(), pr.q.size());
  d_qs.put(pr.q_scale.data(), pr.q_scale.size() * 4);
  d_w.put(pr.w.data(), pr.w.size() * 4);
  d_seq.put(pr.row_seq.data(), static_cast<size_t>(T) * 4);
  d_len.put(pr.row_len.data(), static_cast<size_t>(T) * 4);
  d_bt.put(pr.block_tables.data(), pr.block_tables.size() * 4);
  d_table.put(table.data(), sizeof(ki::KeyPool) * S);
  const size_t ws_bytes = workspace ? ki::indexer_topk_workspace_bytes(T) : 0;
  Dev d_ws(ws_bytes);
  if (workspace) MP_CUDA_REQUIRE(ki::clear_indexer_topk_workspace(d_ws.p, ws_bytes, nullptr));

  ki::ScoreParams sp;
  sp.rows.num_rows = T;
  sp.rows.row_seq = d_seq.as<int32_t>();
  sp.rows.row_len = d_len.as<int32_t>();
  sp.rows.block_tables = d_bt.as<int32_t>();
  sp.rows.block_table_stride = pr.table_stride;
  sp.rows.page_size = pr.page_size;
  sp.rows.max_row_len = max_len;
  sp.format = fmt;
  sp.q = d_q.p;
  sp.q_scale = fmt == ki::KeyFormat::kFp8 ? d_qs.as<float>() : nullptr;
  sp.weights = d_w.as<float>();
  sp.scores = d_scores.as<float>();
  sp.score_stride = stride;

  auto run = [&](const ki::ScoreParams& p, std::vector<float>& scores, std::vector<int32_t>& slots) {
    d_scores.poison();
    MP_CUDA_REQUIRE(cudaMemset(d_slots.p, 0x7F, d_slots.n));  // not -1 (padding) nor a plausible slot
    if (scores_only)
      MP_CUDA_REQUIRE(ki::launch_indexer_scores(p, nullptr));
    else
      MP_CUDA_REQUIRE(ki::launch_indexer_ex(p, k, d_slots.as<int32_t>(), nullptr, workspace ? d_ws.p : nullptr, ws_bytes,
                                            fused, row_kernel, nullptr));
    MP_CUDA_REQUIRE(cudaDeviceSynchronize());
    scores = d_scores.get<float>(static_cast<size_t>(T) * stride);
    slots = d_slots.get<int32_t>(static_cast<size_t>(T) * k);
  };
  ki::ScoreParams single = sp;
  single.key_cache = d_cache.p;
  ki::ScoreParams multi = sp;
  multi.seq_pools = d_table.as<ki::KeyPool>();
  multi.num_pools = S;
  multi.pool_layer = 1;
  std::vector<float> rs, ms;
  std::vector<int32_t> rk, mk;
  run(single, rs, rk);
  run(multi, ms, mk);
  const bool fused_scores_skipped = !scores_only && fused != 0 && workspace;  // the fused kernel may not write scores
  for (int t = 0; t < T; ++t) {
    CAPTURE(t);
    const int len = pr.row_len[t];
    if (scores_only || !fused_scores_skipped || len > k)
      for (int j = 0; j < len; ++j) {
        const size_t e = static_cast<size_t>(t) * stride + j;
        REQUIRE(std::isfinite(rs[e]));
        REQUIRE_MESSAGE(std::memcmp(&rs[e], &ms[e], 4) == 0, "score of key ", j, ": ", rs[e], " vs ", ms[e]);
      }
    if (!scores_only) {
      std::vector<int32_t> a(rk.begin() + static_cast<int64_t>(t) * k, rk.begin() + static_cast<int64_t>(t + 1) * k);
      std::vector<int32_t> b(mk.begin() + static_cast<int64_t>(t) * k, mk.begin() + static_cast<int64_t>(t + 1) * k);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      REQUIRE(a == b);
      CHECK(std::count(a.begin(), a.end(), -1) == std::max(0, k - len));
    }
  }
  if (scores_only && S > 1) {
    // A sequence outside the table: its rows score every key 0 (the other rows are unaffected).
    multi.num_pools = S - 1;
    run(multi, ms, mk);
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < pr.row_len[t]; ++j) {
        const size_t e = static_cast<size_t>(t) * stride + j;
        if (pr.row_seq[t] == S - 1) REQUIRE(ms[e] == 0.f);
        else REQUIRE(std::memcmp(&rs[e], &ms[e], 4) == 0);
      }
  }
}

}  // namespace

TEST_CASE("multi-pool indexer equals the single-pool indexer (both key formats, every launch path)") {
  auto rng = fresh_rng();
  for (auto fmt : {ki::KeyFormat::kBf16, ki::KeyFormat::kFp8}) {
    // Decode: one row per sequence, four sequences (pools).
    const std::vector<int> keys = {3000, 700, 5200, 1800};
    const std::vector<int32_t> seq = {0, 1, 2, 3}, len = {3000, 700, 5200, 1800};
    check_indexer_multi_pool(fmt, keys, seq, len, 512, -1, true, false, rng);     // scores + register select
    check_indexer_multi_pool(fmt, keys, seq, len, 512, 1, true, false, rng);      // fused, forced
    check_indexer_multi_pool(fmt, keys, seq, len, 512, 0, false, false, rng, 0);  // scores + round-1 row kernel
    check_indexer_multi_pool(fmt, keys, seq, len, 2048, -1, false, true, rng);    // scores only, pool outside
    // A row longer than 16384 keys: scores counting the first histogram, then the split top-k.
    check_indexer_multi_pool(fmt, {3000, 700, 17000, 1800}, seq, {3000, 700, 17000, 1800}, 512, -1, true, false, rng);
    // Short rows (<= k): the fused kernel chosen.
    const std::vector<int> short_keys = {300, 1000, 64};
    check_indexer_multi_pool(fmt, short_keys, {0, 1, 2, 1}, {300, 1000, 64, 999}, 1024, -1, true, false, rng);
    // Prefill chunk: 260 causal rows over three sequences (blocks of 4 / 8 rows mix sequences).
    std::vector<int32_t> pseq, plen;
    for (int r = 0; r < 260; ++r) {
      pseq.push_back(r % 3);
      plen.push_back(1 + (r * 7) % 900);
    }
    check_indexer_multi_pool(fmt, {900, 900, 900}, pseq, plen, 256, -1, false, false, rng);
    check_indexer_multi_pool(fmt, {900, 900, 900}, pseq, plen, 256, -1, false, true, rng);
  }
}

TEST_CASE("multi-pool indexer: bad pool parameters are rejected without launching") {
  // A valid multi-pool call first (so that the rejections below are the pool checks' doing).
  std::vector<uint8_t> zeros(64 * ki::kBf16RecordBytes, 0);
  const int32_t four = 4;
  Dev seq(4), len(4), bt(4), q(ki::kHeads * ki::kHeadDim * 2), w(ki::kHeads * 4), scores(16), keys(zeros.size()),
      tab(sizeof(ki::KeyPool));
  seq.put(zeros.data(), 4);  // sequence 0
  len.put(&four, 4);
  bt.put(zeros.data(), 4);   // page 0
  q.put(zeros.data(), ki::kHeads * ki::kHeadDim * 2);
  w.put(zeros.data(), ki::kHeads * 4);
  keys.put(zeros.data(), zeros.size());
  ki::KeyPool pool;
  pool.base = keys.p;
  tab.put(&pool, sizeof pool);
  ki::ScoreParams sp;
  sp.rows.num_rows = 1;
  sp.rows.row_seq = seq.as<int32_t>();
  sp.rows.row_len = len.as<int32_t>();
  sp.rows.block_tables = bt.as<int32_t>();
  sp.rows.block_table_stride = 1;
  sp.rows.max_row_len = 4;
  sp.format = ki::KeyFormat::kBf16;
  sp.q = q.p;
  sp.weights = w.as<float>();
  sp.scores = scores.as<float>();
  sp.score_stride = 4;
  sp.seq_pools = tab.as<ki::KeyPool>();
  sp.num_pools = 1;
  scores.poison();
  MP_CUDA_REQUIRE(ki::launch_indexer_scores(sp, nullptr));
  MP_CUDA_REQUIRE(cudaDeviceSynchronize());
  for (float v : scores.get<float>(4)) CHECK(v == 0.f);
  ki::ScoreParams b = sp;
  b.num_pools = 0;
  CHECK(ki::launch_indexer_scores(b, nullptr) == cudaErrorInvalidValue);
  b = sp;
  b.pool_layer = -1;
  CHECK(ki::launch_indexer_scores(b, nullptr) == cudaErrorInvalidValue);
  (void)cudaGetLastError();
}
