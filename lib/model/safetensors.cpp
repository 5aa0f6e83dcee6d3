// safetensors: header validation, memory mapping, sharded sets. See safetensors.hpp.
#include "model/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "model/text_file.hpp"
#include "runtime/error.hpp"

namespace glm5rt {

using json = nlohmann::json;

DType parse_safetensors_dtype(const std::string& s, const std::string& tensor, const std::string& label) {
  if (s == "F32") return DType::f32;
  if (s == "BF16") return DType::bf16;
  if (s == "F16") return DType::f16;
  if (s == "F8_E4M3") return DType::fp8_e4m3;
  if (s == "I32") return DType::i32;
  if (s == "I64") return DType::i64;
  fail(Status::format, label, ": tensor '", tensor, "' has dtype '", s,
       "', which this library does not support (F32, BF16, F16, F8_E4M3, I32, I64)");
}

namespace {

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A non-negative JSON integer (no floats, no negatives), or a format error naming what it is.
uint64_t json_uint(const json& v, const std::string& label, const std::string& tensor, const char* what) {
  require(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), Status::format, label,
          ": tensor '", tensor, "': ", what, " must be a non-negative integer, got ", v.dump());
  return v.get<uint64_t>();
}

// SAX handler counting the keys of the top-level object and remembering the first repeated one.
class TopLevelKeys : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth_, true; }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return ++depth_, true; }
  bool end_array() override { return --depth_, true; }
  bool key(string_t& k) override {
    if (depth_ == 1 && duplicate.empty() && !seen_.insert(k).second) duplicate = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
  std::string duplicate;

 private:
  int depth_ = 0;
  std::set<std::string> seen_;
};

