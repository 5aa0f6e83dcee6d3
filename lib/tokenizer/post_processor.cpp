#include "tokenizer/post_processor.hpp"

#include "tokenizer/json_fields.hpp"

namespace glm5rt {
namespace {

using tokjson::json;

class Identity final : public PostProcessor {
 public:
  std::vector<int32_t> process(std::vector<int32_t> ids) const override { return ids; }
};

// Wraps the sequence: before + ids + after.
class Wrap final : public PostProcessor {
 public:
  Wrap(std::vector<int32_t> before, std::vector<int32_t> after) : before_(std::move(before)), after_(std::move(after)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    std::vector<int32_t> out(before_);
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), after_.begin(), after_.end());
    return out;
  }

 private:
  std::vector<int32_t> before_, after_;
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    for (const auto& p : parts_) ids = p->process(std::move(ids));
    return ids;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

int32_t pair_id(const json& j, const char* key, const char* component) {
  const json& p = tokjson::field(j, key, component);
  require(p.is_array() && p.size() == 2 && p[1].is_number_integer(), Status::format, "tokenizer.json: ", component,
          ".", key, " must be [token, id]");
  return p[1].get<int32_t>();
}

std::unique_ptr<PostProcessor> template_processing(const json& j) {
  const char* c = "post_processor TemplateProcessing";
  const json& single = tokjson::field(j, "single", c);
  const json& specials = tokjson::field(j, "special_tokens", c);
  require(single.is_array(), Status::format, "tokenizer.json: ", c, ".single must be an array");
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const json& item : single) {
    if (item.contains("Sequence")) {
      require(!seen_sequence, Status::unsupported, "tokenizer.json: ", c, ".single with two sequences");
      seen_sequence = true;
      continue;
    }
    require(item.contains("SpecialToken"), Status::format, "tokenizer.json: ", c, ".single item is neither Sequence nor SpecialToken");
    const std::string name = tokjson::get_string(item["SpecialToken"], "id", c);
    require(specials.is_object() && specials.contains(name), Status::format, "tokenizer.json: ", c,
            " uses special token \"", name, "\" missing from special_tokens");
    const json& ids = tokjson::field(specials[name], "ids", c);
    require(ids.is_array(), Status::format, "tokenizer.json: ", c, ".special_tokens[\"", name, "\"].ids must be an array");
    for (const json& id : ids) {
      require(id.is_number_integer(), Status::format, "tokenizer.json: ", c, " has a non-integer id");
      (seen_sequence ? after : before).push_back(id.get<int32_t>());
    }
  }
  return std::make_unique<Wrap>(std::move(before), std::move(after));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = tokjson::type_of(j, "post_processor");
  if (type == "ByteLevel") return std::make_unique<Identity>();
  if (type == "TemplateProcessing") return template_processing(j);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const char* c = type == "BertProcessing" ? "post_processor BertProcessing" : "post_processor RobertaProcessing";
    return std::make_unique<Wrap>(std::vector<int32_t>{pair_id(j, "cls", c)}, std::vector<int32_t>{pair_id(j, "sep", c)});
  }
  if (type == "Sequence") {
    const json& list = tokjson::field(j, "processors", "post_processor Sequence");
    require(list.is_array(), Status::format, "tokenizer.json: post_processor Sequence.processors must be an array");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const json& item : list) {
      auto p = make_post_processor(item);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  fail(Status::unsupported, "tokenizer.json: unsupported post_processor type \"", type,
       "\" (supported: ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing, Sequence)");
}

}  // namespace glm5rt
