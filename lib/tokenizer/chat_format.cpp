// The rendering mirrors the Jinja chat template of GLM-4.7 / GLM-5 (zai-org), whose whitespace control
// ({%- -%}) leaves NO newline after role tags: "[gMASK]<sop><|user|>Hi<|assistant|><think>". The demo
// model's reference prompt ("[gMASK]<sop><|user|>What does `from_pretrained` do?<|assistant|></think>")
// has exactly that shape. (GLM-4.5's template differed: it put "\n" after every role tag.)
//
// Template rules reproduced here:
// - "[gMASK]<sop>" once at the start.
// - system / user: "<|system|>" / "<|user|>" + content.
// - assistant: "<|assistant|>", then "<think>" + reasoning.strip() + "</think>" when the message has
//   reasoning and comes after the last user message (older reasoning is dropped, "clear thinking"), else
//   "</think>"; then content.strip(); then each tool call as
//   "<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>" (string values verbatim,
//   others as JSON with ", " and ": " separators, non-ASCII unescaped, like tojson(ensure_ascii=False)).
//   Content written as "<think>...</think>rest" without separate reasoning is split the same way.
// - observation (tool result): "<|observation|>" once for a run of consecutive results, each wrapped in
//   "<tool_response>...</tool_response>".
// - generation prompt: "<|assistant|>" + "<think>" (thinking on) or "</think>" (thinking off).
#include "tokenizer/chat_format.hpp"

#include <nlohmann/json.hpp>

#include "runtime/error.hpp"
#include "tokenizer/utf8.hpp"

namespace glm5rt {
namespace {

using json = nlohmann::ordered_json;

// Python's str.strip(): Unicode whitespace at both ends; ASCII whitespace covers what matters here and
// the template's inputs, and non-ASCII spaces are rare enough to keep verbatim.
std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return std::string();
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string lstrip_newlines(const std::string& s) {
  const size_t b = s.find_first_not_of('\n');
  return b == std::string::npos ? std::string() : s.substr(b);
}

std::string rstrip_newlines(const std::string& s) {
  const size_t e = s.find_last_not_of('\n');
  return e == std::string::npos ? std::string() : s.substr(0, e + 1);
}

// Jinja's tojson(ensure_ascii=False): ", " and ": " separators, UTF-8 kept.
std::string to_jinja_json(const json& v) {
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      out += to_jinja_json(v[i]);
    }
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      out += json(it.key()).dump(-1, ' ', false) + ": " + to_jinja_json(it.value());
    }
    return out + "}";
  }
  return v.dump(-1, ' ', false);
}

void render_tool_calls(const std::string& tool_calls_json, std::string& out) {
  const json calls = json::parse(tool_calls_json, nullptr, false);
  require(!calls.is_discarded() && calls.is_array(), Status::invalid_argument,
          "tool_calls_json must be a JSON array of {\"name\": ..., \"arguments\": {...}}");
  for (json call : calls) {
    require(call.is_object(), Status::invalid_argument, "tool_calls_json: each call must be an object");
    if (call.contains("function") && call["function"].is_object()) call = call["function"];  // OpenAI shape
    require(call.contains("name") && call["name"].is_string(), Status::invalid_argument,
            "tool_calls_json: a call lacks a string \"name\"");
    out += "<tool_call>" + call["name"].get<std::string>();
    json args = call.contains("arguments") ? call["arguments"] : json::object();
    if (args.is_string()) {
      // Arguments given as a JSON-encoded string (OpenAI style) are decoded first.
      json parsed = json::parse(args.get<std::string>(), nullptr, false);
      require(!parsed.is_discarded(), Status::invalid_argument, "tool_calls_json: \"arguments\" string is not JSON");
      args = parsed;
    }
    require(args.is_object(), Status::invalid_argument, "tool_calls_json: \"arguments\" must be an object");
    for (auto it = args.begin(); it != args.end(); ++it) {
      out += "<arg_key>" + it.key() + "</arg_key><arg_value>";
      out += it.value().is_string() ? it.value().get<std::string>() : to_jinja_json(it.value());
      out += "</arg_value>";
    }
    out += "</tool_call>";
  }
}

}  // namespace

std::string format_glm5_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  int last_user = -1;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user") last_user = static_cast<int>(i);

  std::string out = "[gMASK]<sop>";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    require(utf8::is_valid(m.content), Status::invalid_argument, "message ", i, ": content is not valid UTF-8");
    require(!m.reasoning || utf8::is_valid(*m.reasoning), Status::invalid_argument, "message ", i,
            ": reasoning is not valid UTF-8");
    if (m.role == "system" || m.role == "user") {
      out += (m.role == "system" ? "<|system|>" : "<|user|>") + m.content;
    } else if (m.role == "assistant") {
      out += "<|assistant|>";
      std::string content = m.content;
      std::string reasoning;
      if (m.reasoning) {
        reasoning = *m.reasoning;
      } else if (const size_t close = content.find("</think>"); close != std::string::npos) {
        std::string before = rstrip_newlines(content.substr(0, close));
        const size_t open = before.rfind("<think>");
        reasoning = lstrip_newlines(open == std::string::npos ? before : before.substr(open + 7));
        content = lstrip_newlines(content.substr(content.rfind("</think>") + 8));
      }
      if (static_cast<int>(i) > last_user && !reasoning.empty()) out += "<think>" + strip(reasoning) + "</think>";
      else out += "</think>";
      out += strip(content);
      if (m.tool_calls_json && !m.tool_calls_json->empty()) render_tool_calls(*m.tool_calls_json, out);
    } else if (m.role == "observation" || m.role == "tool") {
      const bool continues = i > 0 && (messages[i - 1].role == "observation" || messages[i - 1].role == "tool");
      if (!continues) out += "<|observation|>";
      out += "<tool_response>" + m.content + "</tool_response>";
    } else {
      fail(Status::invalid_argument, "message ", i, ": unknown role \"", m.role,
           "\" (system, user, assistant, observation or tool)");
    }
  }
  if (options.add_generation_prompt) out += options.thinking ? "<|assistant|><think>" : "<|assistant|></think>";
  return out;
}

}  // namespace glm5rt
