// glm5k::launch_attention_prep (kernels/common/simple_forward.cuh: mla_prep | indexer_prep + the fast
// indexer's query conversion in one launch, the CUDA backend's attention fusion) against the three
// separate launches it replaces, on the same fresh random inputs at GLM-5 sizes (64 heads, kv_lora 512 +
// rope 64, nope 192; indexer 32 x 128): every output byte equal (cache pools, q_nope, q_rot, qi after
// RoPE, the head weights, the converted query and its scales), bf16 and FP8 records, 1 / 5 / 32 rows, with
// and without the programmatic-dependent-launch attribute; with mla's query half switched off
// (q_nope_out null) the query buffers keep their poison and the records are still equal.
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/common/fast_bridge.cuh"
#include "kernels/common/simple_forward.cuh"

namespace {

#define CK(x) REQUIRE((x) == cudaSuccess)

template <typename T>
struct Buf {
  T* p = nullptr;
  size_t n = 0;
  explicit Buf(size_t count) : n(count) { CK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
  ~Buf() { cudaFree(p); }
  void put(const std::vector<T>& v) { CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> v(n * sizeof(T));
    CK(cudaMemcpy(v.data(), p, v.size(), cudaMemcpyDeviceToHost));
    return v;
  }
  void poison() { CK(cudaMemset(p, 0xff, n * sizeof(T))); }
};

// One sequence in one cache of n_pages x page slots (layer 0 of 1), rows at distinct random positions.
struct World {
  glm5k::RecordFormat fmt;
  int rows, heads = 64, nope = 192, iheads = 32, page = 16, n_pages = 8;
  Buf<char> lat, idx;
  Buf<int32_t> bt, seq, pos;
  Buf<int64_t> slot;
  Buf<glm5k::SeqCache> seqs;
  Buf<float> ckv, kv_norm, q, cos, sin, kraw, knw, knb, qi, wts, q_rot, qi_scale;
  Buf<__nv_bfloat16> q_nope;
  Buf<unsigned char> qi_q;
  glm5k::BatchRows b{};
  World(int R, bool fp8)
      : fmt{fp8 ? glm5k::kRecFp8 : glm5k::kRecBf16, fp8 ? glm5k::kRecFp8 : glm5k::kRecBf16, 512, 64, 128}, rows(R),
        lat(static_cast<size_t>(8 * 16) * fmt.latent_bytes()), idx(static_cast<size_t>(8 * 16) * fmt.index_bytes()),
        bt(8), seq(R), pos(R), slot(R), seqs(1), ckv(R * 576), kv_norm(512), q(static_cast<size_t>(R) * 64 * 256),
        cos(R * 32), sin(R * 32), kraw(R * 128), knw(128), knb(128), qi(static_cast<size_t>(R) * 32 * 128),
        wts(R * 32), q_rot(static_cast<size_t>(R) * 64 * 64), qi_scale(R * 32), q_nope(static_cast<size_t>(R) * 64 * 192),
        qi_q(static_cast<size_t>(R) * 32 * 128 * 2) {}
};

// The same random inputs into both worlds (outputs and pools poisoned).
void fill(World& a, World& b, std::mt19937_64& g) {
  std::uniform_real_distribution<float> u(-1.f, 1.f), ang(-3.f, 3.f);
  auto rnd = [&](size_t n, float s) {
    std::vector<float> v(n);
    for (auto& x : v) x = s * u(g);
    return v;
  };
  std::vector<int32_t> bt(a.n_pages);
  std::iota(bt.begin(), bt.end(), 0);
  std::shuffle(bt.begin(), bt.end(), g);
  std::vector<int32_t> all(a.n_pages * a.page);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), g);
  std::vector<int32_t> pos(all.begin(), all.begin() + a.rows), seq(a.rows, 0);
  std::vector<int64_t> slot;
  for (int32_t p : pos) slot.push_back(static_cast<int64_t>(bt[p / a.page]) * a.page + p % a.page);
  std::vector<float> cs(a.rows * 32), sn(a.rows * 32);
  for (size_t i = 0; i < cs.size(); ++i) {
    const float t = ang(g);
    cs[i] = std::cos(t);
    sn[i] = std::sin(t);
  }
  const auto ckv = rnd(a.ckv.n, 2.f), kvn = rnd(512, 1.f), q = rnd(a.q.n, 3.f), kraw = rnd(a.kraw.n, 2.f),
             knw = rnd(128, 1.f), knb = rnd(128, 0.1f), qi = rnd(a.qi.n, 3.f), wts = rnd(a.wts.n, 1.f);
  for (World* w : {&a, &b}) {
    w->bt.put(bt);
    w->pos.put(pos);
    w->seq.put(seq);
    w->slot.put(slot);
    glm5k::SeqCache s;
    s.latent = w->lat.p;
    s.index = w->idx.p;
    s.latent_layer_bytes = static_cast<int64_t>(w->lat.n);
    s.index_layer_bytes = static_cast<int64_t>(w->idx.n);
    s.bt_offset = 0;
    s.page_size = w->page;
    w->seqs.put({s});
    w->b = {w->seq.p, w->pos.p, w->slot.p, w->seqs.p, w->bt.p, w->rows};
    w->ckv.put(ckv);
    w->kv_norm.put(kvn);
    w->q.put(q);
    w->cos.put(cs);
    w->sin.put(sn);
    w->kraw.put(kraw);
    w->knw.put(knw);
    w->knb.put(knb);
    w->qi.put(qi);
    w->wts.put(wts);
    w->lat.poison();
    w->idx.poison();
    w->q_nope.poison();
    w->q_rot.poison();
    w->qi_q.poison();
    w->qi_scale.poison();
  }
}

