// C ABI of the tokenizer: loading, encode/decode with the size-query idiom, token lookups, GLM-5 chat
// formatting and the streaming decoder. Every entry point runs inside guard(): no exception crosses.
#include <string>
#include <vector>

#include "bindings_c/handles.hpp"
#include "bindings_c/shim.hpp"
#include "engine/model.hpp"
#include "tokenizer/chat_format.hpp"
#include "tokenizer/detok_stream.hpp"
#include "tokenizer/tokenizer.hpp"

using glm5rt::fail;
using glm5rt::require;
using glm5rt::Status;
using glm5rt::abi::guard;
using glm5rt::abi::require_arg;
using glm5rt::abi::write_sized;

namespace {

const glm5rt::Tokenizer& tok_of(const glm5rt_tokenizer* t) {
  require_arg(t, "tokenizer");
  require(t->impl != nullptr, Status::invalid_argument, "tokenizer handle is empty");
  return *t->impl;
}

constexpr uint32_t kTokenizeFlags = GLM5RT_TOKENIZE_PARSE_SPECIAL;
constexpr uint32_t kDetokenizeFlags = GLM5RT_DETOKENIZE_SKIP_SPECIAL;
constexpr uint32_t kChatFlags = GLM5RT_CHAT_ADD_GENERATION_PROMPT | GLM5RT_CHAT_THINKING_OFF;

void check_flags(uint32_t flags, uint32_t known, const char* what) {
  require((flags & ~known) == 0, Status::invalid_argument, what, ": unknown flag bits 0x", std::hex, flags & ~known);
}

// True for a size query (buf NULL, capacity 0): streaming calls then report the size without consuming.
bool is_size_query(const void* buf, size_t capacity) { return buf == nullptr && capacity == 0; }

}  // namespace

