// Checkpoint loading and validation. See checkpoint.hpp.
#include "model/checkpoint.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "model/text_file.hpp"
#include "runtime/error.hpp"
#include "runtime/log.hpp"

namespace glm5rt {

namespace {

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16 || t == DType::fp8_e4m3; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

const std::string kScaleSuffix = "_scale_inv";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Layer index of "model.layers.<i>.<rest>", or -1.
int64_t layer_of(const std::string& name) {
  static const std::string prefix = "model.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  int64_t v = 0;
  size_t i = prefix.size();
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    v = v * 10 + (name[i] - '0');
    if (v > (int64_t{1} << 40)) return -1;
  }
  return i < name.size() && name[i] == '.' ? v : -1;
}

// Throttled progress reporting: at most ~1000 callbacks per load, the last one always at 1.0.
class Progress {
 public:
  explicit Progress(const std::function<bool(float)>& fn) : fn_(fn) {}
  void report(float f) {
    if (!fn_) return;
    if (f < 1.0f && f - last_ < 0.001f) return;
    last_ = f;
    if (!fn_(f)) fail(Status::cancelled, "loading cancelled by the progress callback");
  }

 private:
  const std::function<bool(float)>& fn_;
  float last_ = -1.0f;
};

// 64-bit FNV-1a: simple, stable across platforms and runs.
struct Fnv1a {
  uint64_t h = 0xcbf29ce484222325ull;
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  void str(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  void u64(uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));  // little-endian everywhere
    bytes(b, 8);
  }
  void f64(double d) {
    uint64_t v;
    std::memcpy(&v, &d, 8);
    u64(v);
  }
};

void hash_config(Fnv1a& h, const ModelConfig& c) {
  for (int64_t v : {c.vocab_size, c.hidden_size, c.num_hidden_layers, c.intermediate_size, c.moe_intermediate_size,
                    c.n_routed_experts, c.num_experts_per_tok, c.n_shared_experts, c.n_group, c.topk_group,
                    c.num_attention_heads, c.q_lora_rank, c.kv_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim,
                    c.v_head_dim, c.index_n_heads, c.index_head_dim, c.index_topk, c.max_position_embeddings,
                    c.num_nextn_predict_layers, c.rope.original_max_position_embeddings, c.quant.block_rows,
                    c.quant.block_cols})
    h.u64(static_cast<uint64_t>(v));
  for (double d : {c.routed_scaling_factor, c.rms_norm_eps, c.rope.theta, c.rope.factor, c.rope.beta_fast,
                   c.rope.beta_slow, c.rope.mscale, c.rope.mscale_all_dim, c.rope.attention_factor})
    h.f64(d);
  for (bool b : {c.norm_topk_prob, c.tie_word_embeddings, c.rope.truncate, c.quant.fp8}) h.u64(b ? 1 : 0);
  h.u64(static_cast<uint64_t>(c.rope.type));
  for (auto t : c.indexer_types) h.u64(static_cast<uint64_t>(t));
  for (auto t : c.mlp_types) h.u64(static_cast<uint64_t>(t));
  for (int32_t e : c.eos_token_ids) h.u64(static_cast<uint64_t>(e));
}

}  // namespace

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = views_.find(name);
  return it == views_.end() ? nullptr : &it->second;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& dir, const std::function<bool(float)>& progress) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    fail(Status::io, "cannot open checkpoint directory '", dir, "': ", std::strerror(errno));
  require(S_ISDIR(st.st_mode), Status::io, "'", dir, "' is not a directory");

  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->dir_ = dir;
  const std::string gen_path = dir + "/generation_config.json";
  const std::string config_text = read_text_file(dir + "/config.json");
  const std::string gen_text = path_exists(gen_path) ? read_text_file(gen_path) : std::string();
  try {
    ck->config_ = parse_model_config(config_text, gen_text);
  } catch (const Error& e) {
    // The parser's messages start with "config.json: ..."; prefix the directory to say which checkpoint.
    throw Error(e.status(), dir + "/" + e.what());
  }

  Progress p(progress);
  p.report(0.0f);
  // Mapping the shards is the first 30% of the bar (header parsing dominates for many shards).
  ck->files_ = SafetensorsSet::open_dir(dir, [&](float f) {
    p.report(0.3f * f);
    return true;
  });
  ck->build_views(progress);
  ck->build_layers();
  ck->compute_totals();
  p.report(1.0f);
  log(LogLevel::info, "loaded checkpoint '", dir, "': ", ck->views_.size(), " tensors in ", ck->files_.files().size(),
      " file(s), ", ck->n_params_, " parameters, ", ck->weight_bytes_, " bytes");
  return ck;
}

