// Global entry points: versions, status strings, the thread-local last error, logging set-up.
#include "bindings_c/shim.hpp"
#include "runtime/log.hpp"

namespace glm5rt::abi {
namespace {
thread_local std::string t_last_error;
}
void set_last_error(const char* message) {
  try {
    t_last_error = message;
  } catch (...) {
    // Out of memory while recording the error: keep the previous text rather than throw.
  }
}
void set_last_error(const std::string& message) { set_last_error(message.c_str()); }
const char* t_last_error_cstr() { return t_last_error.c_str(); }
}  // namespace glm5rt::abi

extern "C" {

GLM5RT_API const char* glm5rt_version(void) { return GLM5RT_VERSION_STRING; }

GLM5RT_API int32_t glm5rt_abi_version(void) { return GLM5RT_ABI_VERSION; }

GLM5RT_API const char* glm5rt_status_string(glm5rt_status status) {
  switch (status) {
    case GLM5RT_OK: return "ok";
    case GLM5RT_ERR_INVALID_ARGUMENT: return "invalid argument";
    case GLM5RT_ERR_UNSUPPORTED: return "unsupported";
    case GLM5RT_ERR_IO: return "input/output error";
    case GLM5RT_ERR_FORMAT: return "malformed input";
    case GLM5RT_ERR_OUT_OF_MEMORY: return "out of memory";
    case GLM5RT_ERR_CACHE_FULL: return "cache full";
    case GLM5RT_ERR_CANCELLED: return "cancelled";
    case GLM5RT_ERR_DEVICE: return "device error";
    case GLM5RT_ERR_NO_DEVICE: return "no usable device";
    case GLM5RT_ERR_MISMATCH: return "mismatch";
    case GLM5RT_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case GLM5RT_ERR_NOT_FOUND: return "not found";
    case GLM5RT_ERR_STATE: return "invalid state";
    case GLM5RT_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

GLM5RT_API const char* glm5rt_last_error(void) { return glm5rt::abi::t_last_error_cstr(); }

GLM5RT_API void glm5rt_set_log_callback(glm5rt_log_fn fn, void* user_data) { glm5rt::set_log_sink(fn, user_data); }

GLM5RT_API void glm5rt_set_log_level(int32_t level) { glm5rt::set_log_level(level); }

}  // extern "C"
