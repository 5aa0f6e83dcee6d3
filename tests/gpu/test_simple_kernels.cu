// The simple forward kernels (kernels/common/simple_forward.cuh) alone, against float64 CPU references
// on random inputs at GLM-5 dimensions: outputs poisoned before each run, fresh inputs per case, NaN
// never passes.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/common/simple_forward.cuh"

namespace {

#define CK(x) REQUIRE((x) == cudaSuccess)

template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { CK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) { CK(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    CK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  void poison() { CK(cudaMemset(p, 0xff, n * sizeof(T))); }  // NaN for float / bf16, -1 for ints
};

std::mt19937_64& rng() {
  static std::mt19937_64 g(std::random_device{}());
  return g;
}
float uni(float a = -1.f, float b = 1.f) { return std::uniform_real_distribution<float>(a, b)(rng()); }
uint16_t bf_bits(float x) {
  __nv_bfloat16 b = __float2bfloat16(x);
  uint16_t u;
  std::memcpy(&u, &b, 2);
  return u;
}
float e4m3(uint8_t v) {
  __nv_fp8_e4m3 x;
  x.__x = v;
  return static_cast<float>(x);
}
uint8_t to_e4m3(float f) { return __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3); }

double rel_err(const std::vector<double>& ref, const std::vector<float>& got) {
  double d = 0, m = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    d = std::max(d, std::fabs(ref[i] - got[i]));
    m = std::max(m, std::fabs(ref[i]));
  }
  return m > 0 ? d / m : d;
}
float bf_to_f(uint16_t u) {
  uint32_t x = static_cast<uint32_t>(u) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// One sequence with ctx tokens in scrambled pages; records of one layer filled with random values.
struct Cache {
  glm5k::RecordFormat fmt;
  int32_t page = 64, ctx = 0;
  std::vector<int32_t> bt;
  std::vector<char> lat, idx;          // host copies of the records
  std::vector<float> lat_val, idx_val;  // decoded values [slot][...]
  Cache(int32_t ctx_, bool fp8, int32_t kvr, int32_t rope, int32_t d) : ctx(ctx_) {
    fmt.latent_dtype = fp8 ? glm5k::kRecFp8 : glm5k::kRecBf16;
    fmt.index_dtype = fp8 ? glm5k::kRecFp8 : glm5k::kRecBf16;
    fmt.kv_lora = kvr;
    fmt.rope = rope;
    fmt.index_dim = d;
    const int32_t pages = (ctx + page - 1) / page;
    bt.resize(pages);
    std::iota(bt.begin(), bt.end(), 0);
    std::shuffle(bt.begin(), bt.end(), rng());
    const int64_t slots = static_cast<int64_t>(pages) * page, lb = fmt.latent_bytes(), ib = fmt.index_bytes();
    lat.assign(slots * lb, 0);
    idx.assign(slots * ib, 0);
    lat_val.assign(slots * (kvr + rope), 0.f);
    idx_val.assign(slots * d, 0.f);
    for (int64_t s = 0; s < slots; ++s) {
      char* L = &lat[s * lb];
      float* LV = &lat_val[s * (kvr + rope)];
      if (fp8) {
        for (int g = 0; g < (kvr + 127) / 128; ++g) {
          const float sc = uni(0.001f, 0.01f);
          std::memcpy(L + kvr + 4 * g, &sc, 4);
          for (int c = g * 128; c < std::min(kvr, (g + 1) * 128); ++c) {
            const uint8_t q = to_e4m3(uni(-448.f, 448.f));
            L[c] = static_cast<char>(q);
            LV[c] = e4m3(q) * sc;
          }
        }
        for (int j = 0; j < rope; ++j) {
          const uint16_t b = bf_bits(uni());
          std::memcpy(L + kvr + 4 * ((kvr + 127) / 128) + 2 * j, &b, 2);
          LV[kvr + j] = bf_to_f(b);
        }
      } else {
        for (int c = 0; c < kvr + rope; ++c) {
          const uint16_t b = bf_bits(uni());
          std::memcpy(L + 2 * c, &b, 2);
          LV[c] = bf_to_f(b);
        }
      }
      // FP8 keys: the per-page layout (a page's vectors, then its scales), bf16: slot * 2d.
      char* X = fp8 ? &idx[(s / page) * page * ib + (s % page) * d] : &idx[s * ib];
      float* XV = &idx_val[s * d];
      if (fp8) {
        const float sc = uni(0.001f, 0.01f);
        std::memcpy(&idx[(s / page) * page * ib + page * d + (s % page) * 4], &sc, 4);
        for (int j = 0; j < d; ++j) {
          const uint8_t q = to_e4m3(uni(-448.f, 448.f));
          X[j] = static_cast<char>(q);
          XV[j] = e4m3(q) * sc;
        }
      } else {
        for (int j = 0; j < d; ++j) {
          const uint16_t b = bf_bits(uni());
          std::memcpy(X + 2 * j, &b, 2);
          XV[j] = bf_to_f(b);
        }
      }
    }
  }
  int64_t slot(int32_t pos) const { return static_cast<int64_t>(bt[pos / page]) * page + pos % page; }
};

// Device side of a Cache plus row descriptions (one sequence, layer 0).
struct DevBatch {
  Dev<char> lat, idx;
  Dev<int32_t> bt, seq, pos;
  Dev<int64_t> slot;
  Dev<glm5k::SeqCache> seqs;
  glm5k::BatchRows rows{};
  DevBatch(const Cache& c, const std::vector<int32_t>& positions)
      : lat(c.lat), idx(c.idx), bt(c.bt), seq(std::vector<int32_t>(positions.size(), 0)), pos(positions),
        slot(positions.size()), seqs(1) {
    glm5k::SeqCache s;
    s.latent = lat.p;
    s.index = idx.p;
    s.latent_layer_bytes = static_cast<int64_t>(c.lat.size());
    s.index_layer_bytes = static_cast<int64_t>(c.idx.size());
    s.bt_offset = 0;
    s.page_size = c.page;
    CK(cudaMemcpy(seqs.p, &s, sizeof s, cudaMemcpyHostToDevice));
    std::vector<int64_t> sl;
    for (int32_t p : positions) sl.push_back(c.slot(p));
    CK(cudaMemcpy(slot.p, sl.data(), sl.size() * 8, cudaMemcpyHostToDevice));
    rows = {seq.p, pos.p, slot.p, seqs.p, bt.p, static_cast<int32_t>(positions.size())};
  }
};

}  // namespace

