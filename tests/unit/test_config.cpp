// config.json parsing: transformers 5.17 GlmMoeDsaConfig semantics (defaults, derived per-layer lists,
// legacy rope fields) and an error naming the field for every invalid or inconsistent value.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "model/config.hpp"
#include "runtime/error.hpp"

using namespace glm5rt;
using json = nlohmann::json;

namespace {

json fixture_config(const char* name) {
  std::ifstream in(std::string(GLM5RT_TEST_DATA) + "/fixtures/" + name + "/config.json");
  REQUIRE(in);
  return json::parse(in);
}

// Expects parse_model_config to fail with Status::format and a message containing `needle`.
void expect_error(const json& cfg, const std::string& needle, const std::string& gen = "") {
  CAPTURE(needle);
  try {
    parse_model_config(cfg.dump(), gen);
    FAIL("parsed although it should not: ", cfg.dump());
  } catch (const Error& e) {
    CHECK(e.status() == Status::format);
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

const std::vector<IndexerType> kF = {IndexerType::full};

std::vector<IndexerType> pattern(const std::string& s) {
  std::vector<IndexerType> v;
  for (char c : s) v.push_back(c == 'F' ? IndexerType::full : IndexerType::shared);
  return v;
}
std::vector<MlpType> mlp(const std::string& s) {
  std::vector<MlpType> v;
  for (char c : s) v.push_back(c == 'D' ? MlpType::dense : MlpType::moe);
  return v;
}

// zai-org/GLM-5's dimensions (docs/GLM5.md), written the way a hub config.json writes them; fields it
// leaves out take transformers' defaults.
json glm5_config() {
  return json::parse(R"({
    "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
    "vocab_size": 154880, "hidden_size": 6144, "num_hidden_layers": 78, "first_k_dense_replace": 3,
    "intermediate_size": 12288, "moe_intermediate_size": 2048, "n_routed_experts": 256,
    "num_experts_per_tok": 8, "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
    "routed_scaling_factor": 2.5, "norm_topk_prob": true, "num_attention_heads": 64,
    "num_key_value_heads": 64, "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64, "v_head_dim": 256, "index_n_heads": 32, "index_head_dim": 128,
    "index_topk": 2048, "rope_theta": 1000000, "rms_norm_eps": 1e-05, "max_position_embeddings": 202752,
    "eos_token_id": [154820, 154827, 154829], "num_nextn_predict_layers": 1, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]}
  })");
}

}  // namespace

TEST_CASE("fixture configs parse with the values they hold") {
  const ModelConfig c = parse_model_config(fixture_config("tiny-f32").dump());
  CHECK(c.vocab_size == 320);
  CHECK(c.hidden_size == 64);
  CHECK(c.num_hidden_layers == 4);
  CHECK(c.intermediate_size == 96);
  CHECK(c.moe_intermediate_size == 32);
  CHECK(c.n_routed_experts == 8);
  CHECK(c.num_experts_per_tok == 2);
  CHECK(c.n_shared_experts == 1);
  CHECK(c.n_group == 2);
  CHECK(c.topk_group == 1);
  CHECK(c.routed_scaling_factor == 2.5);
  CHECK(c.norm_topk_prob);
  CHECK(c.num_attention_heads == 4);
  CHECK(c.q_lora_rank == 48);
  CHECK(c.kv_lora_rank == 32);
  CHECK(c.qk_nope_head_dim == 32);
  CHECK(c.qk_rope_head_dim == 16);
  CHECK(c.qk_head_dim() == 48);
  CHECK(c.v_head_dim == 24);
  CHECK(c.index_n_heads == 16);
  CHECK(c.index_head_dim == 32);
  CHECK(c.index_topk == 8);
  CHECK(c.rms_norm_eps == 1e-5);
  CHECK(c.rope.type == RopeType::default_);
  CHECK(c.rope.theta == 10000.0);
  CHECK(c.max_position_embeddings == 4096);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.num_nextn_predict_layers == 0);
  CHECK(c.indexer_types == pattern("FFFF"));
  CHECK(c.mlp_types == mlp("DMMM"));
  CHECK(c.eos_token_ids == std::vector<int32_t>{1, 2});
  CHECK_FALSE(c.quant.fp8);
  CHECK(c.torch_dtype == "float32");

  const ModelConfig q = parse_model_config(fixture_config("tiny-fp8").dump());
  CHECK(q.quant.fp8);
  CHECK(q.quant.block_rows == 32);
  CHECK(q.quant.block_cols == 32);
}