glm5k::MlaPrepParams mla_of(World& w, bool query) {
  return {w.ckv.p, w.kv_norm.p, w.q.p, w.cos.p, w.sin.p, w.b, w.fmt, 0, w.heads, w.nope,
          query ? w.q_nope.p : nullptr, w.q_rot.p};
}
glm5k::IndexerPrepParams idx_of(World& w) {
  glm5k::IndexerPrepParams p{};
  p.kraw = w.kraw.p;
  p.k_norm_w = w.knw.p;
  p.k_norm_b = w.knb.p;
  p.qi = w.qi.p;
  p.wts = w.wts.p;
  p.cos = w.cos.p;
  p.sin = w.sin.p;
  p.batch = w.b;
  p.fmt = w.fmt;
  p.layer = 0;
  p.heads = w.iheads;
  p.head_scale = 1.f / std::sqrt(32.f);
  return p;
}

bool pdl_ok() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  return major >= 9;
}

}  // namespace

TEST_CASE("attention prep: one fused launch equals mla_prep + indexer_prep + indexer_query byte for byte") {
  std::mt19937_64 g(std::random_device{}());
  for (const bool fp8 : {false, true})
    for (const int R : {1, 5, 32})
      for (const bool pdl : {false, true}) {
        if (pdl && !pdl_ok()) continue;
        for (const bool query : {true, false}) {
          World a(R, fp8), b(R, fp8);
          fill(a, b, g);
          // Separate launches (the unfused backend path).
          CK(glm5k::launch_mla_prep(mla_of(a, query), nullptr));
          CK(glm5k::launch_indexer_prep(idx_of(a), nullptr));
          CK(glm5k::launch_indexer_query(a.qi.p, R, a.iheads, 128, fp8, a.qi_q.p, a.qi_scale.p, nullptr));
          // Fused.
          glm5k::AttentionPrepParams p;
          p.mla = mla_of(b, query);
          p.idx = idx_of(b);
          p.q_out = b.qi_q.p;
          p.q_scale = b.qi_scale.p;
          p.q_fp8 = fp8;
          p.pdl = pdl;
          CK(glm5k::launch_attention_prep(p, nullptr));
          CK(cudaDeviceSynchronize());
          int bad = 0;
          auto same = [&](const char* what, const std::vector<unsigned char>& x, const std::vector<unsigned char>& y) {
            const bool eq = x == y;
            if (!eq) std::printf("[attention-prep] %s differs\n", what);
            bad += !eq;
          };
          same("latent pool", a.lat.bytes(), b.lat.bytes());
          same("indexer-key pool", a.idx.bytes(), b.idx.bytes());
          same("q_nope", a.q_nope.bytes(), b.q_nope.bytes());
          same("q_rot", a.q_rot.bytes(), b.q_rot.bytes());
          same("qi", a.qi.bytes(), b.qi.bytes());
          same("head weights", a.wts.bytes(), b.wts.bytes());
          const auto qa = a.qi_q.bytes(), qb = b.qi_q.bytes();
          const size_t qbytes = static_cast<size_t>(R) * 32 * 128 * (fp8 ? 1 : 2);  // the rest stays poisoned
          same("converted query", qa, qb);
          if (fp8) same("query scales", a.qi_scale.bytes(), b.qi_scale.bytes());
          // The records were written at all (not both left poisoned): one row's latent record differs from 0xff.
          const auto lat = b.lat.bytes();
          CHECK(std::count(lat.begin(), lat.end(), static_cast<unsigned char>(0xff)) < static_cast<long>(lat.size()));
          CHECK(std::count(qb.begin(), qb.begin() + qbytes, static_cast<unsigned char>(0xff)) < static_cast<long>(qbytes));
          if (!query) {  // the query half skipped: its buffers keep their poison
            const auto qn = b.q_nope.bytes(), qr = b.q_rot.bytes();
            CHECK(std::count(qn.begin(), qn.end(), static_cast<unsigned char>(0xff)) == static_cast<long>(qn.size()));
            CHECK(std::count(qr.begin(), qr.end(), static_cast<unsigned char>(0xff)) == static_cast<long>(qr.size()));
          }
          std::printf("[attention-prep] %s records, rows %2d, pdl %d, mla query half %s: %s\n", fp8 ? "fp8 " : "bf16", R,
                      pdl ? 1 : 0, query ? "on " : "off", bad ? "DIFFERENT" : "byte-identical");
          CHECK(bad == 0);
        }
      }
}

