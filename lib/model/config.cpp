// config.json -> ModelConfig, with the defaults and derived fields of transformers 5.17's GlmMoeDsaConfig
// (configuration_glm_moe_dsa.py, modeling_rope_utils.py) and strict checks: every error names the field.
#include "model/config.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/error.hpp"
#include "runtime/log.hpp"

namespace glm5rt {

namespace {

using json = nlohmann::json;

// Dimensions above this are not a real model (and would overflow shape products downstream).
constexpr int64_t kMaxDim = int64_t{1} << 24;

// Typed, field-naming access to one JSON object ("config.json" or "config.json: rope_parameters").
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  // null counts as absent (transformers writes e.g. "bos_token_id": null).
  bool has(const char* k) const {
    auto it = j_.find(k);
    return it != j_.end() && !it->is_null();
  }
  const json& at(const char* k) const { return j_.at(k); }

  int64_t integer(const char* k, int64_t lo, int64_t hi) const {
    require(has(k), Status::format, where_, ": required field '", k, "' is missing");
    return integer_value(k, j_.at(k), lo, hi);
  }
  int64_t integer(const char* k, int64_t lo, int64_t hi, int64_t def) const {
    return has(k) ? integer(k, lo, hi) : def;
  }
  double number(const char* k, double lo, double hi, double def) const {
    if (!has(k)) return def;
    const json& v = j_.at(k);
    require(v.is_number(), Status::format, where_, ": field '", k, "' must be a number, got ", v.dump());
    const double d = v.get<double>();
    require(std::isfinite(d) && d >= lo && d <= hi, Status::format, where_, ": field '", k, "' = ", d,
            " is outside [", lo, ", ", hi, "]");
    return d;
  }
  bool boolean(const char* k, bool def) const {
    if (!has(k)) return def;
    const json& v = j_.at(k);
    require(v.is_boolean(), Status::format, where_, ": field '", k, "' must be true or false, got ", v.dump());
    return v.get<bool>();
  }
  std::string string(const char* k, const std::string& def) const {
    if (!has(k)) return def;
    const json& v = j_.at(k);
    require(v.is_string(), Status::format, where_, ": field '", k, "' must be a string, got ", v.dump());
    return v.get<std::string>();
  }
  int64_t integer_value(const std::string& k, const json& v, int64_t lo, int64_t hi) const {
    require(v.is_number_integer(), Status::format, where_, ": field '", k, "' must be an integer, got ", v.dump());
    // A huge unsigned value would wrap in get<int64_t>(); compare as unsigned first.
    require(!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(hi), Status::format, where_,
            ": field '", k, "' = ", v.dump(), " is outside [", lo, ", ", hi, "]");
    const int64_t x = v.get<int64_t>();
    require(x >= lo && x <= hi, Status::format, where_, ": field '", k, "' = ", x, " is outside [", lo, ", ", hi,
            "]");
    return x;
  }
  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_;
};

json parse_json_object(const std::string& text, const char* file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(Status::format, file, ": not valid JSON: ", e.what());
  }
  require(j.is_object(), Status::format, file, ": not a JSON object");
  return j;
}

// eos_token_id: an int, a list of ints, or null.
void add_eos_ids(const json& j, const char* file, int64_t vocab, std::vector<int32_t>& out) {
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return;
  Fields f(j, file);
  auto add = [&](const json& v) {
    const int64_t id = f.integer_value("eos_token_id", v, 0, vocab - 1);
    for (int32_t e : out)
      if (e == id) return;
    out.push_back(static_cast<int32_t>(id));
  };
  if (it->is_array()) {
    for (const auto& v : *it) add(v);
  } else {
    add(*it);
  }
}

