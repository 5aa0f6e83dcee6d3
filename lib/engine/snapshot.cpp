// Session snapshots: a small uncompressed header (magic, format version, model fingerprint, payload
// size) followed by one zstd frame with its content checksum, so a damaged file is detected. The payload
// holds the tokens, the logits of the last position, the RNG state and every cache record as float32
// (backend-neutral: Backend::export_records / import_records).
#include <zstd.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "engine/model.hpp"
#include "engine/session.hpp"
#include "runtime/error.hpp"

namespace glm5rt {

namespace {

constexpr char kMagic[8] = {'G', 'L', 'M', '5', 'S', 'N', 'A', 'P'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 8;

struct Writer {
  std::string bytes;
  template <typename T>
  void put(const T& v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void put_raw(const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); }
};

struct Reader {
  const std::string& bytes;
  size_t at = 0;
  void need(size_t n) {
    require(n <= bytes.size() - at, Status::format, "the snapshot is truncated");
  }
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  void get_raw(void* p, size_t n) {
    need(n);
    std::memcpy(p, bytes.data() + at, n);
    at += n;
  }
};

}  // namespace

struct SnapshotIo {
  static void save(const Session& s, const std::string& path) {
    const Backend& be = *s.model_->backend();
    const ModelConfig& c = be.config();
    const auto& st = s.state_;
    const int64_t n = s.n_tokens(), rec = be.record_floats_per_token();
    Writer w;
    w.put(static_cast<uint32_t>(c.vocab_size));
    w.put(static_cast<uint32_t>(c.num_hidden_layers));
    w.put(static_cast<uint32_t>(rec));
    w.put(static_cast<uint64_t>(n));
    w.put_raw(st.tokens.data(), st.tokens.size() * sizeof(int32_t));
    if (n > 0) {  // logits() copies a device-resident row to the host first
      const auto& l = s.logits();
      w.put_raw(l.data(), l.size() * sizeof(float));
    }
    for (uint64_t word : st.rng.state()) w.put(word);
    std::vector<float> records(static_cast<size_t>(n * rec));
    if (n > 0) be.export_records(*st.cache, st.table.pages, n, records.data());
    w.put_raw(records.data(), records.size() * sizeof(float));

    std::string z(ZSTD_compressBound(w.bytes.size()), '\0');
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    require(cctx != nullptr, Status::out_of_memory, "cannot create a zstd context");
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    const size_t zn = ZSTD_compress2(cctx, z.data(), z.size(), w.bytes.data(), w.bytes.size());
    ZSTD_freeCCtx(cctx);
    require(!ZSTD_isError(zn), Status::internal, "zstd compression failed: ", ZSTD_getErrorName(zn));
    z.resize(zn);

    Writer h;
    h.put_raw(kMagic, sizeof kMagic);
    h.put(kFormatVersion);
    h.put(s.model_->checkpoint().fingerprint());
    h.put(static_cast<uint64_t>(w.bytes.size()));
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    require(f.good(), Status::io, "cannot open ", path, " for writing");
    f.write(h.bytes.data(), static_cast<std::streamsize>(h.bytes.size()));
    f.write(z.data(), static_cast<std::streamsize>(z.size()));
    f.close();
    require(f.good(), Status::io, "writing ", path, " failed");
  }

  static void load(Session& s, const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    require(f.good(), Status::io, "cannot open ", path);
    std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    require(!f.bad(), Status::io, "reading ", path, " failed");
    require(file.size() >= kHeaderBytes && std::memcmp(file.data(), kMagic, sizeof kMagic) == 0, Status::format,
            path, " is not a glm5rt session snapshot");
    Reader h{file, sizeof kMagic};
    const uint32_t version = h.get<uint32_t>();
    require(version == kFormatVersion, Status::mismatch, path, " has snapshot format version ", version,
            ", this library reads version ", kFormatVersion);
    const uint64_t fp = h.get<uint64_t>();
    const uint64_t mine = s.model_->checkpoint().fingerprint();
    require(fp == mine, Status::mismatch, path, " was saved from another model (fingerprint ", std::hex, fp,
            ", this model's is ", mine, ")");
    const uint64_t raw_size = h.get<uint64_t>();
    const unsigned long long frame = ZSTD_getFrameContentSize(file.data() + kHeaderBytes, file.size() - kHeaderBytes);
    require(frame != ZSTD_CONTENTSIZE_ERROR && frame != ZSTD_CONTENTSIZE_UNKNOWN && frame == raw_size &&
                raw_size < (1ull << 40),
            Status::format, path, " is damaged (bad compressed frame)");
    std::string payload(static_cast<size_t>(raw_size), '\0');
    const size_t got = ZSTD_decompress(payload.data(), payload.size(), file.data() + kHeaderBytes,
                                       file.size() - kHeaderBytes);
    require(!ZSTD_isError(got) && got == raw_size, Status::format, path, " is damaged (",
            ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short payload", ")");

    Backend& be = *s.model_->backend();
    const ModelConfig& c = be.config();
    Reader r{payload};
    const uint32_t vocab = r.get<uint32_t>(), layers = r.get<uint32_t>(), rec = r.get<uint32_t>();
    require(vocab == c.vocab_size && layers == c.num_hidden_layers &&
                static_cast<int64_t>(rec) == be.record_floats_per_token(),
            Status::mismatch, path, " holds records of another model shape");
    const uint64_t n = r.get<uint64_t>();
    require(n <= static_cast<uint64_t>(s.max_tokens_), Status::cache_full, path, " holds ", n,
            " tokens, this session's max_tokens is ", s.max_tokens_);
    Session::State st = s.fresh_state();
    st.tokens.resize(static_cast<size_t>(n));
    r.get_raw(st.tokens.data(), st.tokens.size() * sizeof(int32_t));
    for (int32_t t : st.tokens) require(t >= 0 && t < c.vocab_size, Status::format, path, " holds an invalid token");
    if (n > 0) {
      st.logits.resize(static_cast<size_t>(c.vocab_size));
      r.get_raw(st.logits.data(), st.logits.size() * sizeof(float));
      st.logits_on_host = true;  // sampled on the host until the next forward puts a row on the device
    }
    std::array<uint64_t, 4> rng;
    for (auto& word : rng) word = r.get<uint64_t>();
    st.rng.set_state(rng);
    std::vector<float> records(static_cast<size_t>(n) * rec);
    r.get_raw(records.data(), records.size() * sizeof(float));
    require(r.at == payload.size(), Status::format, path, " has trailing bytes");
    const int32_t ps = s.params_.page_size;
    st.table.pages = st.pool->allocate((static_cast<int64_t>(n) + ps - 1) / ps);
    if (n > 0) be.import_records(*st.cache, st.table.pages, static_cast<int64_t>(n), records.data());
    Session::release_pages(s.state_);  // commit: nothing above touched the session
    s.state_ = std::move(st);
  }
};

void Session::save_file(const std::string& path) const { SnapshotIo::save(*this, path); }
void Session::load_file(const std::string& path) { SnapshotIo::load(*this, path); }

}  // namespace glm5rt