// The first top-level key that appears twice in the JSON text, or "" (n_unique: keys the parsed object has).
std::string find_duplicate_top_level_key(const uint8_t* text, uint64_t len, size_t n_unique) {
  // Cheap pre-check: count top-level keys without storing them; equal counts mean no duplicates.
  struct Counter : TopLevelKeys {
    size_t keys = 0;
    int d = 0;
    bool start_object(std::size_t) override { return ++d, true; }
    bool end_object() override { return --d, true; }
    bool start_array(std::size_t) override { return ++d, true; }
    bool end_array() override { return --d, true; }
    bool key(string_t&) override { return keys += d == 1, true; }
  } counter;
  json::sax_parse(text, text + len, &counter);
  if (counter.keys == n_unique) return "";
  TopLevelKeys finder;
  json::sax_parse(text, text + len, &finder);
  return finder.duplicate;
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, uint64_t data_size, const std::string& label) {
  require(v.is_object(), Status::format, label, ": header entry '", name, "' is not an object");
  auto dt = v.find("dtype");
  auto sh = v.find("shape");
  auto off = v.find("data_offsets");
  require(dt != v.end() && dt->is_string(), Status::format, label, ": tensor '", name,
          "' has no string 'dtype'");
  require(sh != v.end() && sh->is_array(), Status::format, label, ": tensor '", name, "' has no array 'shape'");
  require(off != v.end() && off->is_array() && off->size() == 2, Status::format, label, ": tensor '", name,
          "' needs 'data_offsets' [begin, end]");
  for (auto it = v.begin(); it != v.end(); ++it) {
    require(it.key() == "dtype" || it.key() == "shape" || it.key() == "data_offsets", Status::format, label,
            ": tensor '", name, "' has an unknown field '", it.key(), "'");
  }
  SafetensorsEntry e;
  e.name = name;
  e.dtype = parse_safetensors_dtype(dt->get<std::string>(), name, label);
  require(sh->size() <= 8, Status::format, label, ": tensor '", name, "' has ", sh->size(),
          " dimensions (at most 8)");
  uint64_t bytes = dtype_size(e.dtype);
  for (const auto& d : *sh) {
    const uint64_t n = json_uint(d, label, name, "every shape entry");
    require(n <= (uint64_t{1} << 53), Status::format, label, ": tensor '", name, "' dimension ", n,
            " is absurdly large");
    e.shape.push_back(static_cast<int64_t>(n));
    require(!__builtin_mul_overflow(bytes, n, &bytes), Status::format, label, ": tensor '", name,
            "' shape overflows 64-bit byte counts");
  }
  e.begin = json_uint((*off)[0], label, name, "data_offsets[0]");
  e.end = json_uint((*off)[1], label, name, "data_offsets[1]");
  require(e.begin <= e.end, Status::format, label, ": tensor '", name, "' data_offsets [", e.begin, ", ", e.end,
          "] run backwards");
  require(e.end <= data_size, Status::format, label, ": tensor '", name, "' data_offsets [", e.begin, ", ", e.end,
          "] reach past the data section (", data_size, " bytes): truncated or damaged file");
  require(e.end - e.begin == bytes, Status::format, label, ": tensor '", name, "' shape x dtype (",
          dtype_name(e.dtype), ") is ", bytes, " bytes but its data_offsets span ", e.end - e.begin, " bytes");
  return e;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const uint8_t* file, uint64_t file_size, const std::string& label) {
  require(file_size >= 8, Status::format, label, ": ", file_size,
          " bytes is too short for a safetensors file (8-byte header length missing)");
  const uint64_t n = read_u64_le(file);
  require(n <= kMaxSafetensorsHeader, Status::format, label, ": header length ", n, " exceeds the ",
          kMaxSafetensorsHeader, "-byte limit: not a safetensors file or damaged");
  require(n <= file_size - 8, Status::format, label, ": header length ", n, " reaches past the end of the ",
          file_size, "-byte file: truncated file");
  require(n >= 2 && file[8] == '{', Status::format, label, ": the header is not a JSON object");

  SafetensorsHeader h;
  h.data_offset = 8 + n;
  h.data_size = file_size - h.data_offset;

  json j;
  std::string duplicate;
  try {
    j = json::parse(file + 8, file + 8 + n);
    // Top-level keys are tensor names; nlohmann keeps the last of duplicated keys silently, so a SAX pass
    // counts them (nlohmann's parser callback would do it in one pass but is quadratic in the key count).
    if (j.is_object()) duplicate = find_duplicate_top_level_key(file + 8, n, j.size());
  } catch (const json::exception& e) {
    fail(Status::format, label, ": the header is not valid JSON: ", e.what());
  }
  require(j.is_object(), Status::format, label, ": the header is not a JSON object");
  require(duplicate.empty(), Status::format, label, ": tensor '", duplicate, "' appears twice in the header");

  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      require(it->is_object(), Status::format, label, ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        require(m->is_string(), Status::format, label, ": __metadata__ value '", m.key(), "' is not a string");
        h.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    require(!it.key().empty(), Status::format, label, ": a tensor has an empty name");
    h.tensors.push_back(parse_entry(it.key(), *it, h.data_size, label));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < h.tensors.size(); ++i) {
    const auto& a = h.tensors[i - 1];
    const auto& b = h.tensors[i];
    require(b.begin >= a.end, Status::format, label, ": tensors '", a.name, "' [", a.begin, ", ", a.end, ") and '",
            b.name, "' [", b.begin, ", ", b.end, ") overlap");
  }
  return h;
}