void parse_rope(const json& cfg, ModelConfig& c) {
  // transformers 5 reads rope_parameters; older configs have top-level rope_theta and rope_scaling.
  json rp = json::object();
  const char* rp_name = "rope_parameters";
  if (cfg.contains("rope_parameters") && !cfg.at("rope_parameters").is_null()) {
    rp = cfg.at("rope_parameters");
  } else if (cfg.contains("rope_scaling") && !cfg.at("rope_scaling").is_null()) {
    rp = cfg.at("rope_scaling");
    rp_name = "rope_scaling";
  }
  const std::string where = std::string("config.json: ") + rp_name;
  require(rp.is_object(), Status::format, where, " must be an object, got ", rp.dump());
  // transformers also accepts parameters keyed by layer type ({"deepseek_sparse_attention": {...}}); every
  // GLM-5 layer has the same type, so one set (or several identical ones) is unwrapped.
  if (!rp.empty() && std::all_of(rp.begin(), rp.end(), [](const json& v) { return v.is_object(); })) {
    for (auto it = rp.begin(); it != rp.end(); ++it)
      require(*it == *rp.begin(), Status::format, where, ": per-layer-type parameters differ ('", it.key(),
              "' vs '", rp.begin().key(), "'): not supported");
    json inner = *rp.begin();
    rp = std::move(inner);
  }
  Fields top(cfg, "config.json");
  Fields f(rp, where);

  std::string type = f.string("rope_type", f.string("type", "default"));
  if (type == "default") {
    c.rope.type = RopeType::default_;
  } else if (type == "yarn") {
    c.rope.type = RopeType::yarn;
  } else {
    fail(Status::format, where, ": rope_type '", type, "' is not supported (\"default\" or \"yarn\")");
  }
  // theta: rope_parameters first, then the legacy top-level field, then transformers' default 10000.
  c.rope.theta = f.number("rope_theta", 1e-9, 1e300, top.number("rope_theta", 1e-9, 1e300, 10000.0));
  require(c.rope.theta > 1.0, Status::format, where, ": rope_theta must be greater than 1, got ", c.rope.theta);
  if (f.has("partial_rotary_factor"))
    require(f.number("partial_rotary_factor", 0, 1, 1.0) == 1.0, Status::format, where,
            ": partial_rotary_factor other than 1 is not supported");

  static const std::set<std::string> known = {"rope_type", "type", "rope_theta", "factor",
                                              "original_max_position_embeddings", "beta_fast", "beta_slow",
                                              "mscale", "mscale_all_dim", "truncate", "attention_factor",
                                              "partial_rotary_factor"};
  for (auto it = rp.begin(); it != rp.end(); ++it)
    if (!known.count(it.key())) log(LogLevel::warn, where, ": ignoring unknown field '", it.key(), "'");

  if (c.rope.type == RopeType::default_) return;
  c.rope.original_max_position_embeddings =
      f.integer("original_max_position_embeddings", 1, int64_t{1} << 40, c.max_position_embeddings);
  const double derived = static_cast<double>(c.max_position_embeddings) /
                         static_cast<double>(c.rope.original_max_position_embeddings);
  c.rope.factor = f.number("factor", 1e-9, 1e9, derived);
  require(c.rope.factor >= 1.0, Status::format, where, ": yarn factor must be at least 1, got ", c.rope.factor);
  c.rope.beta_fast = f.number("beta_fast", 1e-9, 1e9, 32.0);
  c.rope.beta_slow = f.number("beta_slow", 1e-9, 1e9, 1.0);
  require(c.rope.beta_fast > c.rope.beta_slow, Status::format, where, ": beta_fast (", c.rope.beta_fast,
          ") must exceed beta_slow (", c.rope.beta_slow, ")");
  c.rope.mscale = f.number("mscale", 0, 1e9, 0.0);
  c.rope.mscale_all_dim = f.number("mscale_all_dim", 0, 1e9, 0.0);
  c.rope.truncate = f.boolean("truncate", true);
  c.rope.attention_factor = f.number("attention_factor", 0, 1e9, 0.0);
}

