// safetensors reader: the header parser (pure, on bytes; also the fuzz target) and memory-mapped files,
// single or sharded through model.safetensors.index.json. Nothing is copied: tensor data stays in the
// private read-only mappings, so a 750 GB checkpoint costs address space, not host memory.
//
// File format (https://github.com/huggingface/safetensors): u64 little-endian N, then N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data section; offsets are relative to the start of the data section.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/weights.hpp"

namespace glm5rt {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range inside the data section
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;  // 8 + N: where the data section starts in the file
  uint64_t data_size = 0;    // file size - data_offset
  std::vector<SafetensorsEntry> tensors;  // in data_offsets order
  std::map<std::string, std::string> metadata;
};

// The largest header accepted (the reference implementation's limit): a bigger N is a damaged file.
constexpr uint64_t kMaxSafetensorsHeader = 100u << 20;

// Parses and validates the header at the start of `file` (file_size bytes; only the first 8 + N are
// read): header length vs file size, JSON syntax, every entry's dtype, shape, shape x dtype size == byte
// span, offsets inside the data section, no two tensors overlapping. `label` (usually the path) starts
// every error message. Throws Error(Status::format) on anything wrong.
SafetensorsHeader parse_safetensors_header(const uint8_t* file, uint64_t file_size, const std::string& label);

// DType of a safetensors dtype string; throws format naming the tensor for unsupported ones.
DType parse_safetensors_dtype(const std::string& s, const std::string& tensor, const std::string& label);

// A read-only, private memory mapping of a whole file (munmap on destruction).
class MappedFile {
 public:
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

// One tensor of a (possibly sharded) safetensors checkpoint: its header entry plus where its bytes are.
struct SafetensorsTensor {
  SafetensorsEntry entry;
  const uint8_t* data = nullptr;  // inside a MappedFile of the set
  size_t file_index = 0;
};

// All tensors of a checkpoint directory: model.safetensors.index.json (sharded) when present, else
// model.safetensors. Validates the index (JSON, weight_map, shard file names, every listed tensor present
// in its shard, no tensor stored twice across shards). Missing files are Status::io.
class SafetensorsSet {
 public:
  // progress(fraction of shards opened) is called after each shard; returning false cancels
  // (Status::cancelled). May be empty.
  static SafetensorsSet open_dir(const std::string& dir, const std::function<bool(float)>& progress = {});
  // One file, no index (tests, tools).
  static SafetensorsSet open_file(const std::string& path);

  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const std::vector<std::shared_ptr<MappedFile>>& files() const { return files_; }
  uint64_t total_bytes() const;  // sum of all tensors' byte spans

 private:
  void add_file(std::shared_ptr<MappedFile> f);
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

}  // namespace glm5rt
