// Malformed safetensors files, shard sets and checkpoints are rejected with the right status and a message
// that says what is wrong; well-formed variants (odd offsets, MTP extras, tied embeddings) load.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/checkpoint.hpp"
#include "model/safetensors.hpp"
#include "runtime/error.hpp"
#include "support/safetensors_writer.hpp"

using namespace glm5rt;
using namespace glm5rt::test;
using json = nlohmann::json;

namespace {

std::string fixture(const char* name) { return std::string(GLM5RT_TEST_DATA) + "/fixtures/" + name; }

template <typename F>
void expect_status(F&& f, Status status, const std::string& needle) {
  CAPTURE(needle);
  try {
    f();
    FAIL("no error although one was expected");
  } catch (const Error& e) {
    CHECK(e.status() == status);
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

void expect_header_error(const std::string& file, const std::string& needle) {
  expect_status(
      [&] {
        parse_safetensors_header(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "t.safetensors");
      },
      Status::format, needle);
}

std::string header_with(const json& entries, const std::string& data) {
  return safetensors_bytes(entries.dump(), data);
}

json entry(const char* dtype, std::vector<int64_t> shape, uint64_t b, uint64_t e) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {b, e}}};
}

// Every tensor of a fixture, as raw bytes, to write modified copies.
std::map<std::string, RawTensor> fixture_tensors(const char* name) {
  auto set = SafetensorsSet::open_dir(fixture(name));
  std::map<std::string, RawTensor> out;
  for (const auto& [n, t] : set.tensors()) {
    const auto& e = t.entry;
    out[n] = RawTensor{dtype_name(e.dtype), e.shape,
                       std::string(reinterpret_cast<const char*>(t.data), e.end - e.begin)};
  }
  return out;
}

// A checkpoint directory with the fixture's config (optionally edited) and `tensors` in one file.
void write_checkpoint(const TempDir& dir, const char* fixture_name, const std::map<std::string, RawTensor>& tensors,
                      const std::function<void(json&)>& edit_config = {}, size_t gap = 0) {
  json cfg = json::parse(read_file(fixture(fixture_name) + "/config.json"));
  if (edit_config) edit_config(cfg);
  write_file(dir / "config.json", cfg.dump(2));
  write_file(dir / "model.safetensors", safetensors_bytes(tensors, gap));
}

}  // namespace

TEST_CASE("a well-formed header parses: metadata, dtypes and offsets come through") {
  json h = {{"__metadata__", {{"format", "pt"}}},
            {"b", entry("BF16", {2, 3}, 16, 28)},
            {"a", entry("F32", {4}, 0, 16)},
            {"i", entry("I64", {1}, 28, 36)},
            {"q", entry("F8_E4M3", {2, 2}, 36, 40)},
            {"h", entry("F16", {0}, 40, 40)},
            {"k", entry("I32", {}, 40, 44)}};
  const std::string file = header_with(h, std::string(44, '\0'));
  auto hdr = parse_safetensors_header(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "t");
  REQUIRE(hdr.tensors.size() == 6);
  CHECK(hdr.metadata.at("format") == "pt");
  CHECK(hdr.tensors[0].name == "a");
  CHECK(hdr.tensors[1].name == "b");
  CHECK(hdr.tensors[1].dtype == DType::bf16);
  CHECK(hdr.tensors[1].shape == std::vector<int64_t>{2, 3});
  CHECK(hdr.data_offset == 8 + h.dump().size());
  CHECK(hdr.data_size == 44);
}