void parse_indexer_types(const json& cfg, ModelConfig& c) {
  const int64_t L = c.num_hidden_layers;
  Fields f(cfg, "config.json");
  c.indexer_types.clear();
  auto from_names = [&](const json& list, const char* field) {
    require(list.is_array(), Status::format, "config.json: ", field, " must be a list, got ", list.dump());
    require(static_cast<int64_t>(list.size()) == L, Status::format, "config.json: ", field, " has ", list.size(),
            " entries but num_hidden_layers is ", L);
    for (const auto& v : list) {
      const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
      if (s == "full" || s == "F") {
        c.indexer_types.push_back(IndexerType::full);
      } else if (s == "shared" || s == "S") {
        c.indexer_types.push_back(IndexerType::shared);
      } else {
        fail(Status::format, "config.json: ", field, " entry '", s, "' is not \"full\" or \"shared\"");
      }
    }
  };
  if (f.has("indexer_types")) {
    from_names(cfg.at("indexer_types"), "indexer_types");
  } else if (f.has("index_topk_pattern")) {
    // transformers: a string of F/S characters ("FSSF...") or a list of names.
    const json& p = cfg.at("index_topk_pattern");
    if (p.is_string()) {
      json list = json::array();
      for (char ch : p.get<std::string>()) list.push_back(std::string(1, ch));
      from_names(list, "index_topk_pattern");
    } else {
      from_names(p, "index_topk_pattern");
    }
  } else {
    // transformers: freq = max(index_topk_freq, 1), offset = index_skip_topk_offset (default 2); layer i runs
    // its own indexer when max(i - offset + 1, 0) % freq == 0.
    const int64_t freq = std::max<int64_t>(f.integer("index_topk_freq", -kMaxDim, kMaxDim, 1), 1);
    const int64_t offset = f.integer("index_skip_topk_offset", -kMaxDim, kMaxDim, 2);
    for (int64_t i = 0; i < L; ++i)
      c.indexer_types.push_back(std::max<int64_t>(i - offset + 1, 0) % freq == 0 ? IndexerType::full
                                                                                 : IndexerType::shared);
  }
  require(c.indexer_types.front() == IndexerType::full, Status::format,
          "config.json: indexer_types: layer 0 is \"shared\" but there is no earlier full indexer layer to share");
}

void parse_mlp_types(const json& cfg, ModelConfig& c) {
  const int64_t L = c.num_hidden_layers;
  Fields f(cfg, "config.json");
  c.mlp_types.clear();
  if (f.has("mlp_layer_types")) {
    const json& list = cfg.at("mlp_layer_types");
    require(list.is_array(), Status::format, "config.json: mlp_layer_types must be a list, got ", list.dump());
    require(static_cast<int64_t>(list.size()) == L, Status::format, "config.json: mlp_layer_types has ",
            list.size(), " entries but num_hidden_layers is ", L);
    for (const auto& v : list) {
      const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
      if (s == "dense") {
        c.mlp_types.push_back(MlpType::dense);
      } else if (s == "sparse" || s == "moe") {
        c.mlp_types.push_back(MlpType::moe);
      } else {
        fail(Status::format, "config.json: mlp_layer_types entry '", s, "' is not \"dense\" or \"sparse\"");
      }
    }
  } else {
    const int64_t k = std::min(f.integer("first_k_dense_replace", 0, kMaxDim, 3), L);
    for (int64_t i = 0; i < L; ++i) c.mlp_types.push_back(i < k ? MlpType::dense : MlpType::moe);
  }
}

void parse_quantization(const json& cfg, ModelConfig& c) {
  if (!cfg.contains("quantization_config") || cfg.at("quantization_config").is_null()) return;
  const json& q = cfg.at("quantization_config");
  const std::string where = "config.json: quantization_config";
  require(q.is_object(), Status::format, where, " must be an object");
  Fields f(q, where);
  const std::string method = f.string("quant_method", "");
  require(method == "fp8", Status::format, where, ": quant_method '", method,
          "' is not supported (only block-scaled \"fp8\")");
  const std::string fmt = f.string("fmt", "e4m3");
  require(fmt == "e4m3", Status::format, where, ": fmt '", fmt, "' is not supported (only \"e4m3\")");
  const std::string act = f.string("activation_scheme", "dynamic");
  require(act == "dynamic", Status::format, where, ": activation_scheme '", act,
          "' is not supported (only \"dynamic\")");
  c.quant.fp8 = true;
  if (f.has("weight_block_size")) {
    const json& b = q.at("weight_block_size");
    require(b.is_array() && b.size() == 2, Status::format, where, ": weight_block_size must be [rows, cols], got ",
            b.dump());
    c.quant.block_rows = f.integer_value("weight_block_size[0]", b[0], 1, kMaxDim);
    c.quant.block_cols = f.integer_value("weight_block_size[1]", b[1], 1, kMaxDim);
  } else {
    // Without a block size the scales are per tensor in other formats; GLM-5-FP8 always writes it.
    fail(Status::format, where, ": weight_block_size is missing (block-scaled FP8 needs it)");
  }
}

}  // namespace

