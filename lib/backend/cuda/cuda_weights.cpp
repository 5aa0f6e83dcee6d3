#include "backend/cuda/cuda_weights.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "runtime/error.hpp"

namespace glm5rt::cuda {

namespace {

uint16_t f32_to_bf16_bits(float f) {  // round to nearest even, NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

class Uploader {
 public:
  explicit Uploader(DevWeights& out) : out_(out) {}

  void* alloc(size_t bytes, const std::string& what) {
    out_.owned.emplace_back(bytes, what.c_str());
    out_.bytes += static_cast<int64_t>(bytes);
    return out_.owned.back().get();
  }
  void* copy(const void* src, size_t bytes, const std::string& what) {
    void* d = alloc(bytes, what);
    check(cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice), "uploading weights");
    return d;
  }
  const float* f32(const std::vector<float>& v, const std::string& what) {
    return static_cast<const float*>(copy(v.data(), v.size() * 4, what));
  }
  const __nv_bfloat16* bf16(const std::vector<float>& v, const std::string& what) {
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16_bits(v[i]);
    return static_cast<const __nv_bfloat16*>(copy(b.data(), b.size() * 2, what));
  }

 private:
  DevWeights& out_;
};

const float* vec_f32(Uploader& up, const TensorView& t, int64_t n) {
  require_shape(t, {n});
  return up.f32(decode_f32(t), t.name);
}

// Several same-shaped weights (experts) into one grouped DevLinear; one weight is a group of one.
DevLinear linear_group(Uploader& up, const std::vector<const TensorView*>& ts, int64_t n, int64_t k,
                       DevWeights& out, bool grouped) {
  for (const auto* t : ts) require_shape(*t, {n, k});
  DevLinear L;
  L.n = n;
  L.k = k;
  const TensorView& t0 = *ts[0];
  bool all_fp8 = true;
  for (const auto* t : ts)
    all_fp8 = all_fp8 && t->dtype == DType::fp8_e4m3 && t->scale_inv && t->block_rows == t0.block_rows &&
              t->block_cols == t0.block_cols;
  const size_t G = ts.size(), per = static_cast<size_t>(n * k);
  if (all_fp8) {
    L.dtype = glm5k::kWFp8;
    L.block_n = static_cast<int32_t>(t0.block_rows);
    L.block_k = static_cast<int32_t>(t0.block_cols);
    const size_t sper = static_cast<size_t>(((n + L.block_n - 1) / L.block_n) * L.ld_scale());
    auto* w = static_cast<char*>(up.alloc(G * per, t0.name));
    auto* s = static_cast<char*>(up.alloc(G * sper * 4, t0.name + " scales"));
    for (size_t g = 0; g < G; ++g) {
      check(cudaMemcpy(w + g * per, ts[g]->data, per, cudaMemcpyHostToDevice), "uploading weights");
      check(cudaMemcpy(s + g * sper * 4, ts[g]->scale_inv, sper * 4, cudaMemcpyHostToDevice), "uploading scales");
    }
    L.w = w;
    L.scale = reinterpret_cast<const float*>(s);
    L.group_stride = static_cast<int64_t>(per);
    L.scale_group_stride = static_cast<int64_t>(sper);
    if (!grouped) out.max_fp8_dense = std::max<int64_t>(out.max_fp8_dense, n * k);
    return L;
  }
  L.dtype = glm5k::kWBf16;
  auto* w = static_cast<char*>(up.alloc(G * per * 2, t0.name));
  std::vector<uint16_t> b(per);
  for (size_t g = 0; g < G; ++g) {
    const TensorView& t = *ts[g];
    if (t.dtype == DType::bf16) {
      check(cudaMemcpy(w + g * per * 2, t.data, per * 2, cudaMemcpyHostToDevice), "uploading weights");
      continue;
    }
    const std::vector<float> f = decode_f32(t);
    for (size_t i = 0; i < per; ++i) b[i] = f32_to_bf16_bits(f[i]);
    check(cudaMemcpy(w + g * per * 2, b.data(), per * 2, cudaMemcpyHostToDevice), "uploading weights");
  }
  L.w = w;
  L.group_stride = static_cast<int64_t>(per);
  return L;
}

DevLinear linear(Uploader& up, const TensorView& t, int64_t n, int64_t k, DevWeights& out) {
  return linear_group(up, {&t}, n, k, out, false);
}

DevMlp mlp(Uploader& up, const MlpWeights& m, int64_t hidden, int64_t inter, DevWeights& out) {
  DevMlp d;
  d.gate = linear(up, m.gate_proj, inter, hidden, out);
  d.up = linear(up, m.up_proj, inter, hidden, out);
  d.down = linear(up, m.down_proj, hidden, inter, out);
  return d;
}

}  // namespace

DevWeights upload_weights(const ModelConfig& c, const ModelWeights& w, const std::function<bool(float)>& progress) {
  const int64_t D = c.hidden_size, H = c.num_attention_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim;
  const int64_t vh = c.v_head_dim, kvr = c.kv_lora_rank, qlr = c.q_lora_rank;
  require(static_cast<int64_t>(w.layers.size()) == c.num_hidden_layers, Status::format, "the checkpoint has ",
          w.layers.size(), " decoder layers, config.json says ", c.num_hidden_layers);
  DevWeights out;
  Uploader up(out);
  require_shape(w.embed_tokens, {c.vocab_size, D});
  out.embed = up.bf16(decode_f32(w.embed_tokens), w.embed_tokens.name);
  out.final_norm = vec_f32(up, w.final_norm, D);
  if (w.lm_head.empty()) {
    out.lm_head.w = out.embed;
    out.lm_head.n = c.vocab_size;
    out.lm_head.k = D;
  } else {
    require_shape(w.lm_head, {c.vocab_size, D});
    out.lm_head.w = up.bf16(decode_f32(w.lm_head), w.lm_head.name);
    out.lm_head.n = c.vocab_size;
    out.lm_head.k = D;
  }
  for (int64_t li = 0; li < c.num_hidden_layers; ++li) {
    const LayerWeights& L = w.layers[li];
    DevLayer l;
    l.input_norm = vec_f32(up, L.input_layernorm, D);
    l.post_norm = vec_f32(up, L.post_attention_layernorm, D);
    l.q_a = linear(up, L.q_a_proj, qlr, D, out);
    l.q_a_norm = vec_f32(up, L.q_a_layernorm, qlr);
    l.q_b = linear(up, L.q_b_proj, H * (nope + rope), qlr, out);
    l.kv_a = linear(up, L.kv_a_proj_with_mqa, kvr + rope, D, out);
    l.kv_a_norm = vec_f32(up, L.kv_a_layernorm, kvr);
    require_shape(L.kv_b_proj, {H * (nope + vh), kvr});
    const std::vector<float> kv_b = decode_f32(L.kv_b_proj);
    std::vector<float> uk(H * kvr * nope), uv(H * vh * kvr);
    for (int64_t h = 0; h < H; ++h) {
      const float* base = kv_b.data() + h * (nope + vh) * kvr;
      for (int64_t j = 0; j < nope; ++j)
        for (int64_t cc = 0; cc < kvr; ++cc) uk[(h * kvr + cc) * nope + j] = base[j * kvr + cc];
      std::copy(base + nope * kvr, base + (nope + vh) * kvr, uv.begin() + h * vh * kvr);
    }
    l.w_uk_t = up.bf16(uk, L.kv_b_proj.name + " (W_UK^T)");
    l.w_uv = up.bf16(uv, L.kv_b_proj.name + " (W_UV)");
    l.o_proj = linear(up, L.o_proj, D, H * vh, out);
    const bool needs_indexer = c.indexer_types.at(li) == IndexerType::full || li == 0;
    if (needs_indexer || !L.idx_wq_b.empty()) {
      const int64_t nih = c.index_n_heads, ihd = c.index_head_dim;
      l.has_indexer = true;
      l.idx_wq_b = linear(up, L.idx_wq_b, nih * ihd, qlr, out);
      l.idx_wk = linear(up, L.idx_wk, ihd, D, out);
      l.idx_wp = linear(up, L.idx_weights_proj, nih, D, out);
      l.idx_k_norm_w = vec_f32(up, L.idx_k_norm_weight, ihd);
      l.idx_k_norm_b = vec_f32(up, L.idx_k_norm_bias, ihd);
    }
    l.is_moe = c.mlp_types.at(li) == MlpType::moe;
    if (!l.is_moe) {
      l.dense = mlp(up, L.dense, D, c.intermediate_size, out);
    } else {
      const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size;
      require_shape(L.router_weight, {E, D});
      l.router.w = up.f32(decode_f32(L.router_weight), L.router_weight.name);
      l.router.dtype = glm5k::kWF32;
      l.router.n = E;
      l.router.k = D;
      l.router_bias = vec_f32(up, L.router_bias, E);
      require(static_cast<int64_t>(L.experts.size()) == E, Status::format, "layer ", li, " has ", L.experts.size(),
              " experts, config.json says ", E);
      std::vector<const TensorView*> g, u, d;
      for (const auto& e : L.experts) {
        g.push_back(&e.gate_proj);
        u.push_back(&e.up_proj);
        d.push_back(&e.down_proj);
      }
      l.experts.gate = linear_group(up, g, I, D, out, true);
      l.experts.up = linear_group(up, u, I, D, out, true);
      l.experts.down = linear_group(up, d, D, I, out, true);
      if (c.n_shared_experts > 0) {
        l.has_shared = true;
        l.shared = mlp(up, L.shared_expert, D, I * c.n_shared_experts, out);
      }
    }
    out.layers.push_back(l);
    if (progress && !progress(static_cast<float>(li + 1) / static_cast<float>(c.num_hidden_layers)))
      fail(Status::cancelled, "loading was cancelled by the progress callback");
  }
  return out;
}

namespace {

class RandomMaker {
 public:
  RandomMaker(DevWeights& out, uint64_t seed) : out_(out), seed_(seed) {}