TEST_CASE("simple kernels: sparse MLA at GLM-5 sizes (64 heads, 512 + 64, top-k 2048) vs float64") {
  const int32_t H = 64, kvr = 512, rope = 64, k = 2048, ctx = 6000;
  for (bool fp8 : {false, true}) {
    CAPTURE(fp8);
    Cache cache(ctx, fp8, kvr, rope, 128);
    const std::vector<int32_t> positions = {ctx - 1, 1500, 37, ctx - 700};
    const int32_t R = static_cast<int32_t>(positions.size());
    DevBatch b(cache, positions);
    std::vector<int32_t> sel(R * k, -1), nsel(R);
    for (int32_t r = 0; r < R; ++r) {
      std::vector<int32_t> all(positions[r] + 1);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng());
      nsel[r] = std::min<int32_t>(k, positions[r] + 1);
      std::sort(all.begin(), all.begin() + nsel[r]);
      std::copy(all.begin(), all.begin() + nsel[r], sel.begin() + r * k);
    }
    std::vector<float> ql(R * H * kvr), qr(R * H * rope);
    for (auto& v : ql) v = uni(-0.3f, 0.3f) / (fp8 ? 0.005f * 448 / 1.7f : 1.f);
    for (auto& v : qr) v = uni(-0.3f, 0.3f);
    Dev<float> dql(ql), dqr(qr);
    Dev<int32_t> dsel(sel), dnsel(nsel);
    Dev<__nv_bfloat16> out(static_cast<size_t>(R) * H * kvr);
    out.poison();
    const float scale = 1.0f / 16.0f;
    glm5k::SparseMlaParams p{dql.p, dqr.p, dsel.p, dnsel.p, k, b.rows, cache.fmt, 0, H, scale, out.p};
    CK(glm5k::launch_sparse_mla(p, nullptr));
    CK(cudaDeviceSynchronize());
    const auto got_b = out.get();
    std::vector<float> got(got_b.size());
    for (size_t i = 0; i < got.size(); ++i) got[i] = __bfloat162float(got_b[i]);
    std::vector<double> ref(got.size());
    for (int32_t r = 0; r < R; ++r)
      for (int32_t h = 0; h < H; ++h) {
        const float* q = &ql[(static_cast<int64_t>(r) * H + h) * kvr];
        const float* qo = &qr[(static_cast<int64_t>(r) * H + h) * rope];
        std::vector<double> s(nsel[r]);
        double mx = -INFINITY;
        for (int32_t i = 0; i < nsel[r]; ++i) {
          const float* v = &cache.lat_val[cache.slot(sel[r * k + i]) * (kvr + rope)];
          double d = 0;
          for (int c = 0; c < kvr; ++c) d += static_cast<double>(q[c]) * v[c];
          for (int j = 0; j < rope; ++j) d += static_cast<double>(qo[j]) * v[kvr + j];
          s[i] = d * scale;
          mx = std::max(mx, s[i]);
        }
        double sum = 0;
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int c = 0; c < kvr; ++c) {
          double o = 0;
          for (int32_t i = 0; i < nsel[r]; ++i) o += s[i] / sum * cache.lat_val[cache.slot(sel[r * k + i]) * (kvr + rope) + c];
          ref[(static_cast<int64_t>(r) * H + h) * kvr + c] = o;
        }
      }
    const double e = rel_err(ref, got);
    MESSAGE("sparse MLA " << (fp8 ? "FP8" : "bf16") << " records: rel error " << e);
    CHECK(e < 1e-2);
  }
}