TEST_CASE("malformed headers are format errors naming the problem") {
  const std::string data(16, '\0');
  auto one = [&](json e) { return header_with({{"t", std::move(e)}}, data); };

  expect_header_error("", "too short");
  expect_header_error(std::string(7, '\0'), "too short");
  expect_header_error(le64(1000) + "{}", "past the end");  // header length past EOF
  expect_header_error(le64(uint64_t{1} << 62) + "{}", "exceeds");
  expect_header_error(le64(~uint64_t{0}) + "{}", "exceeds");
  expect_header_error(safetensors_bytes("{\"t\": {\"dtype\": ", ""), "not valid JSON");
  expect_header_error(safetensors_bytes("[1, 2]", ""), "not a JSON object");
  expect_header_error(safetensors_bytes("", ""), "not a JSON object");
  expect_header_error(safetensors_bytes("{\"t\": 5}", ""), "not an object");
  expect_header_error(one(entry("F32", {4}, 0, 20)), "past the data section");   // out of range
  expect_header_error(one(entry("F32", {2}, 12, 20)), "past the data section");  // truncated data
  expect_header_error(one(entry("F32", {4}, 8, 0)), "backwards");
  expect_header_error(one(entry("F32", {3}, 0, 16)), "shape x dtype");
  expect_header_error(one(entry("BF16", {4}, 0, 16)), "shape x dtype");
  expect_header_error(one(entry("F64", {2}, 0, 16)), "dtype 'F64'");
  expect_header_error(one(entry("F8_E5M2", {16}, 0, 16)), "dtype 'F8_E5M2'");
  expect_header_error(one(entry("U8", {16}, 0, 16)), "dtype 'U8'");
  expect_header_error(one({{"dtype", "F32"}, {"shape", {-4}}, {"data_offsets", {0, 16}}}), "non-negative");
  expect_header_error(one({{"dtype", "F32"}, {"shape", {4.0}}, {"data_offsets", {0, 16}}}), "non-negative");
  expect_header_error(one({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, -16}}}), "non-negative");
  expect_header_error(one({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0}}}), "data_offsets");
  expect_header_error(one({{"dtype", "F32"}, {"shape", 4}, {"data_offsets", {0, 16}}}), "shape");
  expect_header_error(one({{"shape", {4}}, {"data_offsets", {0, 16}}}), "dtype");
  expect_header_error(one({{"dtype", 7}, {"shape", {4}}, {"data_offsets", {0, 16}}}), "dtype");
  expect_header_error(one({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}, {"extra", 1}}),
                      "unknown field 'extra'");
  // 2^40 x 2^40 elements overflow 64-bit byte counts.
  expect_header_error(one(entry("F32", {int64_t{1} << 40, int64_t{1} << 40}, 0, 16)), "overflows");
  expect_header_error(one(entry("F32", {4, 1, 1, 1, 1, 1, 1, 1, 1}, 0, 16)), "dimensions");
  expect_header_error(header_with({{"a", entry("F32", {4}, 0, 16)}, {"b", entry("F32", {2}, 8, 16)}}, data),
                      "overlap");
  expect_header_error(header_with({{"a", entry("F32", {2}, 0, 8)}, {"b", entry("F32", {3}, 4, 16)}}, data),
                      "overlap");
  expect_header_error(safetensors_bytes(R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                            "t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
                                        data),
                      "appears twice");
  expect_header_error(header_with({{"__metadata__", {{"format", 1}}}}, ""), "__metadata__");
  expect_header_error(header_with({{"__metadata__", "pt"}}, ""), "__metadata__");
  expect_header_error(header_with({{"", entry("F32", {4}, 0, 16)}}, data), "empty name");
}

TEST_CASE("files on disk: missing, truncated, empty, a directory") {
  TempDir tmp;
  expect_status([&] { SafetensorsSet::open_file(tmp / "absent.safetensors"); }, Status::io, "absent.safetensors");
  expect_status([&] { SafetensorsSet::open_file(tmp.path()); }, Status::io, "not a regular file");
  write_file(tmp / "empty.safetensors", "");
  expect_status([&] { SafetensorsSet::open_file(tmp / "empty.safetensors"); }, Status::format, "too short");

  const std::string good = safetensors_bytes({{"w", RawTensor{"F32", {4}, f32_bytes({1, 2, 3, 4})}}});
  write_file(tmp / "good.safetensors", good);
  auto set = SafetensorsSet::open_file(tmp / "good.safetensors");
  CHECK(set.tensors().size() == 1);
  CHECK(set.total_bytes() == 16);
  // Every truncation of a valid file is rejected (header cut, JSON cut, data cut).
  for (size_t n = 0; n < good.size(); ++n) {
    CAPTURE(n);
    write_file(tmp / "cut.safetensors", good.substr(0, n));
    CHECK_THROWS_AS(SafetensorsSet::open_file(tmp / "cut.safetensors"), Error);
  }
}