// ---------------------------------------------------------------------------------------------------

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  require(fd >= 0, Status::io, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(Status::io, "cannot stat '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(Status::io, "'", path, "' is not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    // MAP_PRIVATE + PROT_READ: pages come from the page cache on demand and are never written back; no
    // copy of the file lives in our heap.
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail(err == ENOMEM ? Status::out_of_memory : Status::io, "cannot map '", path, "' (", f->size_,
           " bytes): ", std::strerror(err));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return f;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

// ---------------------------------------------------------------------------------------------------

namespace {

// A shard name from weight_map must be a plain file name inside the checkpoint directory.
void check_shard_name(const std::string& f, const std::string& label) {
  require(!f.empty() && f.find('/') == std::string::npos && f.find('\\') == std::string::npos && f != "." &&
              f != "..",
          Status::format, label, ": shard file name '", f, "' must be a plain file name in the checkpoint directory");
}

}  // namespace

void SafetensorsSet::add_file(std::shared_ptr<MappedFile> f) {
  const SafetensorsHeader h = parse_safetensors_header(f->data(), f->size(), f->path());
  const size_t index = files_.size();
  for (const auto& e : h.tensors) {
    auto [it, fresh] = tensors_.try_emplace(e.name);
    if (!fresh)
      fail(Status::format, "tensor '", e.name, "' is stored twice: in '", files_[it->second.file_index]->path(),
           "' and in '", f->path(), "'");
    it->second.entry = e;
    it->second.data = f->data() + h.data_offset + e.begin;
    it->second.file_index = index;
  }
  files_.push_back(std::move(f));
}

SafetensorsSet SafetensorsSet::open_file(const std::string& path) {
  SafetensorsSet s;
  s.add_file(MappedFile::open(path));
  return s;
}

SafetensorsSet SafetensorsSet::open_dir(const std::string& dir, const std::function<bool(float)>& progress) {
  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  SafetensorsSet s;
  if (!path_exists(index_path)) {
    require(path_exists(single_path), Status::io, "no model.safetensors or model.safetensors.index.json in '", dir,
            "'");
    s.add_file(MappedFile::open(single_path));
    if (progress && !progress(1.0f)) fail(Status::cancelled, "loading cancelled by the progress callback");
    return s;
  }

  json idx;
  try {
    idx = json::parse(read_text_file(index_path));
  } catch (const json::exception& e) {
    fail(Status::format, index_path, ": not valid JSON: ", e.what());
  }
  require(idx.is_object(), Status::format, index_path, ": not a JSON object");
  auto wm = idx.find("weight_map");
  require(wm != idx.end() && wm->is_object(), Status::format, index_path, ": no 'weight_map' object");
  require(!wm->empty(), Status::format, index_path, ": 'weight_map' is empty");
  std::map<std::string, std::string> where;  // tensor -> shard file
  std::vector<std::string> shards;           // in first-seen order
  std::set<std::string> shard_set;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    require(it->is_string(), Status::format, index_path, ": weight_map['", it.key(), "'] is not a file name");
    const std::string f = it->get<std::string>();
    check_shard_name(f, index_path);
    where[it.key()] = f;
    if (shard_set.insert(f).second) shards.push_back(f);
  }
  std::sort(shards.begin(), shards.end());
  // Fail on a missing shard before mapping any file, naming every one that is absent.
  std::string missing;
  for (const auto& f : shards)
    if (!path_exists(dir + "/" + f)) missing += (missing.empty() ? "" : ", ") + f;
  require(missing.empty(), Status::io, index_path, ": shard file(s) missing from '", dir, "': ", missing);

  for (size_t i = 0; i < shards.size(); ++i) {
    s.add_file(MappedFile::open(dir + "/" + shards[i]));
    if (progress && !progress(static_cast<float>(i + 1) / static_cast<float>(shards.size())))
      fail(Status::cancelled, "loading cancelled by the progress callback");
  }
  for (const auto& [name, f] : where) {
    auto t = s.tensors_.find(name);
    require(t != s.tensors_.end(), Status::format, index_path, ": tensor '", name, "' is listed in shard '", f,
            "' but no shard stores it");
    const std::string& actual = s.files_[t->second.file_index]->path();
    require(actual == dir + "/" + f, Status::format, index_path, ": tensor '", name, "' is listed in shard '", f,
            "' but is stored in '", actual, "'");
  }
  return s;
}

uint64_t SafetensorsSet::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.entry.end - t.entry.begin;
  return n;
}

}  // namespace glm5rt