TEST_CASE("simple kernels: indexer scores and exact top-k at GLM-5 sizes (32 x 128, k 2048) vs float64") {
  const int32_t nh = 32, d = 128, k = 2048, ctx = 8192;
  for (bool fp8 : {false, true}) {
    CAPTURE(fp8);
    Cache cache(ctx, fp8, 512, 64, d);
    const std::vector<int32_t> positions = {ctx - 1, 4000, 100, 2047, 2048};
    const int32_t R = static_cast<int32_t>(positions.size());
    DevBatch b(cache, positions);
    std::vector<float> qi(R * nh * d), w(R * nh);
    for (auto& v : qi) v = uni();
    for (auto& v : w) v = uni(0.f, 1.f);
    Dev<float> dqi(qi), dw(w);
    const int32_t cap = ctx;
    Dev<float> scores(static_cast<size_t>(R) * cap);
    scores.poison();
    const float ds = 1.0f / std::sqrt(128.f);
    glm5k::IndexerScoreParams sp{dqi.p, dw.p, b.rows, cache.fmt, 0, nh, ds, cap, scores.p};
    CK(glm5k::launch_indexer_scores(sp, nullptr));
    Dev<int32_t> sel(static_cast<size_t>(R) * k), nsel(R);
    sel.poison();
    CK(glm5k::launch_topk_select(scores.p, cap, b.pos.p, R, k, sel.p, nsel.p, nullptr));
    CK(cudaDeviceSynchronize());
    const auto sg = scores.get();
    std::vector<double> ref;
    std::vector<float> got;
    for (int32_t r = 0; r < R; ++r)
      for (int32_t t = 0; t <= positions[r]; ++t) {
        const float* key = &cache.idx_val[cache.slot(t) * d];
        double s = 0;
        for (int32_t h = 0; h < nh; ++h) {
          double dot = 0;
          for (int j = 0; j < d; ++j) dot += static_cast<double>(qi[(r * nh + h) * d + j]) * key[j];
          s += std::max(0.0, dot * ds) * w[r * nh + h];
        }
        ref.push_back(s);
        got.push_back(sg[static_cast<int64_t>(r) * cap + t]);
      }
    const double e = rel_err(ref, got);
    MESSAGE("indexer scores " << (fp8 ? "FP8" : "bf16") << " keys: rel error " << e);
    CHECK(e < 1e-4);
    // Top-k of the kernel's own scores, by the CPU rule (largest first, lower position on ties).
    const auto sl = sel.get();
    const auto ns = nsel.get();
    for (int32_t r = 0; r < R; ++r) {
      CAPTURE(r);
      const int32_t n = positions[r] + 1, kk = std::min(k, n);
      for (int32_t t = positions[r] + 1; t < cap; ++t) REQUIRE(std::isinf(sg[static_cast<int64_t>(r) * cap + t]));
      std::vector<int32_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      const float* row = &sg[static_cast<int64_t>(r) * cap];
      std::partial_sort(order.begin(), order.begin() + kk, order.end(),
                        [&](int32_t a, int32_t bb) { return row[a] > row[bb] || (row[a] == row[bb] && a < bb); });
      std::sort(order.begin(), order.begin() + kk);
      CHECK(ns[r] == kk);
      CHECK(std::equal(order.begin(), order.begin() + kk, sl.begin() + static_cast<int64_t>(r) * k));
      for (int32_t i = kk; i < k; ++i) CHECK(sl[static_cast<int64_t>(r) * k + i] == -1);
    }
  }
}

