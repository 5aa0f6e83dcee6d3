// Session entry points until [CPU engine] lands: honest UNSUPPORTED, no fake success.
#include "bindings_c/shim.hpp"

using glm5rt::fail;
using glm5rt::Status;

namespace {
[[noreturn]] void not_yet() { fail(Status::unsupported, "sessions (the inference engine) are not implemented yet"); }
}  // namespace

extern "C" {

GLM5RT_API glm5rt_status glm5rt_session_create(glm5rt_model*, const glm5rt_session_params*, glm5rt_session**) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API void glm5rt_session_free(glm5rt_session*) {}
GLM5RT_API glm5rt_status glm5rt_session_append(glm5rt_session*, const int32_t*, size_t, float*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_session_logits(glm5rt_session*, const float**, int32_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API int64_t glm5rt_session_n_tokens(const glm5rt_session*) { return 0; }
GLM5RT_API glm5rt_status glm5rt_session_tokens(const glm5rt_session*, int32_t*, size_t, size_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_session_reset(glm5rt_session*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_session_truncate(glm5rt_session*, int64_t) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_session_set_seed(glm5rt_session*, uint64_t) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API void glm5rt_session_cancel(glm5rt_session*) {}
GLM5RT_API glm5rt_status glm5rt_session_sample(glm5rt_session*, const glm5rt_sampler_params*, int32_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_session_step(glm5rt_session*, const glm5rt_sampler_params*, int32_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_batch_step(glm5rt_session* const*, size_t, const glm5rt_sampler_params*, int32_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_batch_append(glm5rt_session* const*, size_t, const int32_t* const*, const size_t*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_session_save_file(const glm5rt_session*, const char*) { return glm5rt::abi::guard(__func__, not_yet); }
GLM5RT_API glm5rt_status glm5rt_session_load_file(glm5rt_session*, const char*) { return glm5rt::abi::guard(__func__, not_yet); }

}  // extern "C"
