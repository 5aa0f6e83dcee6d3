// Tokenizer entry points until [Tokenizer] lands: honest UNSUPPORTED, no fake success.
#include "bindings_c/shim.hpp"

using glm5rt::fail;
using glm5rt::Status;

namespace {
[[noreturn]] void not_yet() { fail(Status::unsupported, "the tokenizer is not implemented yet"); }
}  // namespace

extern "C" {

GLM5RT_API glm5rt_status glm5rt_tokenizer_load(const char*, glm5rt_tokenizer**) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_tokenizer_from_model(const glm5rt_model*, glm5rt_tokenizer**) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API void glm5rt_tokenizer_free(glm5rt_tokenizer*) {}
GLM5RT_API int32_t glm5rt_tokenizer_vocab_size(const glm5rt_tokenizer*) { return 0; }
GLM5RT_API int32_t glm5rt_tokenizer_is_eos(const glm5rt_tokenizer*, int32_t) { return 0; }
GLM5RT_API glm5rt_status glm5rt_tokenize(const glm5rt_tokenizer*, const char*, size_t, uint32_t, int32_t*, size_t, size_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_detokenize(const glm5rt_tokenizer*, const int32_t*, size_t, uint32_t, char*, size_t, size_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_token_to_piece(const glm5rt_tokenizer*, int32_t, char*, size_t, size_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_token_lookup(const glm5rt_tokenizer*, const char*, size_t, int32_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_chat_format(const glm5rt_tokenizer*, const glm5rt_chat_message*, size_t, uint32_t, char*, size_t, size_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_detok_stream_create(const glm5rt_tokenizer*, glm5rt_detok_stream**) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API void glm5rt_detok_stream_free(glm5rt_detok_stream*) {}
GLM5RT_API glm5rt_status glm5rt_detok_stream_push(glm5rt_detok_stream*, int32_t, char*, size_t, size_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_detok_stream_flush(glm5rt_detok_stream*, char*, size_t, size_t*) { return glm5rt::abi::guard(__func__, not_yet); }

}  // extern "C"
