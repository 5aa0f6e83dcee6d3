// Post-processors of tokenizer.json ("post_processor") as far as they change ids for a single sequence:
// none, ByteLevel (offsets only: ids unchanged), TemplateProcessing ("single" template), BertProcessing,
// RobertaProcessing and Sequence. Others fail to load with UNSUPPORTED naming them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

namespace glm5rt {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual std::vector<int32_t> process(std::vector<int32_t> ids) const = 0;
};

// nullptr for a JSON null.
std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j);

}  // namespace glm5rt
