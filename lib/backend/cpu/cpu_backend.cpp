#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_cache.hpp"
#include "backend/cpu/cpu_weights.hpp"
#include "backend/cpu/ops.hpp"
#include "backend/cpu/rope.hpp"
#include "runtime/error.hpp"
#include "runtime/thread_pool.hpp"

namespace glm5rt {
namespace {

using namespace cpu;

// transformers 5.17 rotates interleaved pairs (2i, 2i+1) in both the MLA rope dims and the indexer's
// rope dims (docs/GLM5.md step 4). Checked against the fixtures (tests/fixture): the split-half layout
// of later transformers versions changes every layer's output.
constexpr RopeLayout kMlaRope = RopeLayout::interleaved;
constexpr RopeLayout kIndexerRope = RopeLayout::interleaved;
// transformers 5.17 multiplies the softmax scale by mscale(factor, mscale_all_dim)^2 for YaRN
// (docs/GLM5.md step 6); checked on the tiny-yarn fixture.
constexpr bool kYarnSoftmaxMscale = true;

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ModelConfig& c, const ModelWeights& w, int n_threads, const std::function<bool(float)>& progress)
      : config_(c), pool_(n_threads), rope_(Rope::from_config(c)),
        softmax_scale_(attention_softmax_scale(c, kYarnSoftmaxMscale)) {
    require(c.qk_rope_head_dim % 2 == 0 && c.index_head_dim >= c.qk_rope_head_dim, Status::format,
            "unsupported rope / indexer head dims");
    require(c.n_group >= 1 && c.n_routed_experts % c.n_group == 0, Status::format,
            "n_routed_experts must be a multiple of n_group");
    weights_ = decode_weights(c, w, progress);
  }

  const char* name() const override { return "cpu"; }
  int32_t kind() const override { return GLM5RT_BACKEND_CPU; }
  const ModelConfig& config() const override { return config_; }
  int64_t cache_bytes_per_token(const CacheDtypes& dtypes) const override {
    check_dtypes(dtypes);
    return record_floats_per_token() * 4;
  }

  std::unique_ptr<CacheStorage> create_cache(int64_t n_pages, int32_t page_size, const CacheDtypes& dtypes) override {
    check_dtypes(dtypes);
    return std::make_unique<CpuCache>(n_pages, page_size, config_.num_hidden_layers, latent_dim(), config_.index_head_dim);
  }

  void forward(const BatchPlan& plan, float* logits, const std::function<bool()>& should_stop,
               ForwardProbe* probe) override;

  void copy_page(CacheStorage& cache, int32_t src, int32_t dst) const override {
    dynamic_cast<CpuCache&>(cache).copy_page(src, dst);
  }