ModelConfig parse_model_config(const std::string& config_json, const std::string& generation_config_json) {
  const json cfg = parse_json_object(config_json, "config.json");
  Fields f(cfg, "config.json");
  ModelConfig c;

  const std::string model_type = f.string("model_type", "glm_moe_dsa");
  require(model_type == "glm_moe_dsa", Status::format, "config.json: model_type '", model_type,
          "' is not supported (this runtime runs \"glm_moe_dsa\", GLM-5)");

  c.vocab_size = f.integer("vocab_size", 1, int64_t{1} << 30);
  c.hidden_size = f.integer("hidden_size", 1, kMaxDim);
  c.num_hidden_layers = f.integer("num_hidden_layers", 1, 4096);
  c.max_position_embeddings = f.integer("max_position_embeddings", 1, int64_t{1} << 40, 202752);
  c.rms_norm_eps = f.number("rms_norm_eps", 0, 1, 1e-5);
  require(c.rms_norm_eps > 0, Status::format, "config.json: field 'rms_norm_eps' must be positive");
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.num_nextn_predict_layers = f.integer("num_nextn_predict_layers", 0, 64, 0);
  c.torch_dtype = f.string("torch_dtype", f.string("dtype", ""));

  // MLA attention
  c.num_attention_heads = f.integer("num_attention_heads", 1, 65536);
  require(f.has("q_lora_rank"), Status::format,
          "config.json: q_lora_rank is missing or null: GLM-5 compresses queries (q_a_proj/q_b_proj); a model "
          "without it is not supported");
  c.q_lora_rank = f.integer("q_lora_rank", 1, kMaxDim);
  c.kv_lora_rank = f.integer("kv_lora_rank", 1, kMaxDim);
  c.qk_nope_head_dim = f.integer("qk_nope_head_dim", 0, kMaxDim);
  c.qk_rope_head_dim = f.integer("qk_rope_head_dim", 2, kMaxDim);
  c.v_head_dim = f.integer("v_head_dim", 1, kMaxDim);
  require(c.qk_rope_head_dim % 2 == 0, Status::format, "config.json: qk_rope_head_dim = ", c.qk_rope_head_dim,
          " must be even (RoPE rotates pairs)");
  if (f.has("qk_head_dim"))
    require(f.integer("qk_head_dim", 1, kMaxDim) == c.qk_head_dim(), Status::format, "config.json: qk_head_dim = ",
            cfg.at("qk_head_dim").dump(), " but qk_nope_head_dim + qk_rope_head_dim = ", c.qk_head_dim());
  // head_dim is overwritten with qk_rope_head_dim by transformers and num_key_value_heads is unused by MLA:
  // both are ignored here, as there.
  require(!f.boolean("attention_bias", false), Status::format,
          "config.json: attention_bias = true is not supported (GLM-5 projections have no bias)");
  require(!f.boolean("mlp_bias", false), Status::format, "config.json: mlp_bias = true is not supported");
  const std::string act = f.string("hidden_act", "silu");
  require(act == "silu", Status::format, "config.json: hidden_act '", act, "' is not supported (only \"silu\")");

  // Lightning indexer (DSA)
  c.index_n_heads = f.integer("index_n_heads", 1, 65536, 32);
  c.index_head_dim = f.integer("index_head_dim", 1, kMaxDim, 128);
  c.index_topk = f.integer("index_topk", 1, int64_t{1} << 40, 2048);
  require(c.index_head_dim >= c.qk_rope_head_dim, Status::format, "config.json: index_head_dim = ",
          c.index_head_dim, " is smaller than qk_rope_head_dim = ", c.qk_rope_head_dim,
          " (the indexer applies RoPE to its first qk_rope_head_dim dimensions)");

  // MLPs and MoE
  parse_mlp_types(cfg, c);
  const bool any_dense = std::count(c.mlp_types.begin(), c.mlp_types.end(), MlpType::dense) > 0;
  const bool any_moe = std::count(c.mlp_types.begin(), c.mlp_types.end(), MlpType::moe) > 0;
  c.intermediate_size = any_dense ? f.integer("intermediate_size", 1, kMaxDim)
                                  : f.integer("intermediate_size", 1, kMaxDim, 0);
  const char* experts_field = f.has("n_routed_experts") ? "n_routed_experts"
                              : f.has("num_experts")    ? "num_experts"  // transformers' BC alias
                              : f.has("num_local_experts") ? "num_local_experts"
                                                           : "n_routed_experts";
  // Required when a layer is MoE; otherwise optional but, when given, still checked for consistency.
  c.moe_intermediate_size = any_moe ? f.integer("moe_intermediate_size", 1, kMaxDim)
                                    : f.integer("moe_intermediate_size", 1, kMaxDim, 0);
  c.n_routed_experts = any_moe ? f.integer(experts_field, 1, 65536) : f.integer(experts_field, 1, 65536, 0);
  c.num_experts_per_tok = any_moe ? f.integer("num_experts_per_tok", 1, 65536)
                                  : f.integer("num_experts_per_tok", 0, 65536, 0);
  c.n_shared_experts = f.integer("n_shared_experts", 0, 64, 1);
  c.n_group = f.integer("n_group", 1, 65536, 1);
  c.topk_group = f.integer("topk_group", 1, 65536, 1);
  c.routed_scaling_factor = f.number("routed_scaling_factor", 0, 1e6, 2.5);
  c.norm_topk_prob = f.boolean("norm_topk_prob", true);
  const std::string scoring = f.string("scoring_func", "sigmoid");
  require(scoring == "sigmoid", Status::format, "config.json: scoring_func '", scoring,
          "' is not supported (GLM-5 routes with \"sigmoid\")");
  const std::string topk_method = f.string("topk_method", "noaux_tc");
  require(topk_method == "noaux_tc", Status::format, "config.json: topk_method '", topk_method,
          "' is not supported (GLM-5 uses \"noaux_tc\")");
  require(c.num_experts_per_tok <= c.n_routed_experts, Status::format, "config.json: num_experts_per_tok = ",
          c.num_experts_per_tok, " exceeds n_routed_experts = ", c.n_routed_experts);
  require(c.topk_group <= c.n_group, Status::format, "config.json: topk_group = ", c.topk_group,
          " exceeds n_group = ", c.n_group);
  if (c.n_routed_experts > 0) {
    require(c.n_routed_experts % c.n_group == 0, Status::format, "config.json: n_routed_experts = ",
            c.n_routed_experts, " is not divisible by n_group = ", c.n_group);
    const int64_t per_group = c.n_routed_experts / c.n_group;
    require(per_group >= 2, Status::format, "config.json: n_group = ", c.n_group, " leaves ", per_group,
            " expert(s) per group; group scores sum each group's top 2, so at least 2 are needed");
    require(c.num_experts_per_tok <= c.topk_group * per_group, Status::format, "config.json: num_experts_per_tok = ",
            c.num_experts_per_tok, " exceeds the ", c.topk_group * per_group, " experts in the topk_group = ",
            c.topk_group, " kept groups");
  }

  parse_rope(cfg, c);
  parse_indexer_types(cfg, c);
  parse_quantization(cfg, c);

  // End of generation: config.json's eos ids, then any extra from generation_config.json.
  add_eos_ids(cfg, "config.json", c.vocab_size, c.eos_token_ids);
  if (!generation_config_json.empty()) {
    const json gen = parse_json_object(generation_config_json, "generation_config.json");
    add_eos_ids(gen, "generation_config.json", c.vocab_size, c.eos_token_ids);
  }
  return c;
}

}  // namespace glm5rt
