#include "backend/cpu/cpu_weights.hpp"

#include <unistd.h>

#include "runtime/error.hpp"

namespace glm5rt::cpu {

namespace {

Tensor take(const TensorView& t, const std::vector<int64_t>& shape) {
  require_shape(t, shape);
  Tensor out(static_cast<size_t>(t.numel()));
  decode_rows_f32(t, 0, t.rows(), out.data());  // straight into aligned memory, no temporary copy
  return out;
}

CpuMlp take_mlp(const MlpWeights& m, int64_t hidden, int64_t inter) {
  CpuMlp out;
  out.inter = inter;
  out.gate = take(m.gate_proj, {inter, hidden});
  out.up = take(m.up_proj, {inter, hidden});
  out.down = take(m.down_proj, {hidden, inter});
  return out;
}

}  // namespace

int64_t CpuWeights::bytes() const {
  auto sz = [](const Tensor& t) { return static_cast<int64_t>(t.size() * sizeof(float)); };
  auto mlp = [&](const CpuMlp& m) { return sz(m.gate) + sz(m.up) + sz(m.down); };
  int64_t b = sz(embed) + sz(final_norm) + sz(lm_head);
  for (const auto& l : layers) {
    b += sz(l.input_norm) + sz(l.post_attn_norm) + sz(l.q_a) + sz(l.q_a_norm) + sz(l.q_b) + sz(l.kv_a) +
         sz(l.kv_a_norm) + sz(l.w_uk_t) + sz(l.w_uv) + sz(l.o_proj) + sz(l.idx_wq_b) + sz(l.idx_wk) +
         sz(l.idx_k_norm_w) + sz(l.idx_k_norm_b) + sz(l.idx_weights_proj) + mlp(l.dense) + sz(l.router) +
         sz(l.router_bias) + mlp(l.shared);
    for (const auto& e : l.experts) b += mlp(e);
  }
  return b;
}

namespace {
// Float32 bytes of every tensor the CPU backend decodes.
int64_t decoded_bytes(const ModelWeights& w) {
  auto n = [](const TensorView& t) { return t.empty() ? int64_t{0} : t.numel() * 4; };
  auto mlp = [&](const MlpWeights& m) { return n(m.gate_proj) + n(m.up_proj) + n(m.down_proj); };
  int64_t b = n(w.embed_tokens) + n(w.final_norm) + n(w.lm_head.empty() ? w.embed_tokens : w.lm_head);
  for (const auto& L : w.layers) {
    for (const TensorView* t : {&L.input_layernorm, &L.post_attention_layernorm, &L.q_a_proj, &L.q_a_layernorm,
                                &L.q_b_proj, &L.kv_a_proj_with_mqa, &L.kv_a_layernorm, &L.kv_b_proj, &L.o_proj,
                                &L.idx_wq_b, &L.idx_wk, &L.idx_k_norm_weight, &L.idx_k_norm_bias,
                                &L.idx_weights_proj, &L.router_weight, &L.router_bias})
      b += n(*t);
    b += mlp(L.dense) + mlp(L.shared_expert);
    for (const auto& e : L.experts) b += mlp(e);
  }
  return b;
}
}  // namespace

CpuWeights decode_weights(const ModelConfig& c, const ModelWeights& w, const std::function<bool(float)>& progress) {
  // The reference backend holds every weight in float32: refuse clearly (instead of being killed by the
  // OOM killer half-way) when that cannot fit in the machine's memory.
  const int64_t need = decoded_bytes(w);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) {
    const double have = static_cast<double>(pages) * static_cast<double>(page);
    require(static_cast<double>(need) < 0.9 * have, Status::out_of_memory, "the CPU backend decodes the weights to float32: ",
            need / 1e9, " GB needed, the machine has ", have / 1e9, " GB of memory");
  }
  const int64_t D = c.hidden_size, H = c.num_attention_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim;
  const int64_t vh = c.v_head_dim, kvr = c.kv_lora_rank, qlr = c.q_lora_rank;
  require(static_cast<int64_t>(w.layers.size()) == c.num_hidden_layers, Status::format, "the checkpoint has ",
          w.layers.size(), " decoder layers, config.json says ", c.num_hidden_layers);
  CpuWeights out;
  out.embed = take(w.embed_tokens, {c.vocab_size, D});
  out.final_norm = take(w.final_norm, {D});
  out.lm_head = take(w.lm_head.empty() ? w.embed_tokens : w.lm_head, {c.vocab_size, D});
  for (int64_t li = 0; li < c.num_hidden_layers; ++li) {
    const LayerWeights& L = w.layers[li];
    CpuLayer l;
    l.input_norm = take(L.input_layernorm, {D});
    l.post_attn_norm = take(L.post_attention_layernorm, {D});
    l.q_a = take(L.q_a_proj, {qlr, D});
    l.q_a_norm = take(L.q_a_layernorm, {qlr});
    l.q_b = take(L.q_b_proj, {H * (nope + rope), qlr});
    l.kv_a = take(L.kv_a_proj_with_mqa, {kvr + rope, D});
    l.kv_a_norm = take(L.kv_a_layernorm, {kvr});
    const Tensor kv_b = take(L.kv_b_proj, {H * (nope + vh), kvr});
    l.w_uk_t.resize(H * kvr * nope);
    l.w_uv.resize(H * vh * kvr);
    for (int64_t h = 0; h < H; ++h) {
      const float* base = kv_b.data() + h * (nope + vh) * kvr;
      for (int64_t j = 0; j < nope; ++j)
        for (int64_t cc = 0; cc < kvr; ++cc) l.w_uk_t[(h * kvr + cc) * nope + j] = base[j * kvr + cc];
      std::copy(base + nope * kvr, base + (nope + vh) * kvr, l.w_uv.begin() + h * vh * kvr);
    }
    l.o_proj = take(L.o_proj, {D, H * vh});
    // "shared" indexer layers reuse the previous layer's selection and may come without indexer weights
    // (a shared first layer computes its own selection, so it needs them).
    const bool needs_indexer = c.indexer_types.at(li) == IndexerType::full || li == 0;
    if (needs_indexer || !L.idx_wq_b.empty()) {
      const int64_t nih = c.index_n_heads, ihd = c.index_head_dim;
      l.idx_wq_b = take(L.idx_wq_b, {nih * ihd, qlr});
      l.idx_wk = take(L.idx_wk, {ihd, D});
      l.idx_k_norm_w = take(L.idx_k_norm_weight, {ihd});
      l.idx_k_norm_b = take(L.idx_k_norm_bias, {ihd});
      l.idx_weights_proj = take(L.idx_weights_proj, {nih, D});
    }
    l.is_moe = c.mlp_types.at(li) == MlpType::moe;
    if (!l.is_moe) {
      l.dense = take_mlp(L.dense, D, c.intermediate_size);
    } else {
      const int64_t E = c.n_routed_experts;
      l.router = take(L.router_weight, {E, D});
      l.router_bias = take(L.router_bias, {E});
      require(static_cast<int64_t>(L.experts.size()) == E, Status::format, "layer ", li, " has ",
              L.experts.size(), " experts, config.json says ", E);
      for (int64_t e = 0; e < E; ++e) l.experts.push_back(take_mlp(L.experts[e], D, c.moe_intermediate_size));
      if (c.n_shared_experts > 0)
        l.shared = take_mlp(L.shared_expert, D, c.moe_intermediate_size * c.n_shared_experts);
    }
    out.layers.push_back(std::move(l));
    if (progress && !progress(static_cast<float>(li + 1) / static_cast<float>(c.num_hidden_layers)))
      fail(Status::cancelled, "loading was cancelled by the progress callback");
  }
  return out;
}

}  // namespace glm5rt::cpu