  void export_records(const CacheStorage& cache, const std::vector<int32_t>& bt, int64_t n, float* out) const override {
    const auto& cc = dynamic_cast<const CpuCache&>(cache);
    const int64_t rec = latent_dim() + config_.index_head_dim;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
        const int64_t slot = static_cast<int64_t>(bt[t / cc.page_size()]) * cc.page_size() + t % cc.page_size();
        float* dst = out + (t * config_.num_hidden_layers + l) * rec;
        std::memcpy(dst, cc.latent(l, slot), latent_dim() * sizeof(float));
        std::memcpy(dst + latent_dim(), cc.index_key(l, slot), config_.index_head_dim * sizeof(float));
      }
  }
  void import_records(CacheStorage& cache, const std::vector<int32_t>& bt, int64_t n, const float* in) const override {
    auto& cc = dynamic_cast<CpuCache&>(cache);
    const int64_t rec = latent_dim() + config_.index_head_dim;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
        const int64_t slot = static_cast<int64_t>(bt[t / cc.page_size()]) * cc.page_size() + t % cc.page_size();
        const float* src = in + (t * config_.num_hidden_layers + l) * rec;
        std::memcpy(cc.latent_for_write(l, slot), src, latent_dim() * sizeof(float));
        std::memcpy(cc.index_for_write(l, slot), src + latent_dim(), config_.index_head_dim * sizeof(float));
      }
  }

 private:
  // The reference keeps float32 records; bf16 / FP8 records are the CUDA backend's.
  static void check_dtypes(const CacheDtypes& d) {
    for (int32_t dt : {d.latent, d.index})
      require(dt == GLM5RT_DTYPE_AUTO || dt == GLM5RT_DTYPE_F32, Status::unsupported,
              "the CPU backend keeps float32 cache records (cache dtype AUTO or F32), got dtype ", dt);
  }
  int64_t latent_dim() const { return config_.kv_lora_rank + config_.qk_rope_head_dim; }

  struct Rows {  // per-forward row data shared by the layers
    const BatchPlan* plan;
    std::vector<float> cos, sin;  // rows x rope/2
    std::vector<std::vector<int32_t>> selection;  // rows: selected positions, ascending
    ForwardProbe* probe = nullptr;
  };
  // The indexer key row r of the batch wrote in layer li.
  static const float* cache_key(const Rows& rows, int64_t li, int64_t r) {
    const BatchPlan& plan = *rows.plan;
    return static_cast<const CpuCache*>(plan.seqs[plan.seq_of_row[r]].cache)->index_key(li, plan.slots[r]);
  }

  void attention(int64_t li, Rows& rows, const float* h, float* out, bool run_indexer);
  void indexer(int64_t li, Rows& rows, const float* h, const float* qr);
  void mlp(int64_t li, const float* h2, int64_t R, float* out, ForwardProbe* probe);
  void swiglu(const CpuMlp& m, const float* x, int64_t R, float* out);

  ModelConfig config_;
  ThreadPool pool_;
  Rope rope_;
  float softmax_scale_;
  CpuWeights weights_;
};

void CpuBackend::forward(const BatchPlan& plan, float* logits, const std::function<bool()>& should_stop,
                         ForwardProbe* probe) {
  const ModelConfig& c = config_;
  const int64_t R = plan.n_rows(), D = c.hidden_size, L = c.num_hidden_layers;
  require(R > 0, Status::invalid_argument, "empty batch");
  for (const LogitsRow* d : plan.logit_dest)
    require(d == nullptr, Status::internal, "the CPU backend returns logits to the host only");
  for (int64_t r = 0; r < R; ++r)
    require(plan.tokens[r] >= 0 && plan.tokens[r] < c.vocab_size, Status::invalid_argument, "token id ",
            plan.tokens[r], " is outside the vocabulary [0, ", c.vocab_size, ")");
  for (const auto& s : plan.seqs)
    require(s.cache && dynamic_cast<CpuCache*>(s.cache), Status::invalid_argument,
            "the batch refers to a cache of another backend");

  Rows rows;
  rows.plan = &plan;
  rows.probe = probe;
  const int64_t half = c.qk_rope_head_dim / 2;
  rows.cos.resize(R * half);
  rows.sin.resize(R * half);
  for (int64_t r = 0; r < R; ++r) rope_.angles(plan.positions[r], &rows.cos[r * half], &rows.sin[r * half]);
  rows.selection.assign(R, {});

  std::vector<float> x(R * D), h(R * D), delta(R * D);
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(&x[r * D], &weights_.embed[plan.tokens[r] * D], D * sizeof(float));
  if (probe) {
    probe->hidden.assign(L, {});
    probe->topk.assign(L, {});
    probe->experts.assign(L, {});
    probe->expert_weights.assign(L, {});
    if (probe->report_indexer_inputs) {
      probe->indexer_q.assign(L, {});
      probe->indexer_k.assign(L, {});
      probe->indexer_w.assign(L, {});
    }
  }

  bool have_selection = false;
  for (int64_t li = 0; li < L; ++li) {
    if (should_stop && should_stop()) fail(Status::cancelled, "cancelled");
    const CpuLayer& w = weights_.layers[li];
    for (int64_t r = 0; r < R; ++r) rms_norm(&x[r * D], w.input_norm.data(), D, static_cast<float>(c.rms_norm_eps), &h[r * D]);
    // "shared" layers reuse the previous layer's selection; a shared layer with nothing before it
    // computes its own (as transformers does when prev_topk_indices is None).
    const bool run_indexer = c.indexer_types.at(li) == IndexerType::full || !have_selection;
    attention(li, rows, h.data(), delta.data(), run_indexer);
    have_selection = true;
    if (probe && run_indexer) {
      auto& t = probe->topk[li];
      t.assign(R * c.index_topk, -1);
      for (int64_t r = 0; r < R; ++r)
        std::copy(rows.selection[r].begin(), rows.selection[r].end(), t.begin() + r * c.index_topk);
    }
    for (int64_t i = 0; i < R * D; ++i) x[i] += delta[i];
    for (int64_t r = 0; r < R; ++r)
      rms_norm(&x[r * D], w.post_attn_norm.data(), D, static_cast<float>(c.rms_norm_eps), &h[r * D]);
    mlp(li, h.data(), R, delta.data(), probe);
    for (int64_t i = 0; i < R * D; ++i) x[i] += delta[i];
    if (probe && li + 1 < L) probe->hidden[li] = x;
  }
  if (should_stop && should_stop()) fail(Status::cancelled, "cancelled");

  const float eps = static_cast<float>(c.rms_norm_eps);
  if (probe) {
    auto& last = probe->hidden[L - 1];
    last.resize(R * D);
    for (int64_t r = 0; r < R; ++r) rms_norm(&x[r * D], weights_.final_norm.data(), D, eps, &last[r * D]);
  }
  const int64_t n_out = static_cast<int64_t>(plan.logit_rows.size());
  if (n_out == 0) return;
  std::vector<float> xn(n_out * D);
  for (int64_t i = 0; i < n_out; ++i) {
    const int64_t r = plan.logit_rows[i];
    require(r >= 0 && r < R, Status::invalid_argument, "logit row ", r, " is outside the batch");
    rms_norm(&x[r * D], weights_.final_norm.data(), D, eps, &xn[i * D]);
  }
  matmul(pool_, xn.data(), n_out, weights_.lm_head.data(), c.vocab_size, D, logits);
}

