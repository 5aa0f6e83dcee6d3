// Small file helpers shared by the checkpoint readers: errors are Status::io naming the path.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/error.hpp"

namespace glm5rt {

inline bool path_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// The whole file as bytes (config.json, index.json: small files).
inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Status::io, "cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  require(!in.bad(), Status::io, "cannot read '", path, "'");
  return ss.str();
}

}  // namespace glm5rt