TEST_CASE("sharded sets: index validation, missing shards, duplicates") {
  TempDir tmp;
  write_file(tmp / "a.safetensors", safetensors_bytes({{"x", RawTensor{"F32", {1}, f32_bytes({1})}}}));
  write_file(tmp / "b.safetensors", safetensors_bytes({{"y", RawTensor{"F32", {1}, f32_bytes({2})}}}));
  auto index = [&](const json& wm) {
    write_file(tmp / "model.safetensors.index.json", json{{"metadata", json::object()}, {"weight_map", wm}}.dump());
  };
  index({{"x", "a.safetensors"}, {"y", "b.safetensors"}});
  auto set = SafetensorsSet::open_dir(tmp.path());
  CHECK(set.tensors().size() == 2);
  CHECK(set.files().size() == 2);

  index({{"x", "a.safetensors"}, {"y", "c.safetensors"}});
  expect_status([&] { SafetensorsSet::open_dir(tmp.path()); }, Status::io, "c.safetensors");
  index({{"x", "a.safetensors"}, {"z", "b.safetensors"}, {"y", "b.safetensors"}});
  expect_status([&] { SafetensorsSet::open_dir(tmp.path()); }, Status::format, "'z'");
  index({{"x", "b.safetensors"}, {"y", "a.safetensors"}});
  expect_status([&] { SafetensorsSet::open_dir(tmp.path()); }, Status::format, "stored in");
  index({{"x", "../a.safetensors"}});
  expect_status([&] { SafetensorsSet::open_dir(tmp.path()); }, Status::format, "plain file name");
  index({{"x", 3}});
  expect_status([&] { SafetensorsSet::open_dir(tmp.path()); }, Status::format, "weight_map['x']");
  index(json::object());
  expect_status([&] { SafetensorsSet::open_dir(tmp.path()); }, Status::format, "empty");
  write_file(tmp / "model.safetensors.index.json", "{\"weight_map\": ");
  expect_status([&] { SafetensorsSet::open_dir(tmp.path()); }, Status::format, "not valid JSON");
  write_file(tmp / "model.safetensors.index.json", "{\"metadata\": {}}");
  expect_status([&] { SafetensorsSet::open_dir(tmp.path()); }, Status::format, "weight_map");

  // The same tensor stored in two shards.
  write_file(tmp / "b.safetensors", safetensors_bytes({{"x", RawTensor{"F32", {1}, f32_bytes({2})}}}));
  index({{"x", "a.safetensors"}, {"w", "b.safetensors"}});
  expect_status([&] { SafetensorsSet::open_dir(tmp.path()); }, Status::format, "stored twice");

  TempDir empty;
  expect_status([&] { SafetensorsSet::open_dir(empty.path()); }, Status::io, "no model.safetensors");
}