  void* alloc(size_t bytes, const char* what) {
    out_.owned.emplace_back(bytes, what);
    out_.bytes += static_cast<int64_t>(bytes);
    return out_.owned.back().get();
  }
  // Values of about unit variance times `scale`; weights get scale 1/sqrt(k).
  const float* f32(int64_t n, float lo, float hi) {
    auto* p = static_cast<float*>(alloc(n * 4, "random weights"));
    check(glm5k::launch_fill_random_f32(p, n, ++seed_, lo, hi, nullptr), "random fill");
    return p;
  }
  const __nv_bfloat16* bf16(int64_t n, float amp) {
    auto* p = static_cast<__nv_bfloat16*>(alloc(n * 2, "random weights"));
    check(glm5k::launch_fill_random_bf16(p, n, ++seed_, amp, nullptr), "random fill");
    return p;
  }
  DevLinear fp8(int64_t n, int64_t k, int64_t groups, bool grouped) {
    DevLinear L;
    L.dtype = glm5k::kWFp8;
    L.n = n;
    L.k = k;
    const int64_t per = n * k, sper = ((n + 127) / 128) * L.ld_scale();
    auto* w = static_cast<uint8_t*>(alloc(groups * per, "random FP8 weights"));
    check(glm5k::launch_fill_random_fp8(w, groups * per, ++seed_, 448.f, nullptr), "random fill");
    // |q| <= 448 uniform: q * scale uniform in +-sqrt(3 / k) has unit-variance outputs for unit inputs.
    const float s = std::sqrt(3.0f / static_cast<float>(k)) / 448.f;
    L.scale = f32(groups * sper, 0.5f * s, 1.5f * s);
    L.w = w;
    L.group_stride = per;
    L.scale_group_stride = sper;
    if (!grouped) out_.max_fp8_dense = std::max(out_.max_fp8_dense, per);
    return L;
  }
  DevLinear bf16_linear(int64_t n, int64_t k) {
    DevLinear L;
    L.n = n;
    L.k = k;
    L.w = bf16(n * k, std::sqrt(3.0f / static_cast<float>(k)));
    return L;
  }

