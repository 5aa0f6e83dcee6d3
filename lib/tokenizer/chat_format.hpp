// GLM-5 chat formatting: renders messages as the text the model was trained on, to be tokenized with
// special tokens parsed. Follows the chat template shipped with GLM-4.7 / GLM-5 (see chat_format.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace glm5rt {

struct ChatMessage {
  std::string role;  // system, user, assistant, observation (tool is a synonym)
  std::string content;
  std::optional<std::string> reasoning;        // assistant thinking text
  std::optional<std::string> tool_calls_json;  // assistant: [{"name": ..., "arguments": {...}}, ...]
};

struct ChatOptions {
  bool add_generation_prompt = true;
  bool thinking = true;
};

// Throws invalid_argument for an unknown role, a non-UTF-8 field, or malformed tool_calls_json.
std::string format_glm5_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options);

}  // namespace glm5rt