void CpuBackend::attention(int64_t li, Rows& rows, const float* h, float* out, bool run_indexer) {
  const ModelConfig& c = config_;
  const CpuLayer& w = weights_.layers[li];
  const BatchPlan& plan = *rows.plan;
  const int64_t R = plan.n_rows(), D = c.hidden_size, H = c.num_attention_heads;
  const int64_t nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim, qkd = nope + rope, vh = c.v_head_dim;
  const int64_t kvr = c.kv_lora_rank, qlr = c.q_lora_rank, lat = kvr + rope, half = rope / 2;

  std::vector<float> qa(R * qlr), qr(R * qlr), q(R * H * qkd), ckv(R * lat);
  matmul(pool_, h, R, w.q_a.data(), qlr, D, qa.data());
  for (int64_t r = 0; r < R; ++r) rms_norm(&qa[r * qlr], w.q_a_norm.data(), qlr, 1e-6f, &qr[r * qlr]);
  matmul(pool_, qr.data(), R, w.q_b.data(), H * qkd, qlr, q.data());
  matmul(pool_, h, R, w.kv_a.data(), lat, D, ckv.data());

  // Latent records [rms(kv) | rope(k_rot)], written once per token.
  for (int64_t r = 0; r < R; ++r) {
    auto* cache = static_cast<CpuCache*>(plan.seqs[plan.seq_of_row[r]].cache);
    float* rec = cache->latent_for_write(li, plan.slots[r]);
    rms_norm(&ckv[r * lat], w.kv_a_norm.data(), kvr, 1e-6f, rec);
    std::memcpy(rec + kvr, &ckv[r * lat + kvr], rope * sizeof(float));
    Rope::apply(rec + kvr, rope, &rows.cos[r * half], &rows.sin[r * half], kMlaRope);
    for (int64_t hh = 0; hh < H; ++hh)
      Rope::apply(&q[(r * H + hh) * qkd + nope], rope, &rows.cos[r * half], &rows.sin[r * half], kMlaRope);
  }

  if (run_indexer) indexer(li, rows, h, qr.data());
  else {
    // The indexer keys of a shared layer are never read; keep the records defined all the same.
    for (int64_t r = 0; r < R; ++r) {
      auto* cache = static_cast<CpuCache*>(plan.seqs[plan.seq_of_row[r]].cache);
      std::fill_n(cache->index_for_write(li, plan.slots[r]), c.index_head_dim, 0.0f);
    }
  }

  // Sparse attention over the selected tokens, absorbed form: 576-wide queries against latent records.
  std::vector<float> o(R * H * vh);
  pool_.parallel_for(R * H, [&](int64_t b, int64_t e) {
    std::vector<float> q_lat(kvr), o_lat(kvr), scores;
    for (int64_t task = b; task < e; ++task) {
      const int64_t r = task / H, hh = task % H;
      const SequencePlan& seq = plan.seqs[plan.seq_of_row[r]];
      const auto* cache = static_cast<const CpuCache*>(seq.cache);
      const int32_t ps = cache->page_size();
      const float* qn = &q[(r * H + hh) * qkd];
      const float* qrot = qn + nope;
      for (int64_t cc = 0; cc < kvr; ++cc) q_lat[cc] = dot(qn, &w.w_uk_t[(hh * kvr + cc) * nope], nope);
      const auto& sel = rows.selection[r];
      scores.resize(sel.size());
      float mx = -std::numeric_limits<float>::infinity();
      for (size_t i = 0; i < sel.size(); ++i) {
        const int64_t t = sel[i];
        const float* rec = cache->latent(li, static_cast<int64_t>(seq.block_table[t / ps]) * ps + t % ps);
        scores[i] = (dot(q_lat.data(), rec, kvr) + dot(qrot, rec + kvr, rope)) * softmax_scale_;
        mx = std::max(mx, scores[i]);
      }
      float sum = 0.f;
      for (auto& s : scores) {
        s = std::exp(s - mx);
        sum += s;
      }
      std::fill(o_lat.begin(), o_lat.end(), 0.0f);
      for (size_t i = 0; i < sel.size(); ++i) {
        const int64_t t = sel[i];
        const float* rec = cache->latent(li, static_cast<int64_t>(seq.block_table[t / ps]) * ps + t % ps);
        const float p = scores[i] / sum;
        for (int64_t cc = 0; cc < kvr; ++cc) o_lat[cc] += p * rec[cc];
      }
      float* oh = &o[(r * H + hh) * vh];
      for (int64_t v = 0; v < vh; ++v) oh[v] = dot(&w.w_uv[(hh * vh + v) * kvr], o_lat.data(), kvr);
    }
  });
  matmul(pool_, o.data(), R, w.o_proj.data(), D, H * vh, out);
}

