// GLM-5 chat formatting against strings written out from the GLM-4.7 / GLM-5 chat template's rules
// (no newline after role tags; "</think>" for assistant turns without kept reasoning; tool calls as
// <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>; results in <tool_response>).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "tokenizer/chat_format.hpp"

using glm5rt::ChatMessage;
using glm5rt::ChatOptions;
using glm5rt::format_glm5_chat;

TEST_CASE("chat format: system + user with the generation prompt, thinking on and off") {
  std::vector<ChatMessage> msgs = {{"system", "Be brief.", {}, {}}, {"user", "Hi", {}, {}}};
  CHECK(format_glm5_chat(msgs, {true, true}) == "[gMASK]<sop><|system|>Be brief.<|user|>Hi<|assistant|><think>");
  CHECK(format_glm5_chat(msgs, {true, false}) == "[gMASK]<sop><|system|>Be brief.<|user|>Hi<|assistant|></think>");
  CHECK(format_glm5_chat(msgs, {false, true}) == "[gMASK]<sop><|system|>Be brief.<|user|>Hi");
  CHECK(format_glm5_chat({}, {false, true}) == "[gMASK]<sop>");
}

TEST_CASE("chat format: reasoning kept only after the last user turn, content stripped") {
  std::vector<ChatMessage> msgs = {
      {"user", "Q1", {}, {}},
      {"assistant", "  A1\n", std::string("old thoughts"), {}},
      {"user", "Q2", {}, {}},
      {"assistant", "A2", std::string("\nnew thoughts\n"), {}},
  };
  CHECK(format_glm5_chat(msgs, {false, true}) ==
        "[gMASK]<sop><|user|>Q1<|assistant|></think>A1<|user|>Q2<|assistant|><think>new thoughts</think>A2");
  // Reasoning written inline in the content is split out the same way.
  std::vector<ChatMessage> inline_msgs = {{"user", "Q", {}, {}}, {"assistant", "<think>\nhmm\n</think>\nA", {}, {}}};
  CHECK(format_glm5_chat(inline_msgs, {false, true}) == "[gMASK]<sop><|user|>Q<|assistant|><think>hmm</think>A");
}

TEST_CASE("chat format: tool calls and tool results") {
  std::vector<ChatMessage> msgs = {
      {"user", "Weather?", {}, {}},
      {"assistant", "", {}, std::string(R"([{"name": "get_weather", "arguments": {"city": "北京", "days": 2, "opts": {"unit": "C"}}}])")},
      {"tool", "sunny", {}, {}},
      {"observation", "warm", {}, {}},
  };
  CHECK(format_glm5_chat(msgs, {true, true}) ==
        "[gMASK]<sop><|user|>Weather?<|assistant|></think><tool_call>get_weather<arg_key>city</arg_key><arg_value>北京"
        "</arg_value><arg_key>days</arg_key><arg_value>2</arg_value><arg_key>opts</arg_key><arg_value>{\"unit\": \"C\"}"
        "</arg_value></tool_call><|observation|><tool_response>sunny</tool_response><tool_response>warm</tool_response>"
        "<|assistant|><think>");
  // OpenAI-shaped calls ({"function": {...}} with JSON-string arguments) are accepted too.
  std::vector<ChatMessage> openai = {
      {"assistant", "", {}, std::string(R"([{"type":"function","function":{"name":"f","arguments":"{\"x\":\"1\"}"}}])")}};
  CHECK(format_glm5_chat(openai, {false, true}) ==
        "[gMASK]<sop><|assistant|></think><tool_call>f<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>");
}

TEST_CASE("chat format: bad input is invalid_argument") {
  auto expect_invalid = [](std::vector<ChatMessage> msgs) {
    try {
      format_glm5_chat(msgs, {});
      FAIL("accepted bad input");
    } catch (const glm5rt::Error& e) {
      CHECK(e.status() == glm5rt::Status::invalid_argument);
    }
  };
  expect_invalid({{"wizard", "x", {}, {}}});
  expect_invalid({{"user", std::string("bad \xFF"), {}, {}}});
  expect_invalid({{"assistant", "", {}, std::string("{not json")}});
  expect_invalid({{"assistant", "", {}, std::string(R"([{"arguments": {}}])")}});
}