 private:
  DevWeights& out_;
  uint64_t seed_;
};

}  // namespace

DevWeights random_weights(const ModelConfig& c, uint64_t seed) {
  const int64_t D = c.hidden_size, H = c.num_attention_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim;
  const int64_t vh = c.v_head_dim, kvr = c.kv_lora_rank, qlr = c.q_lora_rank;
  DevWeights out;
  RandomMaker rm(out, seed);
  out.embed = rm.bf16(c.vocab_size * D, 1.0f);
  out.final_norm = rm.f32(D, 1.0f, 1.0f);
  out.lm_head = rm.bf16_linear(c.vocab_size, D);
  for (int64_t li = 0; li < c.num_hidden_layers; ++li) {
    DevLayer l;
    l.input_norm = rm.f32(D, 1.0f, 1.0f);
    l.post_norm = rm.f32(D, 1.0f, 1.0f);
    l.q_a = rm.fp8(qlr, D, 1, false);
    l.q_a_norm = rm.f32(qlr, 1.0f, 1.0f);
    l.q_b = rm.fp8(H * (nope + rope), qlr, 1, false);
    l.kv_a = rm.fp8(kvr + rope, D, 1, false);
    l.kv_a_norm = rm.f32(kvr, 1.0f, 1.0f);
    l.w_uk_t = rm.bf16(H * kvr * nope, std::sqrt(3.0f / static_cast<float>(nope)));
    l.w_uv = rm.bf16(H * vh * kvr, std::sqrt(3.0f / static_cast<float>(kvr)));
    l.o_proj = rm.fp8(D, H * vh, 1, false);
    l.has_indexer = c.indexer_types.at(li) == IndexerType::full || li == 0;
    if (l.has_indexer) {
      l.idx_wq_b = rm.fp8(c.index_n_heads * c.index_head_dim, qlr, 1, false);
      l.idx_wk = rm.fp8(c.index_head_dim, D, 1, false);
      l.idx_wp = rm.bf16_linear(c.index_n_heads, D);
      l.idx_k_norm_w = rm.f32(c.index_head_dim, 1.0f, 1.0f);
      l.idx_k_norm_b = rm.f32(c.index_head_dim, 0.0f, 0.0f);
    }
    l.is_moe = c.mlp_types.at(li) == MlpType::moe;
    if (!l.is_moe) {
      l.dense = {rm.fp8(c.intermediate_size, D, 1, false), rm.fp8(c.intermediate_size, D, 1, false),
                 rm.fp8(D, c.intermediate_size, 1, false)};
    } else {
      const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size;
      l.router.w = rm.f32(E * D, -std::sqrt(3.0f / D), std::sqrt(3.0f / D));
      l.router.dtype = glm5k::kWF32;
      l.router.n = E;
      l.router.k = D;
      l.router_bias = rm.f32(E, -0.01f, 0.01f);
      l.experts = {rm.fp8(I, D, E, true), rm.fp8(I, D, E, true), rm.fp8(D, I, E, true)};
      if (c.n_shared_experts > 0) {
        const int64_t Is = I * c.n_shared_experts;
        l.has_shared = true;
        l.shared = {rm.fp8(Is, D, 1, false), rm.fp8(Is, D, 1, false), rm.fp8(D, Is, 1, false)};
      }
    }
    out.layers.push_back(l);
  }
  check(cudaDeviceSynchronize(), "random weights");
  return out;
}

}  // namespace glm5rt::cuda