TEST_CASE("the GLM-5 config: defaults and derived lists as transformers derives them") {
  const ModelConfig c = parse_model_config(glm5_config().dump());
  CHECK(c.num_hidden_layers == 78);
  CHECK(c.mlp_types.size() == 78);
  CHECK(c.mlp_types[2] == MlpType::dense);
  CHECK(c.mlp_types[3] == MlpType::moe);
  CHECK(c.mlp_types[77] == MlpType::moe);
  CHECK(c.indexer_types == std::vector<IndexerType>(78, IndexerType::full));  // freq 1: every layer
  CHECK(c.rope.theta == 1e6);  // legacy top-level rope_theta
  CHECK(c.rope.type == RopeType::default_);
  CHECK(c.qk_head_dim() == 256);
  CHECK(c.num_nextn_predict_layers == 1);
  CHECK(c.eos_token_ids == std::vector<int32_t>{154820, 154827, 154829});
  CHECK(c.quant.fp8);
  CHECK(c.quant.block_rows == 128);
}

TEST_CASE("indexer_types: explicit list, index_topk_pattern, index_topk_freq / index_skip_topk_offset") {
  json j = fixture_config("tiny-f32");
  j["indexer_types"] = {"full", "shared", "shared", "full"};
  CHECK(parse_model_config(j.dump()).indexer_types == pattern("FSSF"));

  j.erase("indexer_types");
  j["index_topk_pattern"] = "FSFS";
  CHECK(parse_model_config(j.dump()).indexer_types == pattern("FSFS"));
  j["index_topk_pattern"] = {"full", "full", "shared", "full"};
  CHECK(parse_model_config(j.dump()).indexer_types == pattern("FFSF"));
  j["index_topk_pattern"] = "FSF";
  expect_error(j, "index_topk_pattern");
  j["index_topk_pattern"] = "FSXF";
  expect_error(j, "index_topk_pattern");
  j.erase("index_topk_pattern");

  // transformers: full where max(i - offset + 1, 0) % max(freq, 1) == 0 (offset defaults to 2).
  j["num_hidden_layers"] = 8;
  j["mlp_layer_types"] = {"dense", "sparse", "sparse", "sparse", "sparse", "sparse", "sparse", "sparse"};
  j["layer_types"] = json::array();
  CHECK(parse_model_config(j.dump()).indexer_types == pattern("FFFFFFFF"));  // freq 1
  j["index_topk_freq"] = 4;  // i - 1 = 0, 4 -> layers 0, 1, 5
  CHECK(parse_model_config(j.dump()).indexer_types == pattern("FFSSSFSS"));
  j["index_skip_topk_offset"] = 0;  // i + 1 = 4, 8 -> layers 3, 7 (and layer 0 would be shared)
  expect_error(j, "layer 0");
  j["index_skip_topk_offset"] = 1;  // i = 0, 4 -> layers 0, 4
  CHECK(parse_model_config(j.dump()).indexer_types == pattern("FSSSFSSS"));
  j["index_topk_freq"] = 0;  // max(0, 1) = 1
  CHECK(parse_model_config(j.dump()).indexer_types == pattern("FFFFFFFF"));

  json k = fixture_config("tiny-f32");
  k["indexer_types"] = {"full", "full", "full"};
  expect_error(k, "indexer_types has 3 entries but num_hidden_layers is 4");
  k["indexer_types"] = {"full", "full", "full", "sparse"};
  expect_error(k, "indexer_types entry 'sparse'");
  k["indexer_types"] = {"shared", "full", "full", "full"};
  expect_error(k, "indexer_types");
  k["indexer_types"] = "FFFF";
  expect_error(k, "indexer_types must be a list");
}

TEST_CASE("mlp_layer_types and first_k_dense_replace") {
  json j = fixture_config("tiny-f32");
  j["mlp_layer_types"] = {"dense", "dense", "sparse", "dense"};
  CHECK(parse_model_config(j.dump()).mlp_types == mlp("DDMD"));
  j["mlp_layer_types"] = {"dense", "sparse"};
  expect_error(j, "mlp_layer_types has 2 entries but num_hidden_layers is 4");
  j["mlp_layer_types"] = {"dense", "sparse", "sparse", "moe2"};
  expect_error(j, "mlp_layer_types entry 'moe2'");
  j.erase("mlp_layer_types");
  j["first_k_dense_replace"] = 2;
  CHECK(parse_model_config(j.dump()).mlp_types == mlp("DDMM"));
  j["first_k_dense_replace"] = 9;  // more than the layers: all dense (transformers clamps)
  CHECK(parse_model_config(j.dump()).mlp_types == mlp("DDDD"));
  j.erase("first_k_dense_replace");  // transformers' default 3
  CHECK(parse_model_config(j.dump()).mlp_types == mlp("DDDM"));
  j["first_k_dense_replace"] = -1;
  expect_error(j, "first_k_dense_replace");
}

