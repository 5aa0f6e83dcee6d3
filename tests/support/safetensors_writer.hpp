// Test helpers: write (possibly malformed) safetensors files and whole checkpoint directories into a
// temporary directory. Written from the format description, independent of lib/model's reader.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace glm5rt::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/glm5rt-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REQUIRE(out);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One tensor to store: dtype as the file spells it, shape, raw little-endian bytes.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

inline std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  return s;
}

// A safetensors file from an explicit header JSON text and data section.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// A well-formed file: tensors laid out in name order, each preceded by `gap` unused bytes (gap = 1 puts
// every tensor at an odd offset, which the format allows).
inline std::string safetensors_bytes(const std::map<std::string, RawTensor>& tensors, size_t gap = 0,
                                     const nlohmann::json& metadata = nlohmann::json::object({{"format", "pt"}})) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.is_null()) h["__metadata__"] = metadata;
  std::string data;
  for (const auto& [name, t] : tensors) {
    data.append(gap, '\0');
    const uint64_t begin = data.size();
    data += t.bytes;
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  return safetensors_bytes(h.dump(), data);
}

inline std::string f32_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

}  // namespace glm5rt::test
