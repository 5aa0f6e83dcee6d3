// The runtime's error plumbing and the ABI shim helpers.
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>

#include "bindings_c/shim.hpp"
#include "runtime/error.hpp"

using namespace glm5rt;

TEST_CASE("guard converts exceptions into status codes and last-error text") {
  CHECK(abi::guard("f", [] {}) == GLM5RT_OK);
  CHECK(abi::guard("load", [] { fail(Status::format, "tensor ", "x", " has ", 3, " dims"); }) == GLM5RT_ERR_FORMAT);
  CHECK(std::string(glm5rt_last_error()) == "load: tensor x has 3 dims");
  CHECK(abi::guard("g", [] { throw std::bad_alloc(); }) == GLM5RT_ERR_OUT_OF_MEMORY);
  CHECK(abi::guard("h", [] { throw std::logic_error("boom"); }) == GLM5RT_ERR_INTERNAL);
  CHECK(std::string(glm5rt_last_error()).find("boom") != std::string::npos);
  CHECK(abi::guard("i", [] { throw 42; }) == GLM5RT_ERR_INTERNAL);
}

TEST_CASE("read_params keeps defaults beyond an older caller's struct_size") {
  glm5rt_session_params old_caller;
  glm5rt_session_default_params(&old_caller);
  old_caller.max_tokens = 777;
  old_caller.page_size = 16;  // lies beyond the size we claim below: must not be read
  old_caller.struct_size = offsetof(glm5rt_session_params, page_size);
  auto p = abi::read_params(&old_caller, glm5rt_session_default_params, "params");
  CHECK(p.max_tokens == 777);
  CHECK(p.page_size == 64);
  CHECK(p.struct_size == sizeof(glm5rt_session_params));

  glm5rt_session_params zeroed;
  std::memset(&zeroed, 0, sizeof zeroed);
  CHECK_THROWS_AS(abi::read_params(&zeroed, glm5rt_session_default_params, "params"), Error);
  CHECK(abi::read_params<glm5rt_session_params>(nullptr, glm5rt_session_default_params, "p").page_size == 64);
}

TEST_CASE("write_sized follows the size-query idiom") {
  const int32_t data[3] = {1, 2, 3};
  size_t n = 0;
  abi::write_sized(data, 3, static_cast<int32_t*>(nullptr), 0, &n, "ids");
  CHECK(n == 3);
  int32_t small[2] = {-1, -1};
  n = 0;
  CHECK_THROWS_AS(abi::write_sized(data, 3, small, 2, &n, "ids"), Error);
  CHECK(n == 3);
  CHECK(small[0] == -1);
  int32_t big[4] = {};
  abi::write_sized(data, 3, big, 4, &n, "ids");
  CHECK(n == 3);
  CHECK(big[2] == 3);
}
