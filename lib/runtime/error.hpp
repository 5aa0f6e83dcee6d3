// Errors inside the core: a glm5rt::Error carries a pinned status code and a message. The C ABI shims
// (bindings_c/) turn it into a glm5rt_status plus the thread-local last-error text; nothing else in the
// core needs to know about C.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "glm5rt/glm5rt.h"

namespace glm5rt {

enum class Status : int32_t {
  ok = GLM5RT_OK,
  invalid_argument = GLM5RT_ERR_INVALID_ARGUMENT,
  unsupported = GLM5RT_ERR_UNSUPPORTED,
  io = GLM5RT_ERR_IO,
  format = GLM5RT_ERR_FORMAT,
  out_of_memory = GLM5RT_ERR_OUT_OF_MEMORY,
  cache_full = GLM5RT_ERR_CACHE_FULL,
  cancelled = GLM5RT_ERR_CANCELLED,
  device = GLM5RT_ERR_DEVICE,
  no_device = GLM5RT_ERR_NO_DEVICE,
  mismatch = GLM5RT_ERR_MISMATCH,
  buffer_too_small = GLM5RT_ERR_BUFFER_TOO_SMALL,
  not_found = GLM5RT_ERR_NOT_FOUND,
  state = GLM5RT_ERR_STATE,
  internal = GLM5RT_ERR_INTERNAL,
};

class Error : public std::runtime_error {
 public:
  Error(Status status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

// Throws Error(status, concatenation of the parts); parts may be anything ostream can print.
template <typename... Parts>
[[noreturn]] void fail(Status status, const Parts&... parts);

// Throws Error(status, ...) unless cond holds. For checks on input, never for internal invariants.
template <typename... Parts>
void require(bool cond, Status status, const Parts&... parts) {
  if (!cond) fail(status, parts...);
}

}  // namespace glm5rt

#include "runtime/error_impl.hpp"