extern "C" {

GLM5RT_API glm5rt_status glm5rt_tokenizer_load(const char* dir, glm5rt_tokenizer** out_tokenizer) {
  return guard(__func__, [&] {
    require_arg(dir, "dir");
    require_arg(out_tokenizer, "out_tokenizer");
    auto t = glm5rt::Tokenizer::load_dir(dir);
    *out_tokenizer = new glm5rt_tokenizer{std::move(t)};
  });
}

GLM5RT_API glm5rt_status glm5rt_tokenizer_from_model(const glm5rt_model* model, glm5rt_tokenizer** out_tokenizer) {
  return guard(__func__, [&] {
    require_arg(model, "model");
    require_arg(out_tokenizer, "out_tokenizer");
    require(model->impl != nullptr, Status::invalid_argument, "model handle is empty");
    auto tok = model->impl->tokenizer();
    require(tok != nullptr, Status::not_found, "the model directory ", model->impl->dir(), " has no tokenizer.json");
    // The tokenizer object is shared: it lives as long as any handle (model or tokenizer) uses it.
    *out_tokenizer = new glm5rt_tokenizer{std::move(tok)};
  });
}

GLM5RT_API void glm5rt_tokenizer_free(glm5rt_tokenizer* tokenizer) { delete tokenizer; }

GLM5RT_API int32_t glm5rt_tokenizer_vocab_size(const glm5rt_tokenizer* tokenizer) {
  return (tokenizer && tokenizer->impl) ? tokenizer->impl->vocab_size() : 0;
}

GLM5RT_API int32_t glm5rt_tokenizer_is_eos(const glm5rt_tokenizer* tokenizer, int32_t token) {
  return (tokenizer && tokenizer->impl && tokenizer->impl->is_eos(token)) ? 1 : 0;
}

GLM5RT_API glm5rt_status glm5rt_tokenize(const glm5rt_tokenizer* tokenizer, const char* text, size_t text_len,
                                         uint32_t flags, int32_t* tokens, size_t capacity, size_t* out_n_tokens) {
  return guard(__func__, [&] {
    const auto& t = tok_of(tokenizer);
    require(text != nullptr || text_len == 0, Status::invalid_argument, "text must not be NULL");
    require_arg(out_n_tokens, "out_n_tokens");
    check_flags(flags, kTokenizeFlags, "glm5rt_tokenize");
    const std::vector<int32_t> ids =
        t.encode(std::string_view(text ? text : "", text_len), (flags & GLM5RT_TOKENIZE_PARSE_SPECIAL) != 0);
    write_sized(ids.data(), ids.size(), tokens, capacity, out_n_tokens, "the token buffer");
  });
}

GLM5RT_API glm5rt_status glm5rt_detokenize(const glm5rt_tokenizer* tokenizer, const int32_t* tokens, size_t n_tokens,
                                           uint32_t flags, char* buf, size_t capacity, size_t* out_len) {
  return guard(__func__, [&] {
    const auto& t = tok_of(tokenizer);
    require(tokens != nullptr || n_tokens == 0, Status::invalid_argument, "tokens must not be NULL");
    require_arg(out_len, "out_len");
    check_flags(flags, kDetokenizeFlags, "glm5rt_detokenize");
    const std::string text = t.decode(std::span<const int32_t>(tokens, n_tokens),
                                      (flags & GLM5RT_DETOKENIZE_SKIP_SPECIAL) != 0);
    write_sized(text.data(), text.size(), buf, capacity, out_len, "the text buffer");
  });
}

GLM5RT_API glm5rt_status glm5rt_token_to_piece(const glm5rt_tokenizer* tokenizer, int32_t token, char* buf,
                                               size_t capacity, size_t* out_len) {
  return guard(__func__, [&] {
    const auto& t = tok_of(tokenizer);
    require_arg(out_len, "out_len");
    const std::string bytes = t.token_bytes(token);
    write_sized(bytes.data(), bytes.size(), buf, capacity, out_len, "the piece buffer");
  });
}

GLM5RT_API glm5rt_status glm5rt_token_lookup(const glm5rt_tokenizer* tokenizer, const char* text, size_t text_len,
                                             int32_t* out_token) {
  return guard(__func__, [&] {
    const auto& t = tok_of(tokenizer);
    require(text != nullptr || text_len == 0, Status::invalid_argument, "text must not be NULL");
    require_arg(out_token, "out_token");
    const std::string_view s(text ? text : "", text_len);
    auto id = t.added_token_id(s);
    require(id.has_value(), Status::not_found, "no added or special token \"", std::string(s), "\"");
    *out_token = *id;
  });
}

GLM5RT_API glm5rt_status glm5rt_chat_format(const glm5rt_tokenizer* tokenizer, const glm5rt_chat_message* messages,
                                            size_t n_messages, uint32_t flags, char* buf, size_t capacity,
                                            size_t* out_len) {
  return guard(__func__, [&] {
    tok_of(tokenizer);  // the format is GLM-5's; the handle is checked for a consistent API
    require(messages != nullptr || n_messages == 0, Status::invalid_argument, "messages must not be NULL");
    require_arg(out_len, "out_len");
    check_flags(flags, kChatFlags, "glm5rt_chat_format");
    std::vector<glm5rt::ChatMessage> msgs;
    msgs.reserve(n_messages);
    for (size_t i = 0; i < n_messages; ++i) {
      const glm5rt_chat_message& m = messages[i];
      require(m.role != nullptr, Status::invalid_argument, "messages[", i, "].role must not be NULL");
      glm5rt::ChatMessage cm;
      cm.role = m.role;
      cm.content = m.content ? m.content : "";
      if (m.reasoning) cm.reasoning = std::string(m.reasoning);
      if (m.tool_calls_json) cm.tool_calls_json = std::string(m.tool_calls_json);
      msgs.push_back(std::move(cm));
    }
    glm5rt::ChatOptions opt;
    opt.add_generation_prompt = (flags & GLM5RT_CHAT_ADD_GENERATION_PROMPT) != 0;
    opt.thinking = (flags & GLM5RT_CHAT_THINKING_OFF) == 0;
    const std::string text = glm5rt::format_glm5_chat(msgs, opt);
    write_sized(text.data(), text.size(), buf, capacity, out_len, "the chat text buffer");
  });
}

GLM5RT_API glm5rt_status glm5rt_detok_stream_create(const glm5rt_tokenizer* tokenizer, glm5rt_detok_stream** out_stream) {
  return guard(__func__, [&] {
    tok_of(tokenizer);
    require_arg(out_stream, "out_stream");
    *out_stream = new glm5rt_detok_stream{std::make_shared<glm5rt::DetokStream>(tokenizer->impl)};
  });
}

GLM5RT_API void glm5rt_detok_stream_free(glm5rt_detok_stream* stream) { delete stream; }

GLM5RT_API glm5rt_status glm5rt_detok_stream_push(glm5rt_detok_stream* stream, int32_t token, char* buf,
                                                  size_t capacity, size_t* out_len) {
  return guard(__func__, [&] {
    require_arg(stream, "stream");
    require_arg(out_len, "out_len");
    // Compute without consuming; consume only once the text has been written (a size query or a
    // too-small buffer leaves the stream as it was, so the call can be repeated).
    const std::string text = stream->impl->peek(token);
    write_sized(text.data(), text.size(), buf, capacity, out_len, "the text buffer");
    if (!is_size_query(buf, capacity)) stream->impl->push(token);
  });
}

GLM5RT_API glm5rt_status glm5rt_detok_stream_flush(glm5rt_detok_stream* stream, char* buf, size_t capacity,
                                                   size_t* out_len) {
  return guard(__func__, [&] {
    require_arg(stream, "stream");
    require_arg(out_len, "out_len");
    // flush() resets, so measure on a copy first.
    glm5rt::DetokStream probe = *stream->impl;
    const std::string text = probe.flush();
    write_sized(text.data(), text.size(), buf, capacity, out_len, "the text buffer");
    if (!is_size_query(buf, capacity)) stream->impl->flush();
  });
}

}  // extern "C"