TEST_CASE("checkpoint validation: missing tensors, wrong shapes, wrong dtypes, bad scales") {
  const auto base = fixture_tensors("tiny-fp8");
  auto expect_ckpt = [&](const std::map<std::string, RawTensor>& ts, Status st, const std::string& needle,
                         const std::function<void(json&)>& edit = {}) {
    TempDir tmp;
    write_checkpoint(tmp, "tiny-fp8", ts, edit);
    expect_status([&] { Checkpoint::open(tmp.path()); }, st, needle);
  };
  {  // the unmodified copy loads (the harness itself is sound)
    TempDir tmp;
    write_checkpoint(tmp, "tiny-fp8", base);
    CHECK(Checkpoint::open(tmp.path())->weights().layers.size() == 4);
  }
  auto ts = base;
  ts.erase("model.layers.2.self_attn.kv_b_proj.weight");
  ts.erase("model.layers.2.self_attn.kv_b_proj.weight_scale_inv");
  expect_ckpt(ts, Status::format, "tensor 'model.layers.2.self_attn.kv_b_proj.weight' is missing");

  ts = base;
  ts.erase("model.layers.3.mlp.experts.5.up_proj.weight");
  ts.erase("model.layers.3.mlp.experts.5.up_proj.weight_scale_inv");
  expect_ckpt(ts, Status::format, "experts.5.up_proj.weight' is missing");

  ts = base;
  ts.erase("lm_head.weight");
  expect_ckpt(ts, Status::format, "lm_head.weight");

  ts = base;  // kv_b_proj stored transposed: [kv_lora, H*(nope+v)] instead of [H*(nope+v), kv_lora]
  ts["model.layers.1.self_attn.kv_b_proj.weight"].shape = {32, 224};
  ts["model.layers.1.self_attn.kv_b_proj.weight_scale_inv"].shape = {1, 7};
  expect_ckpt(ts, Status::format, "has shape [32, 224], expected [224, 32]");

  ts = base;
  ts["model.layers.0.input_layernorm.weight"] = RawTensor{"I32", {32}, std::string(128, '\0')};
  expect_ckpt(ts, Status::format, "input_layernorm.weight' has shape [32], expected [64]");
  ts["model.layers.0.input_layernorm.weight"] = RawTensor{"I32", {64}, std::string(256, '\0')};
  expect_ckpt(ts, Status::format, "dtype I32");

  ts = base;  // a norm in FP8 (with a valid-looking scale) is not allowed
  ts["model.norm.weight"] = RawTensor{"F8_E4M3", {64, 1}, std::string(64, '\x38')};
  ts["model.norm.weight_scale_inv"] = RawTensor{"F32", {2, 1}, f32_bytes({1, 1})};
  expect_ckpt(ts, Status::format, "model.norm.weight");

  const std::string scale = "model.layers.1.self_attn.q_b_proj.weight_scale_inv";  // [6, 2]
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    ts = base;
    std::vector<float> s(12, 0.01f);
    s[11] = bad;
    ts[scale].bytes = f32_bytes(s);
    expect_ckpt(ts, Status::format, "non-finite value");
  }
  ts = base;
  ts[scale].shape = {12, 1};
  expect_ckpt(ts, Status::format, "expected [6, 2]");
  ts = base;
  ts[scale] = RawTensor{"BF16", {6, 2}, std::string(24, '\0')};
  expect_ckpt(ts, Status::format, "expected F32");
  ts = base;
  ts.erase(scale);
  expect_ckpt(ts, Status::format, "has no 'model.layers.1.self_attn.q_b_proj.weight_scale_inv'");
  ts = base;  // a scale for a bf16 tensor
  ts["model.norm.weight_scale_inv"] = RawTensor{"F32", {1}, f32_bytes({1})};
  expect_ckpt(ts, Status::format, "not F8_E4M3");

  // FP8 weights but config.json without quantization_config: the block size is unknown.
  expect_ckpt(base, Status::format, "no fp8 quantization_config", [](json& c) { c.erase("quantization_config"); });
  // A config whose dimensions disagree with the weights.
  expect_ckpt(base, Status::format, "q_a_proj.weight' has shape [48, 64], expected [40, 64]",
              [](json& c) { c["q_lora_rank"] = 40; });
  // A broken config.json is reported with the directory's name.
  {
    TempDir tmp;
    write_checkpoint(tmp, "tiny-fp8", base);
    write_file(tmp / "config.json", "{");
    expect_status([&] { Checkpoint::open(tmp.path()); }, Status::format, tmp.path() + "/config.json");
    std::filesystem::remove(tmp / "config.json");
    expect_status([&] { Checkpoint::open(tmp.path()); }, Status::io, "config.json");
  }
}