TEST_CASE("eos ids: int or list, merged with generation_config.json") {
  json j = fixture_config("tiny-f32");
  j["eos_token_id"] = 7;
  CHECK(parse_model_config(j.dump()).eos_token_ids == std::vector<int32_t>{7});
  CHECK(parse_model_config(j.dump(), R"({"eos_token_id": [9, 7, 11]})").eos_token_ids ==
        std::vector<int32_t>{7, 9, 11});
  CHECK(parse_model_config(j.dump(), R"({"eos_token_id": 12})").eos_token_ids == std::vector<int32_t>{7, 12});
  j["eos_token_id"] = nullptr;
  CHECK(parse_model_config(j.dump()).eos_token_ids.empty());
  j["eos_token_id"] = 320;  // vocab_size 320
  expect_error(j, "eos_token_id");
  j["eos_token_id"] = {1, "2"};
  expect_error(j, "eos_token_id");
  j["eos_token_id"] = 1;
  expect_error(j, "generation_config.json", R"({"eos_token_id": -4})");
  expect_error(j, "generation_config.json: not valid JSON", "{");
}

TEST_CASE("rope: rope_parameters, legacy rope_theta / rope_scaling, yarn defaults") {
  json j = fixture_config("tiny-yarn");
  ModelConfig c = parse_model_config(j.dump());
  CHECK(c.rope.type == RopeType::yarn);
  CHECK(c.rope.factor == 4.0);
  CHECK(c.rope.truncate);
  CHECK(c.rope.attention_factor == 0.0);

  // Legacy form: top-level rope_theta + rope_scaling with "type".
  j.erase("rope_parameters");
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 8.0}, {"original_max_position_embeddings", 512},
                       {"mscale_all_dim", 0.707}, {"truncate", false}, {"attention_factor", 1.25}};
  c = parse_model_config(j.dump());
  CHECK(c.rope.type == RopeType::yarn);
  CHECK(c.rope.theta == 500000.0);
  CHECK(c.rope.factor == 8.0);
  CHECK(c.rope.original_max_position_embeddings == 512);
  CHECK(c.rope.mscale == 0.0);
  CHECK(c.rope.mscale_all_dim == 0.707);
  CHECK_FALSE(c.rope.truncate);
  CHECK(c.rope.attention_factor == 1.25);
  CHECK(c.rope.beta_fast == 32.0);
  CHECK(c.rope.beta_slow == 1.0);

  // A missing factor is max_position_embeddings / original_max_position_embeddings (docs/GLM5.md).
  j["rope_scaling"].erase("factor");
  CHECK(parse_model_config(j.dump()).rope.factor == 4096.0 / 512.0);

  json d = fixture_config("tiny-f32");
  d.erase("rope_parameters");  // nothing at all: transformers' default theta
  c = parse_model_config(d.dump());
  CHECK(c.rope.type == RopeType::default_);
  CHECK(c.rope.theta == 10000.0);

  d["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}};
  expect_error(d, "rope_type 'dynamic'");
  d["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", -1}};
  expect_error(d, "rope_theta");
  d["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", "big"}};
  expect_error(d, "rope_theta");
  d["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e4}, {"factor", 0.5}};
  expect_error(d, "factor");
  d["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e4}, {"factor", 2}, {"beta_fast", 1},
                          {"beta_slow", 2}};
  expect_error(d, "beta_fast");
  d["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}};
  expect_error(d, "partial_rotary_factor");
  // Keyed by layer type, as transformers allows.
  d["rope_parameters"] = {{"deepseek_sparse_attention", {{"rope_type", "default"}, {"rope_theta", 2e6}}}};
  CHECK(parse_model_config(d.dump()).rope.theta == 2e6);
  d["rope_parameters"] = {{"a", {{"rope_type", "default"}, {"rope_theta", 2e6}}},
                          {"b", {{"rope_type", "default"}, {"rope_theta", 1e6}}}};
  expect_error(d, "differ");
  d["rope_parameters"] = "yarn";
  expect_error(d, "rope_parameters must be an object");
}

TEST_CASE("quantization_config") {
  json j = fixture_config("tiny-fp8");
  j["quantization_config"]["weight_block_size"] = {128, 64};
  ModelConfig c = parse_model_config(j.dump());
  CHECK(c.quant.block_rows == 128);
  CHECK(c.quant.block_cols == 64);
  j["quantization_config"]["weight_block_size"] = {128};
  expect_error(j, "weight_block_size");
  j["quantization_config"]["weight_block_size"] = {128, 0};
  expect_error(j, "weight_block_size[1]");
  j["quantization_config"].erase("weight_block_size");
  expect_error(j, "weight_block_size");
  j["quantization_config"]["weight_block_size"] = {128, 128};
  j["quantization_config"]["quant_method"] = "awq";
  expect_error(j, "quant_method 'awq'");
  j["quantization_config"]["quant_method"] = "fp8";
  j["quantization_config"]["fmt"] = "e5m2";
  expect_error(j, "fmt 'e5m2'");
  j["quantization_config"]["fmt"] = "e4m3";
  j["quantization_config"]["activation_scheme"] = "static";
  expect_error(j, "activation_scheme");
  j["quantization_config"] = nullptr;
  CHECK_FALSE(parse_model_config(j.dump()).quant.fp8);
}

TEST_CASE("inconsistent or invalid values name the field") {
  const json base = fixture_config("tiny-f32");
  auto with = [&](const char* k, json v) {
    json j = base;
    j[k] = std::move(v);
    return j;
  };
  auto without = [&](const char* k) {
    json j = base;
    j.erase(k);
    return j;
  };
  expect_error(with("qk_head_dim", 64), "qk_head_dim");
  expect_error(with("num_experts_per_tok", 9), "num_experts_per_tok = 9 exceeds n_routed_experts = 8");
  expect_error(with("topk_group", 3), "topk_group = 3 exceeds n_group = 2");
  expect_error(with("n_group", 3), "not divisible by n_group");
  expect_error(with("n_group", 8), "at least 2");
  {
    json j = with("n_group", 4);
    j["topk_group"] = 1;
    j["num_experts_per_tok"] = 3;  // one kept group of 2 experts cannot supply 3
    expect_error(j, "num_experts_per_tok = 3 exceeds the 2 experts");
  }
  expect_error(without("hidden_size"), "required field 'hidden_size' is missing");
  expect_error(without("num_hidden_layers"), "num_hidden_layers");
  expect_error(without("kv_lora_rank"), "kv_lora_rank");
  expect_error(without("q_lora_rank"), "q_lora_rank");
  expect_error(with("q_lora_rank", nullptr), "q_lora_rank");
  expect_error(with("hidden_size", 64.5), "field 'hidden_size' must be an integer");
  expect_error(with("hidden_size", "64"), "hidden_size");
  expect_error(with("hidden_size", 0), "hidden_size");
  expect_error(with("vocab_size", -3), "vocab_size");
  expect_error(with("vocab_size", json::parse("18446744073709551615")), "vocab_size");
  expect_error(with("num_attention_heads", json::parse("1e30")), "num_attention_heads");
  expect_error(with("qk_rope_head_dim", 15), "qk_rope_head_dim");
  expect_error(with("index_head_dim", 8), "index_head_dim");
  expect_error(with("rms_norm_eps", 0), "rms_norm_eps");
  expect_error(with("rms_norm_eps", "tiny"), "rms_norm_eps");
  expect_error(with("norm_topk_prob", 1), "norm_topk_prob");
  expect_error(with("tie_word_embeddings", "no"), "tie_word_embeddings");
  expect_error(with("model_type", "deepseek_v3"), "model_type 'deepseek_v3'");
  expect_error(with("hidden_act", "gelu"), "hidden_act");
  expect_error(with("attention_bias", true), "attention_bias");
  expect_error(with("scoring_func", "softmax"), "scoring_func");
  expect_error(with("num_nextn_predict_layers", -1), "num_nextn_predict_layers");
  expect_error(without("n_routed_experts"), "n_routed_experts");
  expect_error(without("moe_intermediate_size"), "moe_intermediate_size");
  {
    json j = without("n_routed_experts");
    j["num_experts"] = 8;  // transformers' backward-compatible alias
    CHECK(parse_model_config(j.dump()).n_routed_experts == 8);
  }
  {
    // Fuzzer find: all layers dense, n_routed_experts absent, num_experts_per_tok still 2.
    json j = without("n_routed_experts");
    j["mlp_layer_types"] = {"dense", "dense", "dense", "dense"};
    expect_error(j, "num_experts_per_tok = 2 exceeds n_routed_experts = 0");
    j["num_experts_per_tok"] = 0;
    j["topk_group"] = 3;
    expect_error(j, "topk_group = 3 exceeds n_group = 2");
    j["topk_group"] = 1;
    CHECK(parse_model_config(j.dump()).n_routed_experts == 0);
  }
  {
    json j = without("intermediate_size");  // needed only when a layer is dense
    expect_error(j, "intermediate_size");
    j["mlp_layer_types"] = {"sparse", "sparse", "sparse", "sparse"};
    CHECK(parse_model_config(j.dump()).intermediate_size == 0);
  }
}

TEST_CASE("malformed JSON is a format error, not a crash") {
  for (const char* text : {"", "{", "[]", "null", "42", "{\"vocab_size\": }", "\xff\xfe", "{\"a\":1}garbage"}) {
    CAPTURE(text);
    try {
      parse_model_config(text);
      FAIL("parsed");
    } catch (const Error& e) {
      CHECK(e.status() == Status::format);
      CHECK(std::string(e.what()).find("config.json") != std::string::npos);
    }
  }
}