void Checkpoint::build_views(const std::function<bool(float)>& progress) {
  Progress p(progress);
  const auto& all = files_.tensors();
  for (const auto& [name, t] : all) {
    TensorView v;
    v.name = name;
    v.dtype = t.entry.dtype;
    v.shape = t.entry.shape;
    v.data = t.data;
    views_.emplace(name, std::move(v));
  }
  // Pair each FP8 tensor with its block scales; check the scales themselves.
  const ModelConfig& c = config_;
  size_t done = 0;
  for (auto& [name, v] : views_) {
    p.report(0.3f + 0.6f * static_cast<float>(++done) / static_cast<float>(views_.size()));
    if (ends_with(name, kScaleSuffix)) {
      auto base = views_.find(name.substr(0, name.size() - kScaleSuffix.size()));
      if (base != views_.end())
        require(base->second.dtype == DType::fp8_e4m3, Status::format, "tensor '", name, "' scales '", base->first,
                "', which is ", dtype_name(base->second.dtype), ", not F8_E4M3");
      continue;
    }
    if (v.dtype != DType::fp8_e4m3) continue;
    require(c.quant.fp8, Status::format, "tensor '", name,
            "' is F8_E4M3 but config.json has no fp8 quantization_config (block size unknown)");
    require(v.shape.size() == 2, Status::format, "FP8 tensor '", name, "' has shape ", shape_str(v.shape),
            "; block-scaled FP8 needs a 2-D [out, in] weight");
    const std::string sname = name + kScaleSuffix;
    auto s = views_.find(sname);
    require(s != views_.end(), Status::format, "FP8 tensor '", name, "' has no '", sname, "' scale tensor");
    const TensorView& sv = s->second;
    require(sv.dtype == DType::f32, Status::format, "scale tensor '", sname, "' is ", dtype_name(sv.dtype),
            ", expected F32");
    const std::vector<int64_t> want = {ceil_div(v.shape[0], c.quant.block_rows),
                                       ceil_div(v.shape[1], c.quant.block_cols)};
    require(sv.shape == want, Status::format, "scale tensor '", sname, "' has shape ", shape_str(sv.shape),
            ", expected ", shape_str(want), " (ceil(", v.shape[0], "/", c.quant.block_rows, "), ceil(", v.shape[1],
            "/", c.quant.block_cols, ")) for weight_block_size [", c.quant.block_rows, ", ", c.quant.block_cols, "]");
    const auto* bytes = static_cast<const uint8_t*>(sv.data);
    const int64_t n = want[0] * want[1];
    for (int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, bytes + 4 * i, 4);
      require(std::isfinite(f), Status::format, "scale tensor '", sname, "' holds a non-finite value (", f,
              ") at block [", i / want[1], ", ", i % want[1], "]");
    }
    const float* scales = static_cast<const float*>(sv.data);
    if (reinterpret_cast<uintptr_t>(sv.data) % alignof(float) != 0) {
      // The file put the scales at an odd offset: keep an aligned copy so the float* is valid to read.
      owned_scales_.emplace_back(static_cast<size_t>(n));
      std::memcpy(owned_scales_.back().data(), sv.data, static_cast<size_t>(n) * 4);
      scales = owned_scales_.back().data();
    }
    v.scale_inv = scales;
    v.block_rows = c.quant.block_rows;
    v.block_cols = c.quant.block_cols;
  }
}

namespace {

// Looks up and checks the tensors a config implies, with messages that say where the expected shape comes
// from.
class Expect {
 public:
  Expect(const std::map<std::string, TensorView>& views) : views_(views) {}