void CpuBackend::indexer(int64_t li, Rows& rows, const float* h, const float* qr) {
  const ModelConfig& c = config_;
  const CpuLayer& w = weights_.layers[li];
  const BatchPlan& plan = *rows.plan;
  const int64_t R = plan.n_rows(), D = c.hidden_size, qlr = c.q_lora_rank;
  const int64_t nh = c.index_n_heads, d = c.index_head_dim, rope = c.qk_rope_head_dim, half = rope / 2;

  std::vector<float> qi(R * nh * d), kraw(R * d), wts(R * nh);
  matmul(pool_, qr, R, w.idx_wq_b.data(), nh * d, qlr, qi.data());
  matmul(pool_, h, R, w.idx_wk.data(), d, D, kraw.data());
  matmul(pool_, h, R, w.idx_weights_proj.data(), nh, D, wts.data());
  const float head_scale = static_cast<float>(std::pow(static_cast<double>(nh), -0.5));
  const float dot_scale = static_cast<float>(std::pow(static_cast<double>(d), -0.5));
  for (int64_t r = 0; r < R; ++r) {
    // queries and keys are [rope | pass]: rope first
    for (int64_t hh = 0; hh < nh; ++hh)
      Rope::apply(&qi[(r * nh + hh) * d], rope, &rows.cos[r * half], &rows.sin[r * half], kIndexerRope);
    auto* cache = static_cast<CpuCache*>(plan.seqs[plan.seq_of_row[r]].cache);
    float* key = cache->index_for_write(li, plan.slots[r]);
    layer_norm(&kraw[r * d], w.idx_k_norm_w.data(), w.idx_k_norm_b.data(), d, 1e-6f, key);
    Rope::apply(key, rope, &rows.cos[r * half], &rows.sin[r * half], kIndexerRope);
    for (int64_t hh = 0; hh < nh; ++hh) wts[r * nh + hh] *= head_scale;
  }

  if (ForwardProbe* probe = rows.probe; probe && probe->report_indexer_inputs) {
    // The score below is sum_h wts[h] * relu(q_h . key * dot_scale); dot_scale > 0, so it equals
    // sum_h (wts[h] * dot_scale) * relu(q_h . key): the reported weights carry both scales.
    probe->indexer_q[li] = qi;
    auto& kk = probe->indexer_k[li];
    kk.resize(R * d);
    for (int64_t r = 0; r < R; ++r) std::memcpy(&kk[r * d], cache_key(rows, li, r), d * sizeof(float));
    auto& pw = probe->indexer_w[li];
    pw.resize(R * nh);
    for (int64_t i = 0; i < R * nh; ++i) pw[i] = wts[i] * dot_scale;
  }

  pool_.parallel_for(R, [&](int64_t b, int64_t e) {
    std::vector<std::pair<float, int32_t>> scratch;
    std::vector<float> scores;
    for (int64_t r = b; r < e; ++r) {
      const SequencePlan& seq = plan.seqs[plan.seq_of_row[r]];
      const auto* cache = static_cast<const CpuCache*>(seq.cache);
      const int32_t ps = cache->page_size();
      const int64_t p = plan.positions[r];
      scores.resize(p + 1);
      for (int64_t t = 0; t <= p; ++t) {
        const float* key = cache->index_key(li, static_cast<int64_t>(seq.block_table[t / ps]) * ps + t % ps);
        float s = 0.f;
        for (int64_t hh = 0; hh < nh; ++hh) {
          const float v = dot(&qi[(r * nh + hh) * d], key, d) * dot_scale;
          s += (v > 0.f ? v : 0.f) * wts[r * nh + hh];
        }
        scores[t] = s;
      }
      indexer_select(scores.data(), p + 1, c.index_topk, scratch, rows.selection[r]);
    }
  });
}