TEST_CASE("require_shape: the backends' check of each tensor they take") {
  CHECK(shape_str({}) == "[]");
  CHECK(shape_str({154880, 6144}) == "[154880, 6144]");
  const float data[6] = {};
  TensorView t;
  t.name = "model.norm.weight";
  t.shape = {2, 3};
  t.data = data;
  CHECK_NOTHROW(require_shape(t, {2, 3}));
  expect_status([&] { require_shape(t, {3, 2}); }, Status::format,
                "tensor model.norm.weight has shape [2, 3], expected [3, 2]");
  expect_status([&] { require_shape(t, {6}); }, Status::format, "has shape [2, 3], expected [6]");
  expect_status([&] { require_shape(TensorView{}, {6}); }, Status::format, "tensor (missing) is missing");
  t.data = nullptr;
  expect_status([&] { require_shape(t, {2, 3}); }, Status::format, "tensor model.norm.weight is missing");
}

TEST_CASE("accepted variants: odd offsets, the MTP layer and other extras, tied embeddings") {
  const auto base = fixture_tensors("tiny-fp8");
  auto ref = Checkpoint::open(fixture("tiny-fp8"));
  {  // every tensor at an odd offset: scales get an aligned copy, decodes are unchanged
    TempDir tmp;
    write_checkpoint(tmp, "tiny-fp8", base, {}, 1);
    auto ck = Checkpoint::open(tmp.path());
    const std::string name = "model.layers.1.self_attn.q_b_proj.weight";
    const TensorView* v = ck->find(name);
    REQUIRE(v != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(v->scale_inv) % alignof(float) == 0);
    CHECK(decode_f32(*v) == decode_f32(*ref->find(name)));
    CHECK(ck->fingerprint() == ref->fingerprint());  // the layout in the file does not matter
  }
  {  // MTP layer model.layers.4.* (num_nextn_predict_layers 1) and an unknown extra are kept, not counted
    auto ts = base;
    for (const auto& [n, t] : base) {
      const std::string pre = "model.layers.3.";
      if (n.compare(0, pre.size(), pre) == 0) ts["model.layers.4." + n.substr(pre.size())] = t;
    }
    ts["model.layers.4.eh_proj.weight"] = RawTensor{"BF16", {64, 128}, std::string(64 * 128 * 2, '\0')};
    ts["extra.note"] = RawTensor{"I64", {2}, std::string(16, '\1')};
    TempDir tmp;
    write_checkpoint(tmp, "tiny-fp8", ts, [](json& c) { c["num_nextn_predict_layers"] = 1; });
    auto ck = Checkpoint::open(tmp.path());
    CHECK(ck->find("model.layers.4.eh_proj.weight") != nullptr);
    const TensorView* mtp = ck->find("model.layers.4.self_attn.q_b_proj.weight");
    REQUIRE(mtp != nullptr);
    CHECK(mtp->scale_inv != nullptr);
    CHECK(ck->find("extra.note") != nullptr);
    CHECK(ck->weights().layers.size() == 4);
    CHECK(ck->n_params() == ref->n_params() + 2);  // the extra's 2 values count, the MTP layer does not
    CHECK(ck->weight_bytes() > ref->weight_bytes());
    CHECK(ck->fingerprint() != ref->fingerprint());
  }
  {  // tied embeddings: no lm_head.weight stored, lm_head is the embedding matrix
    auto ts = base;
    ts.erase("lm_head.weight");
    TempDir tmp;
    write_checkpoint(tmp, "tiny-fp8", ts, [](json& c) { c["tie_word_embeddings"] = true; });
    auto ck = Checkpoint::open(tmp.path());
    CHECK(ck->weights().lm_head.data == ck->weights().embed_tokens.data);
    CHECK(ck->n_params() == ref->n_params() - 320 * 64);
  }
}