  // A tensor that must exist with this shape. `why` explains the expected shape from config fields.
  TensorView req(const std::string& name, std::vector<int64_t> shape, const char* why, bool allow_fp8) const {
    auto it = views_.find(name);
    require(it != views_.end(), Status::format, "tensor '", name, "' is missing (expected ", shape_str(shape), ": ",
            why, ")");
    return check(it->second, shape, why, allow_fp8);
  }
  // A tensor that may be absent (empty view), checked when present.
  TensorView opt(const std::string& name, std::vector<int64_t> shape, const char* why, bool allow_fp8) const {
    auto it = views_.find(name);
    return it == views_.end() ? TensorView{} : check(it->second, shape, why, allow_fp8);
  }

 private:
  static TensorView check(const TensorView& v, const std::vector<int64_t>& shape, const char* why, bool allow_fp8) {
    require(v.shape == shape, Status::format, "tensor '", v.name, "' has shape ", shape_str(v.shape), ", expected ",
            shape_str(shape), " (", why, ")");
    require(is_float(v.dtype), Status::format, "tensor '", v.name, "' has dtype ", dtype_name(v.dtype),
            ", expected a floating-point type (F32, BF16, F16", allow_fp8 ? " or F8_E4M3)" : ")");
    require(allow_fp8 || v.dtype != DType::fp8_e4m3, Status::format, "tensor '", v.name,
            "' is F8_E4M3 but this tensor must be F32, BF16 or F16");
    return v;
  }
  const std::map<std::string, TensorView>& views_;
};

}  // namespace

void Checkpoint::build_layers() {
  const ModelConfig& c = config_;
  const Expect e(views_);
  const int64_t D = c.hidden_size, H = c.num_attention_heads;
  weights_.embed_tokens = e.req("model.embed_tokens.weight", {c.vocab_size, D}, "vocab_size x hidden_size", false);
  weights_.final_norm = e.req("model.norm.weight", {D}, "hidden_size", false);
  if (c.tie_word_embeddings) {
    // transformers ties lm_head to the embeddings; a stored lm_head.weight is ignored there, so here too.
    weights_.lm_head = weights_.embed_tokens;
  } else {
    weights_.lm_head = e.req("lm_head.weight", {c.vocab_size, D},
                             "vocab_size x hidden_size; tie_word_embeddings is false", false);
  }

  weights_.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights& L = weights_.layers[static_cast<size_t>(i)];
    const std::string pre = "model.layers." + std::to_string(i) + ".";
    const std::string at = pre + "self_attn.";
    L.input_layernorm = e.req(pre + "input_layernorm.weight", {D}, "hidden_size", false);
    L.post_attention_layernorm = e.req(pre + "post_attention_layernorm.weight", {D}, "hidden_size", false);
    L.q_a_proj = e.req(at + "q_a_proj.weight", {c.q_lora_rank, D}, "q_lora_rank x hidden_size", true);
    L.q_a_layernorm = e.req(at + "q_a_layernorm.weight", {c.q_lora_rank}, "q_lora_rank", false);
    L.q_b_proj = e.req(at + "q_b_proj.weight", {H * c.qk_head_dim(), c.q_lora_rank},
                       "num_attention_heads * (qk_nope_head_dim + qk_rope_head_dim) x q_lora_rank", true);
    L.kv_a_proj_with_mqa = e.req(at + "kv_a_proj_with_mqa.weight", {c.kv_lora_rank + c.qk_rope_head_dim, D},
                                 "(kv_lora_rank + qk_rope_head_dim) x hidden_size", true);
    L.kv_a_layernorm = e.req(at + "kv_a_layernorm.weight", {c.kv_lora_rank}, "kv_lora_rank", false);
    L.kv_b_proj = e.req(at + "kv_b_proj.weight", {H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank},
                        "num_attention_heads * (qk_nope_head_dim + v_head_dim) x kv_lora_rank", true);
    L.o_proj = e.req(at + "o_proj.weight", {D, H * c.v_head_dim}, "hidden_size x num_attention_heads * v_head_dim",
                     true);

    // The lightning indexer: required on "full" layers; "shared" layers reuse the previous full layer's
    // selection and normally store no indexer (kept when present).
    const bool full = c.indexer_types[static_cast<size_t>(i)] == IndexerType::full;
    const std::string ix = at + "indexer.";
    auto idx = [&](const std::string& n, std::vector<int64_t> s, const char* why, bool fp8) {
      return full ? e.req(ix + n, std::move(s), why, fp8) : e.opt(ix + n, std::move(s), why, fp8);
    };
    L.idx_wq_b = idx("wq_b.weight", {c.index_n_heads * c.index_head_dim, c.q_lora_rank},
                     "index_n_heads * index_head_dim x q_lora_rank", true);
    L.idx_wk = idx("wk.weight", {c.index_head_dim, D}, "index_head_dim x hidden_size", true);
    L.idx_k_norm_weight = idx("k_norm.weight", {c.index_head_dim}, "index_head_dim", false);
    L.idx_k_norm_bias = idx("k_norm.bias", {c.index_head_dim}, "index_head_dim", false);
    L.idx_weights_proj = idx("weights_proj.weight", {c.index_n_heads, D}, "index_n_heads x hidden_size", false);

    const std::string mlp = pre + "mlp.";
    L.is_moe = c.mlp_types[static_cast<size_t>(i)] == MlpType::moe;
    auto swiglu = [&](const std::string& p, int64_t inter, const char* why_up, const char* why_down) {
      MlpWeights m;
      m.gate_proj = e.req(p + "gate_proj.weight", {inter, D}, why_up, true);
      m.up_proj = e.req(p + "up_proj.weight", {inter, D}, why_up, true);
      m.down_proj = e.req(p + "down_proj.weight", {D, inter}, why_down, true);
      return m;
    };
    if (!L.is_moe) {
      L.dense = swiglu(mlp, c.intermediate_size, "intermediate_size x hidden_size", "hidden_size x intermediate_size");
      continue;
    }
    L.router_weight = e.req(mlp + "gate.weight", {c.n_routed_experts, D}, "n_routed_experts x hidden_size", false);
    L.router_bias = e.req(mlp + "gate.e_score_correction_bias", {c.n_routed_experts}, "n_routed_experts", false);
    L.experts.reserve(static_cast<size_t>(c.n_routed_experts));
    for (int64_t x = 0; x < c.n_routed_experts; ++x)
      L.experts.push_back(swiglu(mlp + "experts." + std::to_string(x) + ".", c.moe_intermediate_size,
                                 "moe_intermediate_size x hidden_size", "hidden_size x moe_intermediate_size"));
    if (c.n_shared_experts > 0)
      L.shared_expert = swiglu(mlp + "shared_experts.", c.moe_intermediate_size * c.n_shared_experts,
                               "moe_intermediate_size * n_shared_experts x hidden_size",
                               "hidden_size x moe_intermediate_size * n_shared_experts");
  }
  weight_dtype_ = weights_.layers.front().q_b_proj.dtype;
}

