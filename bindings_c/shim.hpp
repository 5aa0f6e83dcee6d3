// Helpers shared by every C ABI entry point: the exception-catching shim, the thread-local last error,
// and the struct_size-aware copy of params structs. Only bindings_c/ includes this file.
#pragma once

#include <cstring>
#include <new>
#include <string>

#include "glm5rt/glm5rt.h"
#include "runtime/error.hpp"

namespace glm5rt::abi {

void set_last_error(const char* message);
void set_last_error(const std::string& message);
const char* t_last_error_cstr();

// Runs body(); converts any exception into a status and the thread's last-error message.
// Nothing escapes: this is what keeps C++ exceptions from crossing the C boundary.
template <typename Body>
glm5rt_status guard(const char* function, Body&& body) noexcept {
  try {
    body();
    return GLM5RT_OK;
  } catch (const Error& e) {
    set_last_error(std::string(function) + ": " + e.what());
    return static_cast<glm5rt_status>(e.status());
  } catch (const std::bad_alloc&) {
    set_last_error(std::string(function) + ": out of host memory");
    return GLM5RT_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string(function) + ": internal error: " + e.what());
    return GLM5RT_ERR_INTERNAL;
  } catch (...) {
    set_last_error(std::string(function) + ": internal error: unknown exception");
    return GLM5RT_ERR_INTERNAL;
  }
}

// Throws invalid_argument naming the parameter when p is NULL.
inline void require_arg(const void* p, const char* name) {
  require(p != nullptr, Status::invalid_argument, name, " must not be NULL");
}

// Copies a caller's params struct: defaults first, then the first min(struct_size, sizeof) bytes, so
// that callers compiled against an older (shorter) struct keep working. struct_size 0 is an error:
// it means the caller did not use *_default_params().
template <typename Params, typename DefaultFn>
Params read_params(const Params* user, DefaultFn defaults, const char* name) {
  Params p;
  defaults(&p);
  if (user == nullptr) return p;
  require(user->struct_size >= sizeof(uint32_t), Status::invalid_argument, name,
          "->struct_size is ", user->struct_size, ": fill the struct with its *_default_params() first");
  const size_t n = user->struct_size < sizeof(Params) ? user->struct_size : sizeof(Params);
  std::memcpy(static_cast<void*>(&p), user, n);
  p.struct_size = sizeof(Params);
  return p;
}

// Size-query idiom for variable-size outputs (see glm5rt.h): copies `count` elements into buf when it
// fits, sets *out_count, and throws buffer_too_small (after setting *out_count) otherwise.
template <typename T>
void write_sized(const T* data, size_t count, T* buf, size_t capacity, size_t* out_count, const char* what) {
  require_arg(out_count, "the size output");
  if (buf == nullptr && capacity == 0) {
    *out_count = count;
    return;
  }
  require_arg(buf, "the output buffer (with capacity > 0)");
  if (capacity < count) {
    *out_count = count;
    fail(Status::buffer_too_small, what, " needs ", count, " elements, the buffer holds ", capacity);
  }
  if (count) std::memcpy(buf, data, count * sizeof(T));
  *out_count = count;
}

}  // namespace glm5rt::abi