TEST_CASE("simple kernels: top-k ties go to the lower position") {
  const int32_t cap = 5000, k = 2048;
  std::vector<float> s(cap);
  for (int32_t t = 0; t < cap; ++t) s[t] = static_cast<float>(t % 7 == 0 ? 2 : t % 3);  // many equal scores
  Dev<float> ds(s);
  Dev<int32_t> pos(std::vector<int32_t>{cap - 1}), sel(k), nsel(1);
  sel.poison();
  CK(glm5k::launch_topk_select(ds.p, cap, pos.p, 1, k, sel.p, nsel.p, nullptr));
  CK(cudaDeviceSynchronize());
  std::vector<int32_t> order(cap);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
  std::sort(order.begin(), order.begin() + k);
  const auto got = sel.get();
  CHECK(std::equal(order.begin(), order.begin() + k, got.begin()));
}

TEST_CASE("simple kernels: routing, pair plan and grouped FP8 expert GEMM at GLM-5 sizes vs float64") {
  const int32_t R = 24, E = 256, K = 8, D = 6144, I = 2048;
  std::vector<float> logits(R * E), bias(E);
  for (auto& v : logits) v = uni(-3.f, 3.f);
  for (auto& v : bias) v = uni(-0.1f, 0.1f);
  Dev<float> dl(logits), db(bias), dw(R * K);
  Dev<int32_t> ids(R * K);
  ids.poison();
  glm5k::MoeRouteParams mp{dl.p, db.p, R, E, K, 1, 1, true, 2.5f, ids.p, dw.p};
  CK(glm5k::launch_moe_route(mp, nullptr));
  const int32_t max_tiles = glm5k::moe_max_tiles(R, K, E);
  Dev<int32_t> pair_rows(R * K), pair_of(R * K), tiles(3 * max_tiles), n_tiles(1);
  CK(glm5k::launch_moe_plan(ids.p, R, K, E, pair_rows.p, pair_of.p, tiles.p, n_tiles.p, max_tiles, nullptr));
  CK(cudaDeviceSynchronize());
  const auto gi = ids.get();
  const auto gw = dw.get();
  for (int32_t r = 0; r < R; ++r) {
    std::vector<int32_t> ord(E);
    std::iota(ord.begin(), ord.end(), 0);
    auto sig = [&](int32_t e) { return 1.0 / (1.0 + std::exp(-static_cast<double>(logits[r * E + e]))); };
    std::partial_sort(ord.begin(), ord.begin() + K, ord.end(), [&](int32_t a, int32_t b) {
      const double ca = sig(a) + bias[a], cb = sig(b) + bias[b];
      return ca > cb || (ca == cb && a < b);
    });
    double sum = 0;
    for (int32_t i = 0; i < K; ++i) sum += sig(ord[i]);
    std::vector<std::pair<int32_t, double>> want;
    for (int32_t i = 0; i < K; ++i) want.push_back({ord[i], sig(ord[i]) / sum * 2.5});
    std::sort(want.begin(), want.end());
    for (int32_t i = 0; i < K; ++i) {
      CHECK(gi[r * K + i] == want[i].first);
      CHECK(std::fabs(gw[r * K + i] - want[i].second) < 1e-5);
    }
  }
  // Plan: each pair appears once, grouped by expert ascending.
  const auto pr = pair_rows.get(), po = pair_of.get(), tl = tiles.get();
  const int32_t nt = n_tiles.get()[0];
  std::vector<int> seen(R * K, 0);
  for (int32_t i = 0; i < R * K; ++i) {
    REQUIRE(po[i] >= 0);
    REQUIRE(po[i] < R * K);
    ++seen[po[i]];
    CHECK(pr[po[i]] == i / K);
  }
  for (int v : seen) CHECK(v == 1);
  std::vector<int32_t> inverse(R * K);
  for (int32_t i = 0; i < R * K; ++i) inverse[po[i]] = i;
  int32_t covered = 0;
  for (int32_t t = 0; t < nt; ++t) {
    CHECK(tl[3 * t + 2] > 0);
    CHECK(tl[3 * t + 2] <= glm5k::kRowGemmTileM);
    for (int32_t j = 0; j < tl[3 * t + 2]; ++j) CHECK(gi[inverse[tl[3 * t + 1] + j]] == tl[3 * t]);
    covered += tl[3 * t + 2];
  }
  CHECK(covered == R * K);

  // Grouped FP8 GEMM over these pairs; experts' weights only for the experts used (others untouched).
  // Not all 256 experts are materialised on the host: each used expert gets a compact group slot.
  std::vector<int32_t> used;
  for (int32_t t = 0; t < nt; ++t)
    if (used.empty() || used.back() != tl[3 * t]) used.push_back(tl[3 * t]);
  std::vector<int32_t> tl2 = tl;
  for (int32_t t = 0; t < nt; ++t)
    tl2[3 * t] = static_cast<int32_t>(std::lower_bound(used.begin(), used.end(), tl[3 * t]) - used.begin());
  const int32_t G = static_cast<int32_t>(used.size());
  const int64_t per = static_cast<int64_t>(I) * D, sld = D / 128, sper = (I / 128) * sld;
  std::vector<uint8_t> w(G * per);
  std::vector<float> sc(G * sper);
  std::mt19937 fast(static_cast<uint32_t>(rng()()));
  for (auto& v : w) {
    v = static_cast<uint8_t>(fast());
    if ((v & 0x7f) == 0x7f) v ^= 1;  // no NaN codes
  }
  for (auto& v : sc) v = uni(1e-4f, 2e-4f);
  std::vector<__nv_bfloat16> x(R * D);
  for (auto& v : x) v = __float2bfloat16(uni());
  Dev<uint8_t> dwq(w);
  Dev<float> dsc(sc);
  Dev<__nv_bfloat16> dx(x);
  Dev<int32_t> dtl(tl2);
  Dev<float> out(static_cast<size_t>(R) * K * I);
  out.poison();
  glm5k::RowGemmParams p;
  p.a = dx.p;
  p.lda = D;
  p.a_rows = pair_rows.p;
  p.w = dwq.p;
  p.w_dtype = glm5k::kWFp8;
  p.ldw = D;
  p.scale = dsc.p;
  p.ld_scale = sld;
  p.w_group_stride = per;
  p.scale_group_stride = sper;
  p.tiles = dtl.p;
  p.n_tiles = n_tiles.p;
  p.max_tiles = max_tiles;
  p.n = I;
  p.k = D;
  p.c = out.p;
  p.ldc = I;
  CK(glm5k::launch_row_gemm(p, nullptr));
  CK(cudaDeviceSynchronize());
  const auto got = out.get();
  std::vector<double> ref(got.size());
  for (int32_t t = 0; t < nt; ++t) {
    const int32_t g = tl2[3 * t];
    for (int32_t j = 0; j < tl[3 * t + 2]; ++j) {
      const int32_t pair = tl[3 * t + 1] + j, row = pr[pair];
      for (int32_t n = 0; n < I; ++n) {
        double acc = 0;
        for (int32_t kk = 0; kk < D; ++kk)
          acc += static_cast<double>(__bfloat162float(x[row * D + kk])) * e4m3(w[g * per + static_cast<int64_t>(n) * D + kk]) *
                 sc[g * sper + (n / 128) * sld + kk / 128];
        ref[static_cast<int64_t>(pair) * I + n] = acc;
      }
    }
  }
  const double e = rel_err(ref, got);
  MESSAGE("grouped FP8 expert GEMM: rel error " << e);
  CHECK(e < 1e-4);
}