TEST_CASE("attention prep: bad parameters are rejected") {
  World w(2, false);
  glm5k::AttentionPrepParams p;
  p.mla = mla_of(w, true);
  p.idx = idx_of(w);
  p.mla.batch.rows = 2;  // World leaves its BatchRows empty until fill(): give the launch rows to check
  p.idx.batch.rows = 3;  // rows disagree
  CHECK(glm5k::launch_attention_prep(p, nullptr) == cudaErrorInvalidValue);
  p.idx.batch.rows = 2;
  p.q_out = w.qi_q.p;
  p.q_fp8 = true;  // FP8 query without scales
  CHECK(glm5k::launch_attention_prep(p, nullptr) == cudaErrorInvalidValue);
  CK(cudaDeviceSynchronize());
}

TEST_CASE("attention prep: the residual RMSNorm launched as a programmatic dependent equals the ordinary launch") {
  if (!pdl_ok()) return;
  std::mt19937_64 g(std::random_device{}());
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (const int R : {1, 32}) {
    const int D = 6144;
    std::vector<float> x(static_cast<size_t>(R) * D), dl(x.size()), w(D);
    for (auto& v : x) v = u(g);
    for (auto& v : dl) v = u(g);
    for (auto& v : w) v = u(g);
    Buf<float> x0(x.size()), x1(x.size()), d(dl.size()), dw(w.size()), f0(x.size()), f1(x.size());
    Buf<__nv_bfloat16> b0(x.size()), b1(x.size());
    x0.put(x);
    x1.put(x);
    d.put(dl);
    dw.put(w);
    for (auto* o : {&f0, &f1}) o->poison();
    // A kernel before the dependent one: the first norm (ordinary) writes x0, the second (PDL) x1.
    CK(glm5k::launch_residual_rms_norm(x0.p, d.p, nullptr, R, D, dw.p, 1e-6f, b0.p, f0.p, nullptr, false));
    CK(glm5k::launch_residual_rms_norm(x1.p, d.p, nullptr, R, D, dw.p, 1e-6f, b1.p, f1.p, nullptr, true));
    CK(cudaDeviceSynchronize());
    CHECK(x0.bytes() == x1.bytes());
    CHECK(b0.bytes() == b1.bytes());
    CHECK(f0.bytes() == f1.bytes());
    std::printf("[attention-prep] residual RMSNorm %d x %d, PDL launch vs ordinary: %s\n", R, D,
                f0.bytes() == f1.bytes() ? "byte-identical" : "DIFFERENT");
  }
}