void Checkpoint::compute_totals() {
  const ModelConfig& c = config_;
  int64_t params = 0, bytes = 0;
  for (const auto& [name, v] : views_) {
    const int64_t n = v.numel();
    bytes += n * static_cast<int64_t>(dtype_size(v.dtype));
    if (ends_with(name, kScaleSuffix) && find(name.substr(0, name.size() - kScaleSuffix.size())) != nullptr) continue;
    if (layer_of(name) >= c.num_hidden_layers) continue;  // MTP layers
    if (c.tie_word_embeddings && name == "lm_head.weight") continue;
    params += n;
  }
  n_params_ = params;
  weight_bytes_ = bytes;

  Fnv1a h;
  h.str("glm5rt-checkpoint-fingerprint-v1");
  hash_config(h, c);
  h.u64(views_.size());
  for (const auto& [name, v] : views_) {  // std::map: sorted by name, independent of sharding
    h.str(name);
    h.u64(static_cast<uint64_t>(v.dtype));
    h.u64(v.shape.size());
    for (int64_t d : v.shape) h.u64(static_cast<uint64_t>(d));
  }
  // A little content, so that two fine-tunes with the same architecture differ: the final norm and the
  // first 4 KiB of the embeddings and lm_head (a few pages, not a scan of the weights).
  auto content = [&](const TensorView& v, size_t limit) {
    const size_t n = static_cast<size_t>(v.numel()) * dtype_size(v.dtype);
    h.bytes(v.data, std::min(n, limit));
  };
  content(weights_.final_norm, size_t{1} << 20);
  content(weights_.embed_tokens, 4096);
  content(weights_.lm_head, 4096);
  fingerprint_ = h.h;
}

}  // namespace glm5rt
