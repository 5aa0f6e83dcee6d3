#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/bpe.hpp"
#include "tokenizer/decoder.hpp"
#include "tokenizer/json_fields.hpp"
#include "tokenizer/normalizer.hpp"
#include "tokenizer/post_processor.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace glm5rt {
namespace {

using tokjson::json;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  require(static_cast<bool>(in), Status::io, "cannot open ", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  require(!in.bad(), Status::io, "cannot read ", path.string());
  return ss.str();
}

json parse_json(const std::string& text, const std::string& what) {
  json j = json::parse(text, nullptr, false);
  require(!j.is_discarded(), Status::format, what, " is not valid JSON");
  return j;
}

// eos_token_id as an int or a list of ints (config.json, generation_config.json).
void collect_eos_ids(const json& j, std::vector<int32_t>& out) {
  auto it = j.find("eos_token_id");
  if (it == j.end()) return;
  if (it->is_number_integer()) out.push_back(it->get<int32_t>());
  else if (it->is_array())
    for (const auto& v : *it)
      if (v.is_number_integer()) out.push_back(v.get<int32_t>());
}

// Whether a decoder (or a Sequence inside it) is ByteFallback.
bool has_byte_fallback(const json& decoder) {
  if (!decoder.is_object()) return false;
  if (decoder.value("type", "") == "ByteFallback") return true;
  if (auto it = decoder.find("decoders"); it != decoder.end() && it->is_array())
    for (const auto& d : *it)
      if (has_byte_fallback(d)) return true;
  return false;
}

}  // namespace

Tokenizer::~Tokenizer() = default;

bool Tokenizer::is_byte_fallback_piece(int32_t id) const {
  if (!decoder_byte_fallback_) return false;
  // Added tokens go through the decoder too (a tokenizer may list its byte tokens as added tokens).
  const AddedToken* a = added_.by_id(id);
  const std::string* t = a ? &a->content : model_->id_to_token(id);
  return t && t->size() == 6 && t->compare(0, 3, "<0x") == 0 && (*t)[5] == '>';
}

std::shared_ptr<const Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::vector<int32_t> eos_ids,
                                                     std::string_view eos_token) {
  const json j = parse_json(std::string(tokenizer_json), "tokenizer.json");
  require(j.is_object(), Status::format, "tokenizer.json is not a JSON object");
  std::shared_ptr<Tokenizer> t(new Tokenizer());

  // Truncation and padding would change the ids of a plain encode: refuse rather than ignore them.
  for (const char* key : {"truncation", "padding"}) {
    auto it = j.find(key);
    require(it == j.end() || it->is_null(), Status::unsupported, "tokenizer.json: \"", key,
            "\" is set; truncation and padding are not supported (the runtime encodes whole texts)");
  }
  const json& model = tokjson::field(j, "model", "tokenizer.json");
  const std::string model_type = tokjson::string_or(model, "type", model.contains("merges") ? "BPE" : "");
  require(model_type == "BPE", Status::unsupported, "tokenizer.json: unsupported model type \"", model_type,
          "\" (supported: BPE)");

  static const json null_json;
  auto get = [&](const char* key) -> const json& {
    auto it = j.find(key);
    return it == j.end() ? null_json : *it;
  };
  t->normalizer_ = make_normalizer(get("normalizer"));
  t->pre_tokenizer_ = make_pre_tokenizer(get("pre_tokenizer"));
  t->model_ = std::make_unique<Bpe>(model);
  t->post_processor_ = make_post_processor(get("post_processor"));
  t->decoder_ = make_decoder(get("decoder"));
  t->decoder_byte_fallback_ = has_byte_fallback(get("decoder"));
  t->added_.build(parse_added_tokens(get("added_tokens")), t->normalizer_.get());
  t->vocab_size_ = std::max(t->model_->size(), t->added_.max_id() + 1);

  if (!eos_token.empty()) {
    auto id = t->token_to_id(eos_token);
    require(id.has_value(), Status::format, "tokenizer_config.json: eos_token \"", std::string(eos_token),
            "\" is not a token of tokenizer.json");
    eos_ids.push_back(*id);
  }
  std::sort(eos_ids.begin(), eos_ids.end());
  eos_ids.erase(std::unique(eos_ids.begin(), eos_ids.end()), eos_ids.end());
  t->eos_ids_ = std::move(eos_ids);
  return t;
}

std::shared_ptr<const Tokenizer> Tokenizer::load_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path base(dir);
  const fs::path tok_path = base / "tokenizer.json";
  require(fs::exists(tok_path), Status::io, "no tokenizer.json in ", dir);
  const std::string text = read_file(tok_path);

  std::vector<int32_t> eos;
  for (const char* name : {"config.json", "generation_config.json"}) {
    const fs::path p = base / name;
    if (!fs::exists(p)) continue;
    collect_eos_ids(parse_json(read_file(p), p.string()), eos);
  }
  std::string eos_token;
  if (const fs::path p = base / "tokenizer_config.json"; fs::exists(p)) {
    const json cfg = parse_json(read_file(p), p.string());
    if (auto it = cfg.find("eos_token"); it != cfg.end()) {
      if (it->is_string()) eos_token = it->get<std::string>();
      else if (it->is_object()) eos_token = tokjson::string_or(*it, "content", "");
    }
  }
  return from_json(text, std::move(eos), eos_token);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = added_.id_of(token)) return id;
  return model_->token_to_id(token);
}

bool Tokenizer::is_eos(int32_t id) const { return std::binary_search(eos_ids_.begin(), eos_ids_.end(), id); }

void Tokenizer::encode_text(const std::string& text, bool at_start, bool parse_special, std::vector<int32_t>& out) const {
  const std::string normalized = normalizer_ ? normalizer_->normalize(text) : text;
  for (const Segment& seg : added_.split(normalized, true, parse_special, at_start)) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
      continue;
    }
    std::vector<Piece> pieces{{seg.text, seg.at_start}};
    if (pre_tokenizer_) pre_tokenizer_->apply(pieces);
    for (const Piece& p : pieces) model_->encode_word(p.text, out);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special, bool add_special) const {
  const size_t bad = utf8::first_invalid(text);
  require(bad == text.size(), Status::invalid_argument, "the text is not valid UTF-8 (ill-formed byte 0x", std::hex,
          static_cast<int>(static_cast<unsigned char>(text[bad < text.size() ? bad : 0])), std::dec, " at offset ", bad,
          ")");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const Segment& seg : added_.split(text, false, parse_special, true)) {
    if (seg.id >= 0) ids.push_back(seg.id);
    else encode_text(seg.text, seg.at_start, parse_special, ids);
  }
  if (add_special && post_processor_) ids = post_processor_->process(std::move(ids));
  return ids;
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    require(id >= 0 && id < vocab_size_, Status::invalid_argument, "token id ", id, " is outside the vocabulary [0, ",
            vocab_size_, ")");
    if (const AddedToken* a = added_.by_id(id)) {
      if (!(skip_special && a->special)) tokens.push_back(a->content);
      continue;
    }
    if (const std::string* s = model_->id_to_token(id)) tokens.push_back(*s);
  }
  if (!decoder_) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) joined.push_back(' ');
      joined += tokens[i];
    }
    return joined;
  }
  std::string out;
  for (auto& piece : decoder_->decode_chain(std::move(tokens))) out += piece;
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return utf8::lossy(decode_bytes(ids, skip_special));
}

}  // namespace glm5rt