void CpuBackend::swiglu(const CpuMlp& m, const float* x, int64_t R, float* out) {
  const int64_t D = config_.hidden_size, I = m.inter;
  std::vector<float> g(R * I), u(R * I);
  matmul(pool_, x, R, m.gate.data(), I, D, g.data());
  matmul(pool_, x, R, m.up.data(), I, D, u.data());
  for (int64_t i = 0; i < R * I; ++i) g[i] = silu(g[i]) * u[i];
  matmul(pool_, g.data(), R, m.down.data(), D, I, out);
}

void CpuBackend::mlp(int64_t li, const float* h2, int64_t R, float* out, ForwardProbe* probe) {
  const ModelConfig& c = config_;
  const CpuLayer& w = weights_.layers[li];
  const int64_t D = c.hidden_size;
  if (!w.is_moe) {
    swiglu(w.dense, h2, R, out);
    return;
  }
  const int64_t E = c.n_routed_experts, K = c.num_experts_per_tok, G = c.n_group, per = E / G;
  std::vector<float> logit(R * E);
  matmul(pool_, h2, R, w.router.data(), E, D, logit.data());

  // Routing (docs/GLM5.md step 9): sigmoid scores s; choice scores s + bias; best groups by the sum of
  // their top-2 choice scores; top-k experts among kept groups; weights from s, normalised, scaled.
  std::vector<std::vector<std::pair<int32_t, float>>> chosen(R);  // (expert, weight), expert ascending
  for (int64_t r = 0; r < R; ++r) {
    std::vector<float> s(E), choice(E);
    for (int64_t e = 0; e < E; ++e) {
      s[e] = sigmoid(logit[r * E + e]);
      choice[e] = s[e] + w.router_bias[e];
    }
    std::vector<std::pair<float, int32_t>> groups(G);
    for (int64_t g = 0; g < G; ++g) {
      float best = -std::numeric_limits<float>::infinity(), second = best;
      for (int64_t e = g * per; e < (g + 1) * per; ++e) {
        if (choice[e] > best) {
          second = best;
          best = choice[e];
        } else if (choice[e] > second) {
          second = choice[e];
        }
      }
      groups[g] = {per >= 2 ? best + second : best, static_cast<int32_t>(g)};
    }
    const auto by_score = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
    std::sort(groups.begin(), groups.end(), by_score);
    std::vector<bool> kept(G, false);
    for (int64_t g = 0; g < std::min(G, c.topk_group); ++g) kept[groups[g].second] = true;
    std::vector<std::pair<float, int32_t>> cand;
    for (int64_t e = 0; e < E; ++e)
      if (kept[e / per]) cand.push_back({choice[e], static_cast<int32_t>(e)});
    const int64_t k = std::min<int64_t>(K, static_cast<int64_t>(cand.size()));
    std::partial_sort(cand.begin(), cand.begin() + k, cand.end(), by_score);
    float sum = 0.f;
    for (int64_t i = 0; i < k; ++i) sum += s[cand[i].second];
    auto& ch = chosen[r];
    for (int64_t i = 0; i < k; ++i) {
      float wt = s[cand[i].second];
      if (c.norm_topk_prob) wt /= (sum + 1e-20f);
      wt *= static_cast<float>(c.routed_scaling_factor);
      ch.push_back({cand[i].second, wt});
    }
    std::sort(ch.begin(), ch.end());
  }
  if (probe) {
    auto& ids = probe->experts[li];
    auto& wts = probe->expert_weights[li];
    ids.assign(R * K, -1);
    wts.assign(R * K, 0.0f);
    for (int64_t r = 0; r < R; ++r)
      for (size_t i = 0; i < chosen[r].size(); ++i) {
        ids[r * K + static_cast<int64_t>(i)] = chosen[r][i].first;
        wts[r * K + static_cast<int64_t>(i)] = chosen[r][i].second;
      }
  }

  // Experts in ascending id, each over the rows that chose it; every row accumulates its experts in
  // ascending order, so the sum does not depend on the other rows of the batch.
  std::fill_n(out, R * D, 0.0f);
  std::vector<int64_t> rows_of;
  std::vector<float> xin, y;
  for (int64_t e = 0; e < E; ++e) {
    rows_of.clear();
    for (int64_t r = 0; r < R; ++r)
      for (const auto& [ex, wt] : chosen[r])
        if (ex == e) rows_of.push_back(r);
    if (rows_of.empty()) continue;
    const int64_t n = static_cast<int64_t>(rows_of.size());
    xin.resize(n * D);
    y.resize(n * D);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&xin[i * D], &h2[rows_of[i] * D], D * sizeof(float));
    swiglu(w.experts[e], xin.data(), n, y.data());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = rows_of[i];
      float wt = 0.f;
      for (const auto& [ex, ww] : chosen[r])
        if (ex == e) wt = ww;
      for (int64_t j = 0; j < D; ++j) out[r * D + j] += y[i * D + j] * wt;
    }
  }
  if (c.n_shared_experts > 0) {
    std::vector<float> sh(R * D);
    swiglu(w.shared, h2, R, sh.data());
    for (int64_t i = 0; i < R * D; ++i) out[i] += sh[i];
  }
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const ModelConfig& config, const ModelWeights& weights, int n_threads,
                                          const std::function<bool(float)>& progress) {
  return std::make_unique<CpuBackend>(config, weights, n_threads, progress);
}

}  // namespace glm5rt
