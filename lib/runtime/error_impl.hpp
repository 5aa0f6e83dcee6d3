// Template definitions for error.hpp (kept apart so error.hpp reads as an interface).
#pragma once

#include <sstream>

namespace glm5rt {

template <typename... Parts>
[[noreturn]] void fail(Status status, const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(status, os.str());
}

}  // namespace glm5rt