TEST_CASE("simple kernels: residual RMSNorm (6144) and argmax (NaN never wins, ties to the lower id)") {
  const int32_t R = 5, D = 6144;
  std::vector<float> x(R * D), dl(R * D), w(D);
  for (auto& v : x) v = uni(-4.f, 4.f);
  for (auto& v : dl) v = uni();
  for (auto& v : w) v = uni(0.5f, 1.5f);
  Dev<float> dx(x), ddl(dl), dw(w), of(R * D);
  Dev<__nv_bfloat16> ob(R * D);
  of.poison();
  ob.poison();
  CK(glm5k::launch_residual_rms_norm(dx.p, ddl.p, nullptr, R, D, dw.p, 1e-5f, ob.p, of.p, nullptr));
  CK(cudaDeviceSynchronize());
  std::vector<double> ref(R * D);
  for (int32_t r = 0; r < R; ++r) {
    double ss = 0;
    for (int32_t i = 0; i < D; ++i) {
      const double v = static_cast<double>(x[r * D + i]) + dl[r * D + i];
      ss += v * v;
    }
    const double inv = 1.0 / std::sqrt(ss / D + 1e-5);
    for (int32_t i = 0; i < D; ++i) ref[r * D + i] = w[i] * ((static_cast<double>(x[r * D + i]) + dl[r * D + i]) * inv);
  }
  CHECK(rel_err(ref, of.get()) < 1e-5);
  const auto b = ob.get();
  std::vector<float> bfv(b.size());
  for (size_t i = 0; i < b.size(); ++i) bfv[i] = __bfloat162float(b[i]);
  CHECK(rel_err(ref, bfv) < 1e-2);

  const int32_t V = 154880;
  std::vector<float> lg(3 * V);
  for (auto& v : lg) v = uni(-10.f, 10.f);
  lg[0 * V + 777] = 50.f;
  lg[1 * V + 5] = NAN;
  lg[1 * V + 90000] = 60.f;
  lg[1 * V + 100000] = 60.f;  // tie: 90000 wins
  lg[2 * V + V - 1] = 70.f;
  Dev<float> dlg(lg);
  Dev<int32_t> am(3);
  am.poison();
  CK(glm5k::launch_argmax_rows(dlg.p, 3, V, am.p, nullptr));
  CK(cudaDeviceSynchronize());
  const auto a = am.get();
  CHECK(a[0] == 777);
  CHECK(a[1] == 90000);
  CHECK(a[2] == V - 1);
}
